"""Tool sources on the built-in loop ("Tool sources"), end to end on the embedded engine."""

from __future__ import annotations

import gc
import json
import logging
import weakref
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.adapters.media.memory_store import InMemoryMediaStore
from dex_agents.app.builtin_loop.items import user_text_message
from dex_agents.app.builtin_loop.runner import BuiltinLoopAgentRunner
from dex_agents.app.builtin_loop.scripted_model import ScriptedModelReply, ScriptedToolCall
from dex_agents.app.builtin_loop.source_references import (
    TOOL_SOURCE_REFERENCE_KEY,
    decode_source_reference,
    encode_source_reference,
)
from dex_agents.app.builtin_loop.tool_sources import (
    DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT,
    SOURCE_TOOL_NOT_OFFERED_RESULT,
    model_tool_definition,
)
from dex_agents.domain.builtin_tools import BuiltInTool
from dex_agents.domain.errors import ImageValidationError
from dex_agents.domain.listed_tools import ListedTool
from dex_agents.domain.messages import AgentMessage
from dex_agents.domain.model_io import ModelRequest
from dex_agents.domain.runner_outcomes import (
    DeferredToolCall,
    ToolCallsRequested,
    ToolExecutionResult,
    ToolTaskPending,
    ToolTaskPollOutcome,
)
from dex_agents.domain.state import InteractionMode
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect
from dex_agents.domain.tool_outcomes import OUTCOME_UNKNOWN_TOOL_RESULT
from dex_agents.ports.flow_store import FlowStore
from dex_agents.ports.runner import (
    AgentTurnContext,
    DeferredToolExecution,
    ToolTaskPoll,
    ToolTaskPoller,
)
from dex_agents.ports.tool_source import ToolSource
from tests.app.fake_tool_source import READ_FILE, DeclaringSource, FakeSource, execution_of, poll_of
from tests.app.test_builtin_loop import (
    RecordingWriter,
    agent,
    lookup_order,
    model_of,
    no_heartbeat,
    refund_order,
    running,
)
from tests.domain.images_support import png

DELETE_FILE = ListedTool(name="delete_file", description="Delete a file.")


def _untyped(value: object) -> Any:
    """``value`` past the type checker: a source may build a tool from untyped data."""
    return value


def call_then_answer(name: str, arguments: dict[str, Any]) -> Any:
    def respond(request: ModelRequest) -> ScriptedModelReply:
        if request.tool_results:
            return ScriptedModelReply(text="; ".join(r.output for r in request.tool_results))
        return ScriptedModelReply(tool_calls=[ScriptedToolCall(name, arguments, call_id="c1")])

    return respond


def turn_context(**fields: Any) -> AgentTurnContext:
    message = user_text_message("hi")
    return AgentTurnContext(
        flow_id="s1",
        turn_id="turn-1",
        attempt=1,
        messages=[AgentMessage.from_framework_message(message, sequence=1, turn_id="turn-1")],
        events=RecordingWriter(),
        heartbeat=no_heartbeat,
        **fields,
    )


def test_the_listing_timeout_defaults_to_ten_seconds_and_references_round_trip() -> None:
    assert timedelta(seconds=10) == DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT
    assert agent(call_then_answer("x", {})).tool_source_listing_timeout == timedelta(seconds=10)
    definition = agent(call_then_answer("x", {}), tool_source_listing_timeout=0.5)
    assert definition.tool_source_listing_timeout == timedelta(seconds=0.5)
    assert TOOL_SOURCE_REFERENCE_KEY == "stepwise_tool_source"
    text = encode_source_reference("files", "r1")
    assert json.loads(text) == {"stepwise_tool_source": "files", "reference": "r1"}
    assert decode_source_reference(text) == ("files", "r1")
    assert decode_source_reference(encode_source_reference("files", None)) == ("files", None)
    assert decode_source_reference("opaque text of a framework") is None
    assert decode_source_reference(None) is None
    assert SOURCE_TOOL_NOT_OFFERED_RESULT.startswith("The tool call was not run: ")


async def test_a_source_tool_is_offered_between_function_and_built_in_tools_and_runs_there(
    store: FlowStore,
) -> None:
    files = FakeSource("files")
    definition = agent(
        call_then_answer("read_file", {"path": "/a"}),
        tool_sources=[files],
        built_in_tools=frozenset({BuiltInTool.ASK_USER}),
    )
    async with running(store, definition) as stack:
        await stack.sessions.start_session("s1", "read /a")
        snapshot = await stack.idle()
    first, second = model_of(definition).requests
    assert [tool.name for tool in first.tools] == [
        "lookup_order",
        "refund_order",
        "read_file",
        "ask_user",
    ]
    assert first.tools[2].parameters_schema == dict(READ_FILE.input_schema)
    assert files.built == [("read_file", READ_FILE)]
    assert files.executed == [("read_file", "files-ref-read_file", '{"path": "/a"}')]
    assert snapshot.messages[-1].text == 'files ran read_file {"path": "/a"}'
    assert files.listings == 2  # every RunModel lists again
    assert len(second.tools) == 4


async def test_run_model_step_stores_the_source_name_with_its_reference() -> None:
    files = FakeSource("files")
    definition = agent(call_then_answer("read_file", {}), tool_sources=[files])
    runner = BuiltinLoopAgentRunner(definition)
    outcome = await runner.run_model_step(turn_context())
    assert isinstance(outcome, ToolCallsRequested)
    (call,) = outcome.tool_calls
    assert call.tool_source_reference == (
        '{"reference":"files-ref-read_file","stepwise_tool_source":"files"}'
    )
    assert call.policy.effect is ToolEffect.READ


class MisbuildingSource(FakeSource):
    """A source whose built call carries ``changes``: another ID or tool name than asked."""

    def __init__(self, name: str, **changes: str) -> None:
        super().__init__(name)
        self.changes: dict[str, Any] = changes

    def deferred_tool_call(
        self,
        turn: AgentTurnContext,
        *,
        tool_call_id: str,
        tool_name: str,
        arguments: str,
        listed_tool: ListedTool | None = None,
    ) -> DeferredToolCall:
        call = super().deferred_tool_call(
            turn,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            arguments=arguments,
            listed_tool=listed_tool,
        )
        return attrs.evolve(call, **self.changes)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"tool_call_id": "other"},
            "tool source files built a call of 'read_file' with ID 'other' "
            "for the model's call of 'read_file' with ID 'c1'",
        ),
        (
            {"tool_name": "files__read_file"},
            "tool source files built a call of 'files__read_file' with ID 'c1' "
            "for the model's call of 'read_file' with ID 'c1'",
        ),
    ],
)
async def test_a_source_that_builds_another_call_than_the_models_fails_the_attempt(
    changes: dict[str, str], message: str
) -> None:
    # A call built under another ID ran, and the model read its own call's result as
    # outcome unknown: nothing paired the two.
    definition = agent(
        call_then_answer("read_file", {}), tool_sources=[MisbuildingSource("files", **changes)]
    )
    with pytest.raises(ValueError, match=r".") as raised:
        await BuiltinLoopAgentRunner(definition).run_model_step(turn_context())
    assert str(raised.value) == message


@pytest.mark.parametrize("failure", ["raises", "times_out"])
async def test_a_source_whose_listing_fails_offers_nothing_and_the_turn_answers(
    store: FlowStore, failure: str, caplog: pytest.LogCaptureFixture
) -> None:
    broken = FakeSource(
        "broken", [DELETE_FILE], fails=failure == "raises", sleeps=failure == "times_out"
    )
    files = FakeSource("files")
    definition = agent(
        call_then_answer("read_file", {"path": "/b"}),
        tool_sources=[broken, files],
        tool_source_listing_timeout=timedelta(milliseconds=50),
    )
    with caplog.at_level(logging.WARNING, logger="dex_agents.app.builtin_loop.tool_sources"):
        async with running(store, definition) as stack:
            await stack.sessions.start_session("s1", "read /b")
            snapshot = await stack.idle()
    assert snapshot.messages[-1].text == 'files ran read_file {"path": "/b"}'
    for request in model_of(definition).requests:
        assert [tool.name for tool in request.tools] == [
            "lookup_order",
            "refund_order",
            "read_file",
        ]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(message.startswith("tool source broken ") for message in warnings)


@pytest.mark.parametrize(
    ("bad_tool", "reason"),
    [
        (ListedTool(name="", description="d"), "name must be a non-empty string, not ''"),
        (ListedTool(name="t", description=_untyped(None)), "description must be a string"),
        (ListedTool(name="t", description="d", input_schema=_untyped(None)), "a JSON object"),
        (ListedTool(name="t", description="d", input_schema={"x": {1}}), "is not JSON"),
        (ListedTool(name="t", description="d", input_schema={"x": float("nan")}), "is not JSON"),
    ],
    ids=["blank-name", "no-description", "no-schema", "set-in-schema", "nan-in-schema"],
)
async def test_a_source_that_lists_a_tool_the_model_cannot_be_offered_offers_nothing(
    store: FlowStore, bad_tool: ListedTool, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Such a tool passed the listing and failed every turn in the model call, with an
    # error naming no source ("'NoneType' object is not iterable").
    broken = FakeSource("broken", [DELETE_FILE, bad_tool])
    definition = agent(
        call_then_answer("read_file", {"path": "/b"}), tool_sources=[broken, FakeSource("files")]
    )
    with caplog.at_level(logging.WARNING, logger="dex_agents.app.builtin_loop.tool_sources"):
        async with running(store, definition) as stack:
            await stack.sessions.start_session("s1", "read /b")
            snapshot = await stack.idle()
    assert snapshot.state is not None
    assert snapshot.state.last_turn_error is None
    assert snapshot.messages[-1].text == 'files ran read_file {"path": "/b"}'
    for request in model_of(definition).requests:
        assert [tool.name for tool in request.tools] == [
            "lookup_order",
            "refund_order",
            "read_file",
        ]
    warnings = [r for r in caplog.records if r.getMessage().startswith("tool source broken ")]
    assert len(warnings) == 2  # one in each model call
    assert all(w.exc_info is not None and reason in str(w.exc_info[1]) for w in warnings)


async def test_a_tool_a_failed_listing_would_have_offered_fails_as_unknown(
    store: FlowStore,
) -> None:
    broken = FakeSource("broken", [DELETE_FILE], fails=True)
    definition = agent(call_then_answer("delete_file", {}), tool_sources=[broken])
    async with running(store, definition) as stack:
        await stack.sessions.start_session("s1", "delete")
        snapshot = await stack.idle()
    assert snapshot.pending_interrupts == ()
    assert snapshot.messages[-1].text == "The tool call failed: unknown tool delete_file"
    assert broken.built == []


@pytest.mark.parametrize(
    ("sources", "message"),
    [
        (
            [FakeSource("files", [ListedTool(name="ask_user", description="d")])],
            "tool ask_user uses the name of an enabled built-in tool",
        ),
        (
            [FakeSource("files", [ListedTool(name="lookup_order", description="d")])],
            "tool lookup_order of a tool source uses the name of a function tool",
        ),
        (
            [FakeSource("files"), FakeSource("more")],
            "two tool sources list a tool named read_file",
        ),
        (
            [FakeSource("files", [READ_FILE, READ_FILE])],
            "tool source files lists a tool named read_file twice",
        ),
    ],
)
async def test_a_listing_that_clashes_fails_the_attempt_before_any_model_request(
    sources: list[ToolSource], message: str
) -> None:
    definition = agent(
        call_then_answer("x", {}),
        tool_sources=sources,
        built_in_tools=frozenset({BuiltInTool.ASK_USER}),
    )
    with pytest.raises(ValueError, match=r".") as raised:
        await BuiltinLoopAgentRunner(definition).run_model_step(
            turn_context(enabled_built_in_tools=frozenset({BuiltInTool.ASK_USER}))
        )
    assert str(raised.value) == message
    assert model_of(definition).requests == []


async def test_a_planning_turn_lists_nothing() -> None:
    files = FakeSource("files")
    definition = agent(
        lambda request: ScriptedModelReply(text="plan"),
        tool_sources=[files],
        plan_mode_enabled=True,
    )
    await BuiltinLoopAgentRunner(definition).run_model_step(
        turn_context(
            interaction_mode=InteractionMode.PLANNING,
            enabled_built_in_tools=frozenset({BuiltInTool.WRITE_TODOS}),
        )
    )
    assert files.listings == 0
    (request,) = model_of(definition).requests
    assert [tool.name for tool in request.tools] == ["write_todos"]


class DeclaringNames(FakeSource):
    """A source whose ``declared_tool_names()`` returns ``names`` as given, right or not."""

    def __init__(self, name: str, names: object) -> None:
        super().__init__(name)
        self.names = names

    def declared_tool_names(self) -> Any:
        return self.names


@pytest.mark.parametrize(
    ("sources", "fields", "error", "message"),
    [
        (
            [FakeSource("files"), FakeSource("files", [DELETE_FILE])],
            {},
            ValueError,
            "two tool sources of AgentDefinition are named files",
        ),
        (
            [DeclaringSource("files", [ListedTool(name="ask_user", description="d")])],
            {"built_in_tools": frozenset({BuiltInTool.ASK_USER})},
            ValueError,
            "tool ask_user uses the name of an enabled built-in tool",
        ),
        (
            [DeclaringSource("files", [ListedTool(name="refund_order", description="d")])],
            {},
            ValueError,
            "tool refund_order of a tool source uses the name of a function tool",
        ),
        (
            [DeclaringSource("files"), DeclaringSource("more")],
            {},
            ValueError,
            "two tool sources list a tool named read_file",
        ),
        (
            [object()],
            {},
            TypeError,
            "AgentDefinition.tool_sources must be ToolSource values, not object",
        ),
        (
            [DeclaringNames("files", "read_file")],
            {},
            TypeError,
            "declared_tool_names of tool source files must return a collection of names, not str",
        ),
        (
            [DeclaringNames("files", None)],
            {},
            TypeError,
            "declared_tool_names of tool source files must return a collection of names, "
            "not NoneType",
        ),
        (
            [DeclaringNames("files", ["read_file", ""])],
            {},
            ValueError,
            "declared_tool_names of tool source files returned '', not a non-empty tool name",
        ),
        (
            [FakeSource("files")],
            {"tool_source_listing_timeout": 0},
            ValueError,
            "tool_source_listing_timeout must be a positive timedelta or number of seconds, not 0",
        ),
    ],
)
def test_the_definition_refuses_bad_tool_sources(
    sources: list[object], fields: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as raised:
        agent(call_then_answer("x", {}), tool_sources=sources, **fields)
    assert str(raised.value) == message


def source_record(reference: str | None, effect: ToolEffect = ToolEffect.READ) -> AgentToolCall:
    return AgentToolCall(
        turn_id="turn-1",
        tool_call_id="c1",
        tool_name="read_file",
        arguments="{}",
        effect=effect,
        requires_approval=False,
        status=ToolCallStatus.APPROVED,
        deferral_order=0,
        tool_source_reference=reference,
    )


async def test_calls_and_polls_route_by_the_stored_source_name_whatever_the_order() -> None:
    files, more = FakeSource("files"), FakeSource("more", [DELETE_FILE])
    runner = BuiltinLoopAgentRunner(agent(call_then_answer("x", {}), tool_sources=[more, files]))
    assert isinstance(runner, ToolTaskPoller)
    assert not isinstance(BuiltinLoopAgentRunner(agent(call_then_answer("x", {}))), ToolTaskPoller)
    record = source_record(encode_source_reference("files", "inner"))
    outcome = await runner.execute_deferred_tool_call(execution_of(record))
    assert outcome == ToolExecutionResult("files ran read_file {}")
    assert files.executed == [("read_file", "inner", "{}")]
    assert more.executed == []
    assert await runner.poll_tool_task(poll_of(record)) == ToolTaskPending(poll_interval_seconds=5)
    assert files.polled == ["inner"]


async def test_a_stored_source_name_this_worker_lacks_raises_lookup_error() -> None:
    runner = BuiltinLoopAgentRunner(
        agent(call_then_answer("x", {}), tool_sources=[FakeSource("files")])
    )
    record = source_record(encode_source_reference("gone", "inner"))
    with pytest.raises(LookupError) as raised:
        await runner.execute_deferred_tool_call(execution_of(record))
    assert str(raised.value) == (
        "tool call c1 belongs to tool source gone, which this agent does not have"
    )


async def test_a_call_of_a_source_removed_after_approval_records_by_its_effect(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sessions.sqlite3"
    writes = FakeSource("writes", [DELETE_FILE])
    before = agent(
        call_then_answer("delete_file", {"path": "/c"}),
        tool_sources=[writes],
        default_tool_effect=ToolEffect.NON_IDEMPOTENT_WRITE,
    )
    async with running(SqliteFlowStore(path), before) as stack:
        await stack.sessions.start_session("s1", "delete /c")
        interrupt = await stack.until(
            "the delete approval", lambda s: next(iter(s.pending_interrupts), None)
        )
        assert interrupt.interrupt_id == "c1"
    after = agent(
        call_then_answer("delete_file", {"path": "/c"}),
        tool_sources=[FakeSource("files")],
        default_tool_effect=ToolEffect.NON_IDEMPOTENT_WRITE,
    )
    async with running(SqliteFlowStore(path), after) as stack:
        assert await stack.sessions.resolve_interrupt("s1", "c1", approved=True)
        snapshot = await stack.idle()
    assert writes.executed == []
    result = snapshot.messages[-2]
    assert result.tool_name == "delete_file"
    # A non_idempotent_write runs in CallSingleAttemptTool: its failed attempt is outcome_unknown.
    assert result.tool_output == OUTCOME_UNKNOWN_TOOL_RESULT


def test_an_agent_without_sources_has_none() -> None:
    definition = agent(call_then_answer("x", {}), tools=[lookup_order, refund_order])
    assert definition.tool_sources == ()
    assert definition.tool_source("files") is None


def test_a_tool_object_is_defined_once_for_every_model_call_while_it_lives() -> None:
    # A source offers the same objects until it lists again; copying each schema in
    # every model call cost about 30 us a tool.
    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ("path",)}
    tool = ListedTool(name="read_file", description="Read a file.", input_schema=schema)
    definition = model_tool_definition(tool)
    assert definition.parameters_schema == {**schema, "required": ["path"]}  # plain JSON
    assert definition.parameters_schema is not schema
    assert model_tool_definition(tool) is definition
    twin = ListedTool(name="read_file", description="Read a file.", input_schema=schema)
    assert model_tool_definition(twin) == definition
    assert model_tool_definition(twin) is not definition
    changed = attrs.evolve(tool, description="Read a text file.")
    assert model_tool_definition(changed).description == "Read a text file."


def test_a_definition_keeps_no_tool_alive() -> None:
    tool = ListedTool(name="read_file", description="Read a file.")
    model_tool_definition(tool)
    gone = weakref.ref(tool)
    del tool
    gc.collect()
    assert gone() is None
    later = ListedTool(name="other", description="Another tool.")
    assert model_tool_definition(later).name == "other"


class ImageSource(FakeSource):
    """A source that answers every call and poll with one image it uploaded to ``store``."""

    def __init__(self, store: InMemoryMediaStore) -> None:
        super().__init__("files")
        self.store = store

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        return ToolExecutionResult("a chart", [await self.store.put_image(png())])

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        return ToolExecutionResult("a chart", [await self.store.put_image(png())])


async def test_a_source_image_of_another_store_fails_the_attempt_not_every_later_turn() -> None:
    runner_store = InMemoryMediaStore()
    source = ImageSource(InMemoryMediaStore("memory://elsewhere"))
    runner = BuiltinLoopAgentRunner(
        agent(call_then_answer("read_file", {}), tool_sources=[source]), media_store=runner_store
    )
    assert isinstance(runner, ToolTaskPoller)
    record = source_record(encode_source_reference("files", "inner"))
    for outcome in (
        runner.execute_deferred_tool_call(execution_of(record)),
        runner.poll_tool_task(poll_of(record)),
    ):
        with pytest.raises(
            ImageValidationError,
            match=r"^image 1: tool read_file returned image "
            r"uri 'memory://elsewhere/sha256/.*not in the runner's media store",
        ):
            await outcome
    # The runner's own images, and any source image of a runner without a store, pass.
    own = BuiltinLoopAgentRunner(
        agent(call_then_answer("read_file", {}), tool_sources=[ImageSource(runner_store)]),
        media_store=runner_store,
    )
    result = await own.execute_deferred_tool_call(execution_of(record))
    assert isinstance(result, ToolExecutionResult)
    assert len(result.images) == 1
    storeless = BuiltinLoopAgentRunner(
        agent(call_then_answer("read_file", {}), tool_sources=[source])
    )
    result = await storeless.execute_deferred_tool_call(execution_of(record))
    assert isinstance(result, ToolExecutionResult)
    assert len(result.images) == 1
