"""The built-in loop's ``planning_tool_choice`` and images, end to end on the embedded engine."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from dex_agents import AgentSessionClient
from dex_agents.adapters.media.memory_store import InMemoryMediaStore
from dex_agents.app.builtin_loop.definition import AgentDefinition
from dex_agents.app.builtin_loop.function_tools import (
    FunctionToolResult,
    ToolCallContext,
    function_tool,
)
from dex_agents.app.builtin_loop.runner import BuiltinLoopAgentRunner
from dex_agents.app.builtin_loop.scripted_model import (
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
)
from dex_agents.builtin_loop import builtin_agent_session_flow
from dex_agents.domain.errors import ImageValidationError
from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.domain.model_io import ModelRequest, ModelToolChoice, UserTextItem
from dex_agents.domain.plans import PlanStatus
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.tool_effects import ToolEffect
from dex_agents.domain.wire import to_wire
from dex_agents.ports.flow_store import FlowStore
from dex_agents.ports.media_store import MediaStore
from dex_agents.ports.runner import ImageUserMessageBuilder, ToolTaskPoller
from tests.app import harness
from tests.app.fake_tool_source import FakeSource
from tests.domain.images_support import png

PNG = png()
TODOS = {"todos": [{"content": "back up", "status": "pending"}]}


@dataclass
class Stack:
    sessions: AgentSessionClient

    async def idle(self, turns: int = 1) -> AgentSnapshot:
        return await harness.idle(self.sessions, turns=turns)


@contextlib.asynccontextmanager
async def running(
    store: FlowStore, definition: AgentDefinition, media_store: MediaStore | None = None
) -> AsyncIterator[Stack]:
    flow = builtin_agent_session_flow(definition, flow_type="PlanAgent", media_store=media_store)
    async with harness.serving(store, flow) as client:
        yield Stack(AgentSessionClient(client, flow))


def agent(
    respond: Callable[[ModelRequest], ScriptedModelReply], **fields: Any
) -> tuple[AgentDefinition, ScriptedModelClient]:
    model = ScriptedModelClient(respond)
    definition = AgentDefinition(
        name="planner", instructions="You plan carefully.", model=model, **fields
    )
    return definition, model


class RefusingModel(ScriptedModelClient):
    """A model that refuses a forced tool choice with extended thinking on."""

    def supports_forced_tool_choice(self, settings: Mapping[str, Any]) -> bool:
        return "thinking" not in settings


def text_reply(request: ModelRequest) -> ScriptedModelReply:
    return ScriptedModelReply(text="Which database do you mean?")


def plan_or_answer(request: ModelRequest) -> ScriptedModelReply:
    if ScriptedModelClient.tool_results(request):
        return ScriptedModelReply(text="The plan is ready.")
    if request.tool_choice is ModelToolChoice.REQUIRED:
        return ScriptedModelReply(tool_calls=[ScriptedToolCall("write_todos", TODOS)])
    return ScriptedModelReply(text="Which database do you mean?")


@function_tool(effect=ToolEffect.READ)
async def lookup_order(order_id: str) -> str:
    """Look up an order by its ID."""
    return f"order {order_id}"


# planning_tool_choice


def test_planning_tool_choice_is_auto_by_default() -> None:
    definition, _ = agent(text_reply)
    assert definition.planning_tool_choice == "auto"


def test_an_unknown_planning_tool_choice_is_refused() -> None:
    with pytest.raises(ValueError, match="planning_tool_choice") as raised:
        agent(text_reply, planning_tool_choice="always")
    assert str(raised.value) == (
        'AgentDefinition.planning_tool_choice must be "auto" or "required", not \'always\''
    )


@pytest.mark.parametrize(
    ("settings", "accepted"),
    [({}, True), ({"thinking": {"type": "enabled"}}, False)],
)
def test_required_needs_a_model_that_accepts_a_forced_tool_choice(
    settings: dict[str, Any], accepted: bool
) -> None:
    fields: dict[str, Any] = {
        "name": "planner",
        "instructions": "Plan.",
        "model": RefusingModel(text_reply),
        "model_settings": settings,
        "planning_tool_choice": "required",
    }
    if accepted:
        assert AgentDefinition(**fields).planning_tool_choice == "required"
        return
    with pytest.raises(ValueError, match="forced tool choice") as raised:
        AgentDefinition(**fields)
    assert str(raised.value) == (
        'planning_tool_choice "required" needs a model that accepts a forced tool choice, '
        "but the model client of agent planner refuses one with model_settings "
        "{'thinking': {'type': 'enabled'}}"
    )
    # "auto" never forces a tool, so any model may plan with it.
    fields["planning_tool_choice"] = "auto"
    assert AgentDefinition(**fields).planning_tool_choice == "auto"


async def test_required_forces_write_todos_on_the_first_call_while_no_draft_exists(
    store: FlowStore,
) -> None:
    definition, model = agent(
        plan_or_answer,
        tools=[lookup_order],
        plan_mode_enabled=True,
        planning_tool_choice="required",
    )
    async with running(store, definition) as stack:
        await stack.sessions.start_session("s1", "Plan the migration", plan_mode=True)
        snapshot = await stack.idle()
        assert snapshot.plan is not None
        assert (snapshot.plan.revision, snapshot.plan.status) == (1, PlanStatus.DRAFT)
        first, second = model.requests
        assert [tool.name for tool in first.tools] == ["write_todos"]
        assert first.tool_choice is ModelToolChoice.REQUIRED
        assert [tool.name for tool in second.tools] == ["write_todos"]
        assert second.tool_choice is ModelToolChoice.AUTO
        # Feedback on a draft is a planning turn, but a draft exists: nothing is forced.
        assert await stack.sessions.send_user_message("s1", "Looks fine") is True
        await stack.idle(turns=2)
        feedback = model.requests[-1]
        assert [tool.name for tool in feedback.tools] == ["write_todos"]
        assert feedback.tool_choice is ModelToolChoice.AUTO
        # An ordinary chat turn offers every tool and forces none.
        assert await stack.sessions.execute_plan("s1", 1) is True
        await stack.idle(turns=3)
        executing = model.requests[-1]
        assert executing.tool_choice is ModelToolChoice.AUTO
        assert {tool.name for tool in executing.tools} == {"lookup_order", "write_todos"}


async def test_required_forces_nothing_on_a_resolved_model_that_refuses_a_forced_choice(
    store: FlowStore,
) -> None:
    # AgentDefinition checks only its own model; forcing the tool on one that
    # resolve_model picks and that refuses would fail every attempt of the turn.
    thinking = {"thinking": {"type": "enabled"}}
    refusing = RefusingModel(plan_or_answer)
    model = ScriptedModelClient(plan_or_answer)
    definition = AgentDefinition(
        name="planner",
        instructions="You plan carefully.",
        model=model,
        model_settings=thinking,
        resolve_model=lambda settings: refusing if settings.get("model") == "opus" else model,
        plan_mode_enabled=True,
        planning_tool_choice="required",
    )
    async with running(store, definition) as stack:
        await stack.sessions.start_session(
            "s1", "Plan the migration", plan_mode=True, session_settings={"model": "opus"}
        )
        snapshot = await stack.idle()
        assert snapshot.state is not None
        assert snapshot.state.last_turn_error is None
        assert snapshot.plan is None
        (request,) = refusing.requests
        assert [tool.name for tool in request.tools] == ["write_todos"]
        assert request.tool_choice is ModelToolChoice.AUTO
        assert model.requests == []


async def test_auto_offers_only_write_todos_and_a_text_answer_ends_without_a_draft(
    store: FlowStore,
) -> None:
    definition, model = agent(text_reply, tools=[lookup_order], plan_mode_enabled=True)
    async with running(store, definition) as stack:
        await stack.sessions.start_session("s1", "Plan the migration", plan_mode=True)
        snapshot = await stack.idle()
        assert snapshot.plan is None
        assert snapshot.messages[-1].text == "Which database do you mean?"
        (request,) = model.requests
        assert [tool.name for tool in request.tools] == ["write_todos"]
        assert request.tool_choice is ModelToolChoice.AUTO


# Images


def echo_images(request: ModelRequest) -> ScriptedModelReply:
    return ScriptedModelReply(text=f"saw {len(request.image_bytes)} images")


@pytest.mark.parametrize(
    ("media_store", "sources", "builder", "poller"),
    [
        (False, False, False, False),
        (True, False, True, False),
        (False, True, False, True),
        (True, True, True, True),
    ],
)
def test_the_runner_builds_image_messages_only_with_a_media_store(
    media_store: bool, sources: bool, builder: bool, poller: bool
) -> None:
    source_list = [FakeSource("files")] if sources else []
    definition, _ = agent(echo_images, tool_sources=source_list)
    runner = BuiltinLoopAgentRunner(
        definition, media_store=InMemoryMediaStore() if media_store else None
    )
    assert isinstance(runner, BuiltinLoopAgentRunner)
    assert isinstance(runner, ImageUserMessageBuilder) is builder
    assert isinstance(runner, ToolTaskPoller) is poller


async def test_a_user_message_with_an_image_reaches_the_model_with_its_bytes(
    store: FlowStore,
) -> None:
    media = InMemoryMediaStore()
    image = await media.put_image(PNG)
    definition, model = agent(echo_images)
    async with running(store, definition, media) as stack:
        await stack.sessions.start_session("s1", "Hello")
        await stack.idle()
        sent = await stack.sessions.send_user_message("s1", "What is this?", images=[image])
        assert sent is True
        snapshot = await stack.idle(turns=2)
        request = model.requests[-1]
        assert request.image_bytes == {image.sha256: PNG}
        assert [item.images for item in request.items if isinstance(item, UserTextItem)] == [
            (),
            (image,),
        ]
        assert snapshot.messages[-1].text == "saw 1 images"
        hello, question = (m for m in snapshot.messages if m.text in ("Hello", "What is this?"))
        assert hello.framework_item == '{"type":"user_text","text":"Hello"}'
        stored = json.loads(question.framework_item)
        assert list(stored) == ["type", "text", "images"]
        assert stored["images"] == [to_wire(image)]
        assert question.images == (image,)


async def test_without_a_media_store_the_session_refuses_images(store: FlowStore) -> None:
    image = await InMemoryMediaStore().put_image(PNG)
    definition, model = agent(echo_images)
    async with running(store, definition) as stack:
        await stack.sessions.start_session("s1", "Hello")
        await stack.idle()
        sent = await stack.sessions.send_user_message("s1", "What is this?", images=[image])
        assert sent is False
        assert await stack.sessions.send_user_message("s1", "Just text") is True
        await stack.idle(turns=2)
        assert all(request.image_bytes == {} for request in model.requests)


async def test_an_image_of_another_store_is_refused_before_it_is_stored(
    store: FlowStore,
) -> None:
    # The runner reads each stored image again for every later model call, so one of
    # another store would fail every later turn of the session, not just this one.
    media = InMemoryMediaStore("memory://ours")
    theirs = await InMemoryMediaStore("memory://theirs").put_image(PNG)
    definition, model = agent(echo_images)
    refusal = r"image 1: the message has image uri 'memory://theirs/sha256/.*not in the runner's"
    async with running(store, definition, media) as stack:
        sessions = stack.sessions
        with pytest.raises(ImageValidationError, match=refusal):
            await sessions.start_session("s1", "Hello", images=[theirs])
        await sessions.start_session("s1", "Hello")
        await stack.idle()
        with pytest.raises(ImageValidationError, match=refusal):
            await sessions.send_user_message("s1", "What is this?", images=[theirs])
        with pytest.raises(ImageValidationError, match=refusal):
            await sessions.steer_user_message("s1", text="And this?", images=[theirs])
        # A client that skips its own checks meets the same rule in the session.
        message = AgentUserMessage(text="What is this?", images=(theirs,))
        with pytest.raises(ImageValidationError, match=refusal):
            await sessions._invoke("s1", "send_user_message", message)
        assert await sessions.send_user_message("s1", "Just text") is True
        snapshot = await stack.idle(turns=2)
        texts = [message.text for message in snapshot.messages]
        assert texts == ["Hello", "saw 0 images", "Just text", "saw 0 images"]
        assert all(request.image_bytes == {} for request in model.requests)


async def test_a_function_tool_image_is_shown_to_the_next_model_call(store: FlowStore) -> None:
    media = InMemoryMediaStore()
    uploaded: list[AgentImageReference] = []

    @function_tool(effect=ToolEffect.READ)
    async def take_screenshot(context: ToolCallContext) -> str | FunctionToolResult:
        """Take a screenshot of the screen."""
        if context.media_store is None:
            return "Screenshots need a media store."
        reference = await context.media_store.put_image(PNG)
        uploaded.append(reference)
        return FunctionToolResult(output="Took a screenshot.", images=[reference])

    def respond(request: ModelRequest) -> ScriptedModelReply:
        results = ScriptedModelClient.tool_results(request)
        if results:
            return ScriptedModelReply(text=f"{results[0].output} ({len(request.image_bytes)})")
        return ScriptedModelReply(tool_calls=[ScriptedToolCall("take_screenshot", {})])

    definition, model = agent(respond, tools=[take_screenshot])
    async with running(store, definition, media) as stack:
        await stack.sessions.start_session("s1", "Show me the screen")
        snapshot = await stack.idle()
        image = uploaded[0]
        after = model.requests[-1]
        (result,) = ScriptedModelClient.tool_results(after)
        assert (result.output, result.images) == ("Took a screenshot.", (image,))
        assert after.image_bytes == {image.sha256: PNG}
        assert snapshot.messages[-1].text == "Took a screenshot. (1)"
        tool_message = next(m for m in snapshot.messages if m.tool_output is not None)
        stored = json.loads(tool_message.framework_item)
        assert list(stored) == ["type", "tool_call_id", "tool_name", "output", "images"]
        assert stored["images"] == [to_wire(image)]
        assert tool_message.images == (image,)
