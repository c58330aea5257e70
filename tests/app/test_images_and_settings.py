"""Images in the session Flow (user messages, tool results, runner messages) and session settings."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest

from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.app.options import AgentSessionOptions, RunModelLimit
from dex_agents.domain.errors import ImageValidationError
from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.messages import FrameworkMessage, MessageRole
from dex_agents.domain.runner_outcomes import AgentTurnOutcome, ToolExecutionResult, TurnCompleted
from dex_agents.domain.session_settings import (
    INVALID_START_SESSION_SETTINGS_REASON,
    MAX_SESSION_SETTINGS_BYTES,
    SESSION_SETTINGS_SIZE_TOLERANCE_BYTES,
    session_settings_size,
)
from dex_agents.domain.state import AgentSessionStartInput, TurnSessionSettings
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from dex_agents.domain.tool_step_options import ToolCallRetryPolicy, ToolCallStepOptions
from dex_agents.domain.usage import AgentUsage
from dex_agents.ports.errors import FlowNotActiveError, FlowNotFoundError
from dex_agents.ports.flow_rows import FlowStatus
from dex_agents.ports.flow_store import FlowStore
from dex_agents.ports.runner import AgentTurnContext, DeferredToolExecution
from dex_agents.ports.session_schema import TURN_SESSION_SETTINGS
from tests.app.harness import Session, session_stack
from tests.app.scripted_runner import ScriptedRunner


def reference(digit: str, mime_type: str = "image/png") -> AgentImageReference:
    sha256 = digit * 64
    return AgentImageReference(
        uri=f"s3://agent-media/sessions/sha256/{sha256}",
        mime_type=mime_type,
        sha256=sha256,
        size_bytes=48213,
    )


CHART = reference("a")
PHOTO = reference("b")
BITMAP = reference("c", mime_type="image/bmp")
BITMAP_ERROR = (
    "image 1: image mime_type 'image/bmp' is not supported; "
    "use one of image/png, image/jpeg, image/gif, image/webp"
)
READ_LOOKUP = {"lookup": ToolPolicy(ToolEffect.READ)}


@dataclass
class ImageRunner(ScriptedRunner):
    """``ScriptedRunner`` plus ``ImageUserMessageBuilder``.

    Its user items keep the references, never the bytes, and set no ``images``:
    the session sets the stored message's. ``draw`` is answered with
    ``answer_images``; its tools return ``tool_images``.
    """

    built: list[tuple[str, tuple[AgentImageReference, ...]]] = field(default_factory=list)
    tool_images: Sequence[AgentImageReference] = ()
    answer_images: Sequence[AgentImageReference] = ()

    def build_user_message_with_images(
        self, text: str, images: Sequence[AgentImageReference]
    ) -> FrameworkMessage:
        self.built.append((text, tuple(images)))
        item = {"type": "user", "text": text, "images": [image.uri for image in images]}
        return FrameworkMessage(role=MessageRole.USER, framework_item=json.dumps(item), text=text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        if turn.messages and turn.messages[-1].text == "draw":
            self.model_calls.append(turn)
            answer = FrameworkMessage(
                role=MessageRole.ASSISTANT,
                framework_item=json.dumps({"type": "assistant", "text": "drawn"}),
                text="drawn",
                images=self.answer_images,
            )
            return TurnCompleted(new_messages=[answer], usage=AgentUsage(model_calls=1))
        return await super().run_model_step(turn)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        result = await super().execute_deferred_tool_call(call)
        return ToolExecutionResult(result.output, images=self.tool_images)

    def tool_call_step_options(self, call: AgentToolCall) -> ToolCallStepOptions:
        fast = ToolCallRetryPolicy(initial_interval=timedelta(milliseconds=10))
        return ToolCallStepOptions(retry_policy=fast)


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> FlowStore:
    if request.param == "memory":
        return MemoryFlowStore()
    return SqliteFlowStore(tmp_path / "sessions.sqlite3")


async def screenshot(call: DeferredToolExecution) -> str:
    return "Took a screenshot."


async def test_a_message_with_images_is_built_by_the_runner_and_stored_with_them(
    store: FlowStore,
) -> None:
    runner = ImageRunner()
    async with session_stack(store, runner) as session:
        await session.sessions.start_session("s1", "What does this chart show?", images=[CHART])
        await session.idle()
        assert await session.sessions.send_user_message("s1", "And these?", images=[CHART, PHOTO])
        await session.idle(turns=2)
        assert await session.sessions.send_user_message("s1", "Thanks")
        snapshot = await session.idle(turns=3)
        assert runner.built == [
            ("What does this chart show?", (CHART,)),
            ("And these?", (CHART, PHOTO)),
        ]
        assert [(m.role, m.text, m.images) for m in snapshot.messages if m.role == "user"] == [
            (MessageRole.USER, "What does this chart show?", (CHART,)),
            (MessageRole.USER, "And these?", (CHART, PHOTO)),
            (MessageRole.USER, "Thanks", ()),
        ]
        # The runner keeps references in its item; the model call sees the stored images.
        assert json.loads(snapshot.messages[0].framework_item)["images"] == [CHART.uri]
        assert runner.model_calls[1].messages[-1].images == (CHART, PHOTO)
        assert json.loads(snapshot.messages[-2].framework_item) == {
            "type": "user",
            "text": "Thanks",
        }


async def test_a_runner_without_images_refuses_them() -> None:
    async with session_stack(MemoryFlowStore(), ScriptedRunner()) as session:
        await session.sessions.start_session("s1")
        await session.until("the session to start", lambda s: s.state)
        assert await session.sessions.send_user_message("s1", "look", images=[CHART]) is False
        snapshot = await session.sessions.get_agent_snapshot("s1")
        assert snapshot.queued_message_count == 0
        assert await session.sessions.send_user_message("s1", "look") is True


async def test_a_start_that_the_flow_cannot_run_is_refused_before_anything_is_sent() -> None:
    # Started anyway, the first turn failed StartAgentSession three times and the session
    # for good, or planned in a Flow without plan mode.
    async with session_stack(MemoryFlowStore(), ScriptedRunner()) as session:
        with pytest.raises(ValueError, match="runner cannot take images"):
            await session.sessions.start_session("s1", "look", images=[CHART])
        with pytest.raises(ValueError, match="has plan mode off"):
            await session.sessions.open_session("s1", plan_mode=True)
        with pytest.raises(FlowNotFoundError):
            await session.client.describe_flow("s1")
        await session.sessions.start_session("s1", "look")
        snapshot = await session.idle()
        assert snapshot.messages[-1].text == "echo: look"


async def test_images_with_a_blank_first_message_are_refused_before_anything_is_sent() -> None:
    # A blank initial_message starts no turn, so its images reached no message: the
    # session started without them and nothing said so.
    async with session_stack(MemoryFlowStore(), ImageRunner()) as session:
        with pytest.raises(ValueError, match="images need a non-blank initial_message"):
            await session.sessions.start_session("s1", " \n", images=[CHART])
        with pytest.raises(FlowNotFoundError):
            await session.client.describe_flow("s1")
        await session.sessions.start_session("s1", "  ")
        await session.until("the session to start", lambda s: s.state)
        assert (await session.sessions.get_agent_snapshot("s1")).messages == ()
        assert await session.sessions.send_user_message("s1", " ", images=[CHART]) is False


async def test_invalid_references_are_refused_before_anything_is_sent() -> None:
    async with session_stack(MemoryFlowStore(), ImageRunner()) as session:
        with pytest.raises(ImageValidationError) as raised:
            await session.sessions.start_session("s1", "look", images=[BITMAP])
        assert str(raised.value) == BITMAP_ERROR
        with pytest.raises(FlowNotFoundError):
            await session.client.describe_flow("s1")
        await session.sessions.start_session("s1")
        await session.until("the session to start", lambda s: s.state)
        with pytest.raises(ImageValidationError) as raised:
            await session.sessions.send_user_message("s1", "look", images=[CHART, BITMAP])
        assert str(raised.value) == BITMAP_ERROR.replace("image 1:", "image 2:")


async def test_tool_result_images_are_stored_on_the_record(store: FlowStore) -> None:
    runner = ImageRunner(tools={"lookup": screenshot}, tool_images=[CHART])
    async with session_stack(store, runner, AgentSessionOptions(tool_policies=READ_LOOKUP)) as s:
        await s.sessions.start_session("s1", "call lookup {}")
        await s.idle()
        (record,) = runner.model_calls[-1].tool_calls.values()
        assert (record.status, record.output, record.images) == (
            ToolCallStatus.SUCCEEDED,
            "Took a screenshot.",
            (CHART,),
        )


async def test_a_tool_result_with_an_invalid_image_fails_the_tool_step_attempt(
    store: FlowStore,
) -> None:
    runner = ImageRunner(tools={"lookup": screenshot}, tool_images=[CHART, BITMAP])
    async with session_stack(store, runner, AgentSessionOptions(tool_policies=READ_LOOKUP)) as s:
        await s.sessions.start_session("s1", "call lookup {}")
        snapshot = await s.idle()
        assert [call.attempt for call in runner.tool_calls] == [1, 2, 3]
        (record,) = runner.model_calls[-1].tool_calls.values()
        assert record.status is ToolCallStatus.FAILED
        assert record.images == ()
        error = BITMAP_ERROR.replace("image 1:", "image 2:")
        assert snapshot.messages[-1].text == (
            f"lookup=The tool call failed: ImageValidationError: {error}"
        )


async def test_runner_message_images_are_checked_before_they_are_stored(store: FlowStore) -> None:
    runner = ImageRunner(answer_images=[PHOTO])
    options = AgentSessionOptions(run_model_limit=RunModelLimit(maximum_attempts=1))
    async with session_stack(store, runner, options) as session:
        await session.sessions.start_session("s1", "draw")
        snapshot = await session.idle()
        assert snapshot.messages[-1].images == (PHOTO,)
        runner.answer_images = [BITMAP]
        assert await session.sessions.send_user_message("s1", "draw")
        snapshot = await session.idle(turns=2)
        assert snapshot.state is not None
        assert snapshot.state.last_turn_error == BITMAP_ERROR
        assert [(m.turn_id, m.text) for m in snapshot.messages] == [
            ("turn-1", "draw"),
            ("turn-1", "drawn"),
            ("turn-2", "draw"),
        ]
        assert len(runner.model_calls) == 2


def settings_of_size(size: int) -> dict[str, str]:
    settings = {"blob": "x" * (size - session_settings_size({"blob": ""}))}
    assert session_settings_size(settings) == size
    return settings


async def flow_status(session: Session) -> tuple[str, str | None]:
    """The session Flow's status once it left ``running`` or started its first Step."""
    while True:
        info = await session.client.describe_flow("s1")
        if info.status != FlowStatus.RUNNING or "AwaitUserMessage" in info.active_step_types:
            row = await session.client.engine.read(lambda tx: tx.get_flow("s1"))
            assert row is not None
            return info.status, row.failure_reason
        await asyncio.sleep(0.01)


LARGEST = MAX_SESSION_SETTINGS_BYTES + SESSION_SETTINGS_SIZE_TOLERANCE_BYTES


@pytest.mark.parametrize(
    ("size", "status", "reason"),
    [
        (MAX_SESSION_SETTINGS_BYTES, FlowStatus.RUNNING, None),
        (LARGEST, FlowStatus.RUNNING, None),
        (
            LARGEST + 1,
            FlowStatus.FAILED,
            f"{INVALID_START_SESSION_SETTINGS_REASON}: session settings are {LARGEST + 1} bytes"
            f" of JSON, more than {LARGEST}"
            " (MAX_SESSION_SETTINGS_BYTES + SESSION_SETTINGS_SIZE_TOLERANCE_BYTES)",
        ),
    ],
)
async def test_start_settings_beyond_the_tolerance_fail_the_session_at_once(
    store: FlowStore, size: int, status: FlowStatus, reason: str | None
) -> None:
    assert LARGEST == 17408
    settings = settings_of_size(size)
    async with session_stack(store, ScriptedRunner()) as session:
        # The client refuses anything over the limit, so start the Flow directly.
        start = AgentSessionStartInput(session_settings=settings)
        await session.client.start_flow(session.flow, "s1", start)
        assert await flow_status(session) == (status, reason)
        history = await session.client.read_step_history("s1")
        assert [entry.step_type for entry in history] == ["StartAgentSession"]
        if status is FlowStatus.RUNNING:
            snapshot = await session.sessions.get_agent_snapshot("s1")
            assert snapshot.session_settings == settings


async def test_wait_for_user_on_a_session_that_failed_to_start_says_so(store: FlowStore) -> None:
    async with session_stack(store, ScriptedRunner()) as session:
        start = AgentSessionStartInput(session_settings=settings_of_size(LARGEST + 1))
        await session.client.start_flow(session.flow, "s1", start)
        # It waited out the whole timeout, then said the session needed no person.
        with pytest.raises(FlowNotActiveError) as raised:
            await session.sessions.wait_for_user("s1", timeout=timedelta(seconds=20))
        info = await session.client.describe_flow("s1")
    # Why it failed, as a message sent to it is refused with.
    assert info.failure_reason is not None
    assert info.failure_reason.startswith("invalid start session settings: ")
    assert str(raised.value) == f"session 's1' is failed: {info.failure_reason}"


async def test_the_client_refuses_settings_over_the_limit_before_sending() -> None:
    async with session_stack(MemoryFlowStore(), ScriptedRunner()) as session:
        with pytest.raises(ValueError, match="MAX_SESSION_SETTINGS_BYTES"):
            await session.sessions.start_session(
                "s1", session_settings=settings_of_size(MAX_SESSION_SETTINGS_BYTES + 1)
            )
        with pytest.raises(FlowNotFoundError):
            await session.client.describe_flow("s1")


async def test_the_running_turn_keeps_its_settings_after_an_update(store: FlowStore) -> None:
    release = asyncio.Event()
    started = asyncio.Event()

    async def slow_lookup(call: DeferredToolExecution) -> str:
        started.set()
        await release.wait()
        return "found it"

    seen: list[dict[str, object]] = []

    class SettingsRunner(ScriptedRunner):
        async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
            seen.append(dict(turn.session_settings))
            return await super().run_model_step(turn)

    runner = SettingsRunner(tools={"lookup": slow_lookup})
    options = AgentSessionOptions(tool_policies=READ_LOOKUP)
    async with session_stack(store, runner, options) as session:
        await session.sessions.start_session(
            "s1", "call lookup {}", session_settings={"model": "a"}
        )
        await asyncio.wait_for(started.wait(), timeout=10)
        assert await session.sessions.update_session_settings("s1", {"model": "b"})
        snapshot = await session.sessions.get_agent_snapshot("s1")
        assert snapshot.session_settings == {"model": "b"}  # the next turn's settings
        copy = await session.client.read_attribute("s1", TURN_SESSION_SETTINGS)
        assert copy == TurnSessionSettings(turn_id="turn-1", settings={"model": "a"})
        release.set()
        await session.idle()
        assert seen == [{"model": "a"}, {"model": "a"}]  # both model calls of turn-1
        assert await session.sessions.send_user_message("s1", "again")
        await session.idle(turns=2)
        assert seen[-1] == {"model": "b"}
        assert await session.sessions.update_session_settings("s1", {})
        assert await session.sessions.send_user_message("s1", "once more")
        await session.idle(turns=3)
        assert seen[-1] == {}
