"""FrameworkToolSourceRouter: tool sources for the Step-mode framework adapters."""

from __future__ import annotations

import logging
import re
from datetime import timedelta
from typing import Any

import pytest

from dex_agents.app.builtin_loop.source_references import (
    decode_source_reference,
    encode_source_reference,
)
from dex_agents.app.builtin_loop.source_router import FrameworkToolSourceRouter
from dex_agents.app.builtin_loop.tool_sources import (
    DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT,
    SOURCE_TOOL_NOT_OFFERED_RESULT,
)
from dex_agents.domain.builtin_tools import BuiltInTool
from dex_agents.domain.runner_outcomes import ToolExecutionResult, ToolTaskPending
from dex_agents.domain.state import InteractionMode
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect
from dex_agents.domain.tool_step_options import ToolCallStepOptions
from dex_agents.ports.runner import AgentTurnContext, ToolTaskCancellation
from tests.app.fake_tool_source import FakeSource, RichSource, execution_of, poll_of
from tests.app.test_builtin_loop import RecordingWriter, no_heartbeat


def record(
    tool_name: str, reference: str | None, *, tool_call_id: str = "old-1", arguments: str = "{}"
) -> AgentToolCall:
    return AgentToolCall(
        turn_id="turn-1",
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        arguments=arguments,
        effect=ToolEffect.READ,
        requires_approval=False,
        status=ToolCallStatus.SUCCEEDED,
        deferral_order=0,
        tool_source_reference=reference,
    )


def turn(*records: AgentToolCall, **fields: Any) -> AgentTurnContext:
    return AgentTurnContext(
        flow_id="s1",
        turn_id="turn-1",
        attempt=1,
        messages=[],
        events=RecordingWriter(),
        heartbeat=no_heartbeat,
        tool_calls={r.tool_call_id: r for r in records},
        **fields,
    )


def test_default_listing_timeout_is_10_seconds() -> None:
    router = FrameworkToolSourceRouter([FakeSource("a")])
    assert router.listing_timeout == DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT == timedelta(seconds=10)


async def test_lists_sources_in_order_and_skips_failed_ones(
    caplog: pytest.LogCaptureFixture,
) -> None:
    router = FrameworkToolSourceRouter(
        [
            FakeSource("b", ["b1", "b2"]),
            FakeSource("down", ["x"], fails=True),
            FakeSource("slow", ["y"], sleeps=True),
            FakeSource("a", ["a1"]),
        ],
        listing_timeout=timedelta(milliseconds=20),
    )
    with caplog.at_level(logging.WARNING):
        listing = await router.list_tools(turn(), ["framework_tool"])
    assert [d.name for d in listing.definitions()] == ["b1", "b2", "a1"]
    assert [(s.source_name, len(t)) for s, t in listing.listings] == [
        ("b", 2),
        ("down", 0),
        ("slow", 0),
        ("a", 1),
    ]
    assert listing.replay_only_tools == frozenset()
    warned = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert "tool source down failed to list its tools" in warned
    assert "tool source slow did not list its tools" in warned


async def test_planning_turn_lists_nothing() -> None:
    router = FrameworkToolSourceRouter([FakeSource("a", ["a1"])])
    listing = await router.list_tools(turn(interaction_mode=InteractionMode.PLANNING), [])
    assert listing.listings == ()


@pytest.mark.parametrize(
    ("sources", "framework_names", "built_ins", "message"),
    [
        (
            [FakeSource("a", ["lookup"])],
            ["lookup"],
            frozenset(),
            "tool lookup of a tool source uses the name of a function tool",
        ),
        (
            [FakeSource("a", ["read"]), FakeSource("b", ["read"])],
            [],
            frozenset(),
            "two tool sources list a tool named read",
        ),
        (
            [FakeSource("a", ["ask_user"])],
            [],
            frozenset({BuiltInTool.ASK_USER}),
            "tool ask_user uses the name of an enabled built-in tool",
        ),
        (
            [FakeSource("a", ["read", "read"])],
            [],
            frozenset(),
            "tool source a lists a tool named read twice",
        ),
    ],
)
async def test_clashing_names_are_refused(
    sources: list[FakeSource],
    framework_names: list[str],
    built_ins: frozenset[BuiltInTool],
    message: str,
) -> None:
    router = FrameworkToolSourceRouter(sources)
    with pytest.raises(ValueError, match=re.escape(message)) as raised:
        await router.list_tools(turn(enabled_built_in_tools=built_ins), framework_names)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("sources", "message"),
    [
        ([FakeSource("a"), FakeSource("a")], "two tool sources of AgentDefinition are named a"),
        ([FakeSource("")], "a tool source's source_name must be a non-empty string, not ''"),
    ],
)
def test_bad_sources_are_refused_when_built(sources: list[FakeSource], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as raised:
        FrameworkToolSourceRouter(sources)
    assert str(raised.value) == message


def test_non_positive_listing_timeout_is_refused() -> None:
    with pytest.raises(ValueError, match="listing_timeout must be a positive timedelta"):
        FrameworkToolSourceRouter([], listing_timeout=timedelta(0))


async def test_replay_only_tools_are_called_source_tools_the_listing_lacks() -> None:
    router = FrameworkToolSourceRouter([FakeSource("a", ["still_here"])])
    the_turn = turn(
        record("gone", encode_source_reference("a", "a-ref-gone")),
        record("still_here", encode_source_reference("a", "x"), tool_call_id="old-2"),
        record("framework_tool", None, tool_call_id="old-3"),
        record("other", '{"not": "ours"}', tool_call_id="old-4"),
    )
    listing = await router.list_tools(the_turn, ["framework_tool"])
    assert listing.replay_only_tools == frozenset({"gone"})


async def test_deferred_call_is_built_by_its_source_with_the_wrapped_reference() -> None:
    a, b = FakeSource("a", ["a1"]), FakeSource("b", ["b1"])
    router = FrameworkToolSourceRouter([a, b])
    the_turn = turn()
    listing = await router.list_tools(the_turn, [])
    call = router.deferred_tool_call(the_turn, "c1", "b1", '{"x": 1}', listing)
    assert (call.tool_call_id, call.tool_name, call.arguments) == ("c1", "b1", '{"x": 1}')
    assert decode_source_reference(call.tool_source_reference) == ("b", "b-ref-b1")
    assert b.built == [("b1", b.tools[0])]
    assert a.built == []
    assert router.not_offered_result(the_turn, "c1", "b1", listing) is None


async def test_new_call_of_replay_only_tool_is_answered_in_the_framework() -> None:
    source = FakeSource("a", [])
    router = FrameworkToolSourceRouter([source])
    the_turn = turn(record("gone", encode_source_reference("a", "a-ref-gone")))
    listing = await router.list_tools(the_turn, [])
    assert router.not_offered_result(the_turn, "new-1", "gone", listing) == (
        SOURCE_TOOL_NOT_OFFERED_RESULT
    )
    with pytest.raises(ValueError, match="is replay-only") as raised:
        router.deferred_tool_call(the_turn, "new-1", "gone", "{}", listing)
    assert str(raised.value) == (
        "tool gone is replay-only: its tool source does not list it now, so the new call "
        "new-1 must be answered inside the framework with SOURCE_TOOL_NOT_OFFERED_RESULT, "
        "not deferred"
    )
    assert source.built == []


async def test_recorded_call_of_replay_only_tool_resumes_through_its_source() -> None:
    source = FakeSource("a", [])
    router = FrameworkToolSourceRouter([source])
    the_turn = turn(
        record("gone", encode_source_reference("a", "a-ref-gone"), arguments='{"p": 2}')
    )
    listing = await router.list_tools(the_turn, [])
    assert router.not_offered_result(the_turn, "old-1", "gone", listing) is None
    call = router.deferred_tool_call(the_turn, "old-1", "gone", '{"p": 2}', listing)
    assert decode_source_reference(call.tool_source_reference) == ("a", "a-ref-gone")
    assert source.built == [("gone", None)]


async def test_unlisted_name_is_not_a_source_call() -> None:
    router = FrameworkToolSourceRouter([FakeSource("a", ["a1"])])
    the_turn = turn()
    listing = await router.list_tools(the_turn, [])
    assert router.not_offered_result(the_turn, "c1", "nope", listing) is None
    with pytest.raises(LookupError) as raised:
        router.deferred_tool_call(the_turn, "c1", "nope", "{}", listing)
    assert str(raised.value) == "no tool source listed a tool named nope in this call"


async def test_execute_and_poll_route_by_stored_reference_whatever_the_order() -> None:
    a, b = FakeSource("a", poll_interval_seconds=7), FakeSource("b")
    router = FrameworkToolSourceRouter([b, a])
    stored = record("a1", encode_source_reference("a", "inner-a"))
    outcome = await router.execute_deferred_tool_call(execution_of(stored))
    assert outcome == ToolExecutionResult("a ran a1 {}")
    assert await router.poll_tool_task(poll_of(stored)) == ToolTaskPending(poll_interval_seconds=7)
    assert (a.executed, a.polled) == ([("a1", "inner-a", "{}")], ["inner-a"])
    assert (b.executed, b.polled) == ([], [])
    assert router.is_source_call(stored)


async def test_calls_that_are_no_sources_are_left_to_the_adapter() -> None:
    router = FrameworkToolSourceRouter([RichSource("a")])
    own = record("framework_tool", None)
    assert not router.is_source_call(own)
    assert await router.execute_deferred_tool_call(execution_of(own)) is None
    assert await router.poll_tool_task(poll_of(own)) is None
    assert router.tool_call_step_options(own) is None
    assert (
        await router.cancel_tool_task(ToolTaskCancellation(flow_id="s1", tool_call=own, attempt=1))
        is False
    )


async def test_options_and_cancel_route_to_a_source_that_implements_them() -> None:
    rich, plain = RichSource("rich"), FakeSource("plain")
    router = FrameworkToolSourceRouter([plain, rich])
    rich_call = record("r", encode_source_reference("rich", "inner-r"))
    plain_call = record("p", encode_source_reference("plain", "inner-p"))
    assert router.tool_call_step_options(rich_call) == ToolCallStepOptions(
        timeout=timedelta(seconds=42)
    )
    assert router.tool_call_step_options(plain_call) is None

    def cancellation(call: AgentToolCall) -> ToolTaskCancellation:
        return ToolTaskCancellation(flow_id="s1", tool_call=call, attempt=1)

    assert await router.cancel_tool_task(cancellation(rich_call)) is True
    assert await router.cancel_tool_task(cancellation(plain_call)) is False
    assert (rich.options_asked, rich.cancelled) == (["inner-r"], ["inner-r"])


async def test_a_source_this_worker_lacks_raises_lookup_error() -> None:
    router = FrameworkToolSourceRouter([RichSource("a")])
    stored = record("x", encode_source_reference("gone", "inner"))
    expected = "tool call old-1 belongs to tool source gone, which this agent does not have"
    with pytest.raises(LookupError) as raised:
        await router.execute_deferred_tool_call(execution_of(stored))
    assert str(raised.value) == expected
    with pytest.raises(LookupError):
        await router.poll_tool_task(poll_of(stored))
    with pytest.raises(LookupError):
        router.tool_call_step_options(stored)
    with pytest.raises(LookupError):
        await router.cancel_tool_task(
            ToolTaskCancellation(flow_id="s1", tool_call=stored, attempt=1)
        )
