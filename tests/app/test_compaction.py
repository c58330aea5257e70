"""Compaction and retention in the session Flow: ``CompactContext``, summaries, deleted chunks.

The scripted runner counts ``TOKENS_PER_MESSAGE`` tokens per stored message it
receives, so with a 100-token window (trigger 85, keep 30) a turn whose model
input holds 9 messages compacts. Its cutoff is the adapters' shared rule,
``select_turn_boundary_cutoff``: a scripted user item is 10 tokens and an answer
14, so the cut keeps only the running turn's user message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dex_agents import AgentSessionFlow
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.registry import register_flows
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.app.options import AgentSessionOptions, RunModelLimit
from dex_agents.app.session import SessionRuntime
from dex_agents.app.steps import compaction_steps, run_model
from dex_agents.domain.compaction import CompactionPolicy
from dex_agents.domain.context_summary import ContextSummaryRequest
from dex_agents.domain.events import (
    AgentEvent,
    CompactionFinishedPayload,
    CompactionStartedPayload,
    UsageRecordedPayload,
)
from dex_agents.domain.runner_outcomes import AgentTurnOutcome, ContextSummaryResult
from dex_agents.domain.state import AgentStatus
from dex_agents.domain.usage import AgentUsage
from dex_agents.domain.windowing import message_sequence_key
from dex_agents.ports.flow_rows import ExecutionStatus
from dex_agents.ports.flow_store import FlowStore
from dex_agents.ports.runner import AgentTurnContext
from dex_agents.ports.session_schema import (
    AGENT_MESSAGE_CHUNKS,
    AGENT_MESSAGE_INDEX,
    agent_events_stream,
)
from tests.app.compaction_support import SUMMARY_USAGE, CompactingRunner, run_turns
from tests.app.harness import Session, session_stack
from tests.app.scripted_runner import ScriptedRunner

MODEL_USAGE = AgentUsage(model_calls=1, input_tokens=10, output_tokens=5)
POLICY = CompactionPolicy(context_window_tokens=100)
ONE_ATTEMPT = RunModelLimit(maximum_attempts=1)


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> FlowStore:
    if request.param == "memory":
        return MemoryFlowStore()
    return SqliteFlowStore(tmp_path / "sessions.sqlite3")


def turn_events(events: list[AgentEvent], turn_id: str) -> list[AgentEvent]:
    return [event for event in events if event.turn_id == turn_id]


def compacting_options(**changes: Any) -> AgentSessionOptions:
    return replace(AgentSessionOptions(compaction=POLICY), **changes)


async def test_a_long_session_compacts_and_the_next_model_call_starts_after_the_summary(
    store: FlowStore,
) -> None:
    runner = CompactingRunner()
    async with session_stack(store, runner, compacting_options()) as session:
        await run_turns(session, 1, 4)
        assert runner.summary_requests == []
        await run_turns(session, 5, 5)
        (request,) = runner.summary_requests
        assert request.flow_id == "s1"
        assert request.turn_id == "turn-5"
        assert request.through_sequence == 8
        assert [m.sequence for m in request.messages] == list(range(1, 9))
        assert request.previous_summary is None
        assert request.input_token_budget == 100
        assert request.session_settings == {}
        snapshot = await session.sessions.get_agent_snapshot("s1")
        summary = snapshot.context_summary
        assert summary is not None
        assert (summary.generation, summary.first_sequence, summary.last_sequence) == (1, 1, 8)
        assert summary.text == "summary through 8"
        assert summary.created_at is not None
        # The turn's model call starts after the summary and carries it.
        call = runner.model_calls[-1]
        assert call.turn_id == "turn-5"
        assert [m.sequence for m in call.messages] == [9]
        assert call.context_summary == summary
        # The model call and the summary call both count.
        assert snapshot.usage == AgentUsage(
            model_calls=6, input_tokens=5 * 10 + 70, output_tokens=5 * 5 + 30
        )
        assert snapshot.state is not None
        assert snapshot.state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
        events = turn_events(await session.events(), "turn-5")
        assert [event.type for event in events] == [
            "turn_started",
            "compaction_started",
            "usage_recorded",
            "compaction_finished",
            "usage_recorded",
            "turn_completed",
        ]
        started, summary_usage, finished = events[1], events[2], events[3]
        assert started.payload == CompactionStartedPayload(through_sequence=8)
        assert finished.payload == CompactionFinishedPayload(generation=1, through_sequence=8)
        assert summary_usage.payload == UsageRecordedPayload(
            recorded=SUMMARY_USAGE,
            session=AgentUsage(model_calls=5, input_tokens=4 * 10 + 70, output_tokens=4 * 5 + 30),
        )
        for event in (started, summary_usage, finished):
            assert event.step_execution_id.startswith("CompactContext-")
            assert event.attempt == 1
        # Nothing compacts again until 9 messages follow the summary: turn 9.
        await run_turns(session, 6, 9)
        assert len(runner.summary_requests) == 2
        second = runner.summary_requests[1]
        assert second.previous_summary == summary
        assert second.through_sequence == 16
        assert [m.sequence for m in second.messages] == list(range(9, 17))
        snapshot = await session.sessions.get_agent_snapshot("s1")
        assert snapshot.context_summary is not None
        assert snapshot.context_summary.generation == 2
        assert [m.sequence for m in runner.model_calls[-1].messages] == [17]
        # Snapshots still show the summarized messages: nothing was retained away yet.
        assert [m.sequence for m in snapshot.messages] == list(range(1, 19))
        history = await session.client.read_step_history("s1")
        assert [entry.step_type for entry in history].count("CompactContext") == 2


def run_model_chunk_loads(store: FlowStore, flow: AgentSessionFlow) -> list[tuple[str, ...] | None]:
    """Per ``RunModel`` execution, oldest first: the chunk keys its options load, ``None`` for all."""
    registered = register_flows([flow])[flow.flow_type]
    step = registered.step("RunModel")
    rows = store.read(lambda tx: tx.flow_executions("s1", list(ExecutionStatus)))
    loads: list[tuple[str, ...] | None] = []
    for row in sorted(rows, key=lambda row: row.id):
        if row.step_type != "RunModel":
            continue
        chunks = [
            load
            for load in registered.options(step, row.options).loads
            if load.attribute_map is AGENT_MESSAGE_CHUNKS
        ]
        keyed = tuple(load.key for load in chunks if load.key is not None)
        loads.append(None if any(load.key is None for load in chunks) else keyed)
    return loads


async def test_after_a_summary_run_model_loads_only_the_chunks_after_it(store: FlowStore) -> None:
    runner = CompactingRunner()
    options = compacting_options(message_window_size=2, message_chunk_size=2)
    async with session_stack(store, runner, options) as session:
        await run_turns(session, 1, 12)
        summary = (await session.sessions.get_agent_snapshot("s1")).context_summary
        assert summary is not None
        assert summary.last_sequence == 16
        index = await session.client.read_attribute("s1", AGENT_MESSAGE_INDEX)
        assert index is not None
        loads = run_model_chunk_loads(store, session.flow)
        # Before the first summary every chunk is the model input.
        assert loads[0] is None
        # Turn 12's model call starts after the summary through 16; the chunks before
        # it stay stored (retention keeps the newest 1,000 messages), unread.
        assert [m.sequence for m in runner.model_calls[-1].messages] == list(range(17, 24))
        after = tuple(
            message_sequence_key(chunk.first_sequence)
            for chunk in index.chunks
            if chunk.last_sequence > summary.last_sequence
        )
        assert after == tuple(message_sequence_key(first) for first in (17, 19, 21))
        assert len(index.chunks) == 11
        assert loads[-1] == after


async def test_without_compaction_run_model_loads_every_chunk(store: FlowStore) -> None:
    runner = ScriptedRunner()
    options = AgentSessionOptions(message_window_size=4, message_chunk_size=2)
    async with session_stack(store, runner, options) as session:
        await run_turns(session, 1, 6)
        index = await session.client.read_attribute("s1", AGENT_MESSAGE_INDEX)
        assert index is not None
        assert len(index.chunks) >= 3
        assert set(run_model_chunk_loads(store, session.flow)) == {None}


async def test_a_second_high_estimate_finds_no_new_cutoff(store: FlowStore) -> None:
    runner = CompactingRunner(always_high=True)
    async with session_stack(store, runner, compacting_options()) as session:
        await run_turns(session, 1, 1)
        assert runner.summary_requests == []  # one message: nothing to cut
        estimates_before = len(runner.estimates)
        await run_turns(session, 2, 2)
        # turn-2: compact through turn-1, then the still-high estimate finds no new cutoff.
        assert [request.through_sequence for request in runner.summary_requests] == [2]
        assert len(runner.estimates) - estimates_before == 2
        assert [m.sequence for m in runner.model_calls[-1].messages] == [3]
        snapshot = await session.sessions.get_agent_snapshot("s1")
        assert snapshot.messages[-1].text == "echo: m2"
        history = [entry.step_type for entry in await session.client.read_step_history("s1")]
        assert history.count("CompactContext") == 1
        assert history.count("RunModel") == 3
        # A cutoff that is not past the current summary never moves to CompactContext.
        runner.cutoff = 2
        await run_turns(session, 3, 3)
        assert len(runner.summary_requests) == 1
        history = [entry.step_type for entry in await session.client.read_step_history("s1")]
        assert history.count("CompactContext") == 1
        assert history.count("RunModel") == 4


async def test_the_status_is_compacting_context_while_the_summary_call_runs() -> None:
    release = asyncio.Event()
    runner = CompactingRunner(always_high=True)
    async with session_stack(MemoryFlowStore(), runner, compacting_options()) as session:
        await run_turns(session, 1, 1)
        runner.release_summary = release
        await session.sessions.send_user_message("s1", "m2")
        state = await session.until(
            "the compaction to start",
            lambda s: (
                s.state if s.state and s.state.status is AgentStatus.COMPACTING_CONTEXT else None
            ),
        )
        assert state.active_turn_id == "turn-2"
        release.set()
        snapshot = await session.idle(turns=2)
        assert snapshot.context_summary is not None


async def test_a_failed_summary_call_is_retried_alone() -> None:
    runner = CompactingRunner(always_high=True, summary_failures=1)
    limit = RunModelLimit(maximum_attempts=2)
    async with session_stack(
        MemoryFlowStore(), runner, compacting_options(run_model_limit=limit)
    ) as session:
        await run_turns(session, 1, 2)
        assert len(runner.summary_requests) == 2
        assert len(runner.model_calls) == 2  # the retry reran only the summary call
        events = turn_events(await session.events(), "turn-2")
        finished = [event for event in events if event.type == "compaction_finished"]
        assert [(event.attempt, event.step_execution_id) for event in finished] == [
            (2, finished[0].step_execution_id)
        ]
        started = [event.attempt for event in events if event.type == "compaction_started"]
        assert started == [1, 2]


async def test_a_summary_call_that_keeps_failing_fails_the_turn() -> None:
    runner = CompactingRunner(always_high=True, summary_failures=1)
    async with session_stack(
        MemoryFlowStore(), runner, compacting_options(run_model_limit=ONE_ATTEMPT)
    ) as session:
        await run_turns(session, 1, 2)
        snapshot = await session.sessions.get_agent_snapshot("s1")
        assert snapshot.state is not None
        assert snapshot.state.last_turn_error == "the summary model is down"
        assert snapshot.context_summary is None
        assert len(runner.model_calls) == 1  # turn-2 never called the model
        assert [m.text for m in snapshot.messages] == ["m1", "echo: m1", "m2"]


async def test_a_summary_usage_count_that_is_not_an_int_fails_the_call_without_a_summary() -> None:
    # Stored as 70.0 in the session total, it would no longer decode as an AgentUsage.
    runner = CompactingRunner(always_high=True)
    runner.summary_usage = AgentUsage(model_calls=1, input_tokens=70.0)  # type: ignore[arg-type]
    async with session_stack(
        MemoryFlowStore(), runner, compacting_options(run_model_limit=ONE_ATTEMPT)
    ) as session:
        await run_turns(session, 1, 2)
        snapshot = await session.sessions.get_agent_snapshot("s1")
        assert snapshot.state is not None
        assert (
            snapshot.state.last_turn_error
            == "ContextSummaryResult.usage.input_tokens must be an int, not float"
        )
        assert snapshot.context_summary is None
        assert snapshot.usage == MODEL_USAGE
        assert [event.type for event in await session.events()][-1] == "turn_failed"


NOT_STORED = (
    "select_compaction_cutoff returned {}, which is not the sequence of a stored message (1 to 3)"
)


@pytest.mark.parametrize(
    ("cutoff", "error"),
    [
        (9, NOT_STORED.format(9)),
        (0, NOT_STORED.format(0)),
        ("2", "select_compaction_cutoff must return an int, not str"),
        (True, "select_compaction_cutoff must return an int, not bool"),
    ],
)
async def test_a_cutoff_that_is_no_stored_message_fails_the_model_call(
    cutoff: object, error: str
) -> None:
    runner = CompactingRunner(always_high=True)
    async with session_stack(
        MemoryFlowStore(), runner, compacting_options(run_model_limit=ONE_ATTEMPT)
    ) as session:
        await run_turns(session, 1, 1)
        runner.cutoff = cutoff
        await session.sessions.send_user_message("s1", "m2")
        snapshot = await session.idle(turns=2)
        assert snapshot.state is not None
        assert snapshot.state.last_turn_error == error
        assert runner.summary_requests == []


def test_a_compaction_policy_needs_a_context_compaction_runner() -> None:
    with pytest.raises(TypeError) as raised:
        AgentSessionFlow(ScriptedRunner(), flow_type="TestAgent", options=compacting_options())
    assert str(raised.value) == (
        "a compaction policy needs a runner that implements ContextCompactionRunner"
    )
    AgentSessionFlow(CompactingRunner(), flow_type="TestAgent", options=compacting_options())


class _PlainDefSummary(CompactingRunner):
    def summarize_context(  # type: ignore[override]  # the mistake: a plain def
        self, request: ContextSummaryRequest
    ) -> ContextSummaryResult:
        self.summary_requests.append(request)
        return ContextSummaryResult(text="summary", usage=SUMMARY_USAGE)


def test_a_summarize_context_that_is_no_coroutine_function_is_refused_at_construction() -> None:
    # It passed the Protocol check, then every compacting turn made the summary call on
    # each attempt and failed on the await.
    with pytest.raises(TypeError) as raised:
        AgentSessionFlow(_PlainDefSummary(), flow_type="TestAgent", options=compacting_options())
    assert str(raised.value) == (
        "a compaction policy needs a runner that implements ContextCompactionRunner:"
        " summarize_context of _PlainDefSummary must be a coroutine function (async def)"
    )
    AgentSessionFlow(_PlainDefSummary(), flow_type="TestAgent")  # without compaction, unused


class _AsyncEstimate(CompactingRunner):
    async def estimate_input_tokens(  # type: ignore[override]  # the mistake: async def
        self, turn: AgentTurnContext
    ) -> int:
        return 10


class _AsyncCutoff(CompactingRunner):
    async def select_compaction_cutoff(  # type: ignore[override]  # the mistake: async def
        self, turn: AgentTurnContext, retained_token_budget: int
    ) -> int | None:
        return None


@pytest.mark.parametrize(
    ("runner", "method"),
    [
        (_AsyncEstimate(), "estimate_input_tokens"),
        (_AsyncCutoff(), "select_compaction_cutoff"),
    ],
)
def test_an_estimate_or_cutoff_that_is_a_coroutine_function_is_refused_at_construction(
    runner: CompactingRunner, method: str
) -> None:
    # RunModel calls both without awaiting: every turn failed before its model call.
    with pytest.raises(TypeError) as raised:
        AgentSessionFlow(runner, flow_type="TestAgent", options=compacting_options())
    assert str(raised.value) == (
        "a compaction policy needs a runner that implements ContextCompactionRunner:"
        f" {method} of {type(runner).__name__} must be a plain function, not a coroutine"
        " function (it runs without I/O)"
    )


def test_compact_context_has_the_options_of_run_model() -> None:
    limit = RunModelLimit(
        timeout=timedelta(minutes=3),
        heartbeat_timeout=timedelta(seconds=40),
        maximum_attempts=5,
        total_duration=timedelta(minutes=9),
    )
    options = compacting_options(run_model_limit=limit)
    runtime = SessionRuntime(
        CompactingRunner(), options, agent_events_stream(options.event_stream_capacity_bytes), "T"
    )
    step_options = compaction_steps.CompactContext(runtime).options()
    assert step_options == run_model.RunModel(runtime).options()
    assert step_options.execute_timeout == timedelta(minutes=3)
    assert step_options.heartbeat_timeout == timedelta(seconds=40)
    assert step_options.retry.maximum_attempts == 5
    assert step_options.retry.total_duration == timedelta(minutes=9)
    assert step_options.failure_step is not None
    assert step_options.failure_step.step_type == "RecordTurnFailure"


SMALL_STORAGE: dict[str, Any] = {
    "message_window_size": 4,
    "message_chunk_size": 2,
    "retained_message_limit": 6,
}


async def all_pages(session: Session) -> tuple[list[int], set[int | None]]:
    """Every listed sequence, paging back from the newest page, and each page's deletion mark."""
    sequences: list[int] = []
    marks: set[int | None] = set()
    before: int | None = None
    while True:
        page = await session.sessions.list_agent_messages("s1", before_sequence=before, limit=3)
        marks.add(page.deleted_before_sequence)
        sequences[:0] = [message.sequence for message in page.messages]
        if not page.has_more:
            return sequences, marks
        before = page.messages[0].sequence


async def test_retention_deletes_summarized_chunks_and_paging_ends_at_first_sequence(
    store: FlowStore,
) -> None:
    runner = CompactingRunner()
    async with session_stack(store, runner, compacting_options(**SMALL_STORAGE)) as session:
        await run_turns(session, 1, 10)
        snapshot = await session.sessions.get_agent_snapshot("s1")
        assert snapshot.context_summary is not None
        assert snapshot.context_summary.last_sequence == 16  # compacted in turns 5 and 9
        index = await session.client.read_attribute("s1", AGENT_MESSAGE_INDEX)
        assert index is not None
        # Chunks [1, 2] .. [13, 14] end at or before 16 and have at least 6 messages after them.
        assert index.first_sequence == 15
        assert [chunk.first_sequence for chunk in index.chunks][:1] == [15]
        sequences, marks = await all_pages(session)
        assert sequences == list(range(15, 21))
        assert marks == {15}
        assert snapshot.deleted_before_sequence == 15
        assert [m.sequence for m in snapshot.messages] == list(range(15, 21))


async def test_without_compaction_retention_deletes_nothing(store: FlowStore) -> None:
    async with session_stack(
        store, ScriptedRunner(), replace(AgentSessionOptions(), **SMALL_STORAGE)
    ) as session:
        await run_turns(session, 1, 10)
        index = await session.client.read_attribute("s1", AGENT_MESSAGE_INDEX)
        assert index is not None
        assert index.first_sequence == 1
        assert len(index.chunks) >= 5
        sequences, marks = await all_pages(session)
        assert sequences == list(range(1, 21))
        assert marks == {None}


def short_lease_stack(
    path: Path, runner: ScriptedRunner, options: AgentSessionOptions
) -> contextlib.AbstractAsyncContextManager[Session]:
    """``session_stack`` on a SQLite file, with leases short enough for a second Worker to take over.

    A stopped Worker leaves the Steps it claimed to their leases.
    """
    return session_stack(
        SqliteFlowStore(path), runner, options, lease_duration=timedelta(milliseconds=300)
    )


async def test_without_compaction_a_summarized_session_keeps_its_messages_and_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A Worker that runs the session on without compaction: no retention, one warning a call."""
    path = tmp_path / "sessions.sqlite3"
    options = compacting_options(**SMALL_STORAGE)
    async with short_lease_stack(path, CompactingRunner(), options) as session:
        await run_turns(session, 1, 10)
    plain = replace(AgentSessionOptions(), **SMALL_STORAGE)
    with caplog.at_level(logging.WARNING, logger="dex_agents.session"):
        async with short_lease_stack(path, ScriptedRunner(), plain) as session:
            assert await session.sessions.send_user_message("s1", "m11")
            await session.idle(turns=11)
            # The summary (through 16) would let retention delete [15, 16]; without compaction
            # retention does not run.
            index = await session.client.read_attribute("s1", AGENT_MESSAGE_INDEX)
            assert index is not None
            assert index.first_sequence == 15
            sequences, _ = await all_pages(session)
            assert sequences == list(range(15, 23))
    warnings = [r.getMessage() for r in caplog.records if r.name == "dex_agents.session"]
    assert warnings == [
        "session s1: messages before sequence 15 were deleted, and the runner does not"
        " implement ContextCompactionRunner, so its model input starts after them with"
        " no summary"
    ]


async def test_without_compaction_a_summarized_session_s_model_input_is_every_stored_message(
    tmp_path: Path,
) -> None:
    """ "Without compaction, the model input is every message": none was deleted here (no
    retention limit), so the input starts at the first, with no summary."""
    path = tmp_path / "sessions.sqlite3"
    storage = {**SMALL_STORAGE, "retained_message_limit": None}
    async with short_lease_stack(
        path, CompactingRunner(), compacting_options(**storage)
    ) as session:
        await run_turns(session, 1, 10)
        snapshot = await session.sessions.get_agent_snapshot("s1")
        assert snapshot.context_summary is not None
        assert snapshot.context_summary.last_sequence > 1
    runner = ScriptedRunner()
    async with short_lease_stack(
        path, runner, replace(AgentSessionOptions(), **storage)
    ) as session:
        assert await session.sessions.send_user_message("s1", "m11")
        await session.idle(turns=11)
    turn = runner.model_calls[-1]
    assert [message.sequence for message in turn.messages] == list(range(1, 22))
    assert turn.context_summary is None


class _HoldsModelCall(CompactingRunner):
    """Holds the model call for ``held`` until the Worker stops, as a killed process would."""

    def __init__(self, held: str) -> None:
        super().__init__()
        self.held = held
        self.reached = asyncio.Event()

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        if turn.messages and turn.messages[-1].text == self.held:
            self.reached.set()
            await asyncio.Event().wait()
        return await super().run_model_step(turn)


async def test_a_model_call_moved_to_with_compaction_runs_without_it(tmp_path: Path) -> None:
    """The move to ``RunModel`` loaded only the chunks after the summary; the Worker that
    runs it has no compaction, so its model input is every message: it loads them first."""
    path = tmp_path / "sessions.sqlite3"
    storage = {**SMALL_STORAGE, "retained_message_limit": None}
    held = _HoldsModelCall("m11")
    async with short_lease_stack(path, held, compacting_options(**storage)) as session:
        await run_turns(session, 1, 10)
        assert await session.sessions.send_user_message("s1", "m11")
        await held.reached.wait()
        snapshot = await session.sessions.get_agent_snapshot("s1")
        assert snapshot.context_summary is not None
        assert snapshot.context_summary.last_sequence > 1
    runner = ScriptedRunner()
    async with short_lease_stack(
        path, runner, replace(AgentSessionOptions(), **storage)
    ) as session:
        snapshot = await session.idle(turns=11)
    assert snapshot.state is not None
    assert snapshot.state.last_turn_error is None
    turn = runner.model_calls[-1]
    assert [message.sequence for message in turn.messages] == list(range(1, 22))
    assert turn.context_summary is None


async def run_long_session(turns: int, retained_message_limit: int) -> float:
    """Queue ``turns`` messages at once and run them all; return the seconds it took.

    The model input stays at most 9 messages, retention keeps only the newest
    ``retained_message_limit`` messages (rounded to whole chunks) once they are
    summarized, and the summary generation counts the compactions: one every 4
    turns from turn 5.
    """
    runner = CompactingRunner()
    options = compacting_options(
        message_window_size=8,
        message_chunk_size=4,
        retained_message_limit=retained_message_limit,
    )
    began = time.monotonic()
    async with session_stack(MemoryFlowStore(), runner, options) as session:
        await session.sessions.start_session("s1", "m1")
        for number in range(2, turns + 1):
            assert await session.sessions.send_user_message("s1", f"m{number}")
        deadline = asyncio.get_running_loop().time() + 600
        while True:
            snapshot = await session.sessions.get_agent_snapshot("s1")
            state = snapshot.state
            if state is not None and state.turn_count == turns and state.active_turn_id is None:
                break
            assert asyncio.get_running_loop().time() < deadline, "the long session timed out"
            await asyncio.sleep(0.2)
        elapsed = time.monotonic() - began
        assert state.last_turn_error is None
        assert state.last_sequence == 2 * turns
        assert len(runner.model_calls) == turns
        assert max(len(call.messages) for call in runner.model_calls) <= 9
        compactions = (turns - 5) // 4 + 1
        assert len(runner.summary_requests) == compactions
        summary = snapshot.context_summary
        assert summary is not None
        assert summary.generation == compactions
        index = await session.client.read_attribute("s1", AGENT_MESSAGE_INDEX)
        assert index is not None
        # Chunks of 4 end at multiples of 4; retention deletes each one that ends at or
        # before the summary with at least the retained limit of messages after it.
        deletable = min(summary.last_sequence, state.last_sequence - retained_message_limit)
        assert index.first_sequence == deletable // 4 * 4 + 1
        assert len(index.chunks) <= (retained_message_limit + 8) // 4
        page = await session.sessions.list_agent_messages(
            "s1", before_sequence=index.first_sequence + 1
        )
        assert [m.sequence for m in page.messages] == [index.first_sequence]
        assert not page.has_more
        assert page.deleted_before_sequence == index.first_sequence
    return elapsed


async def test_an_800_turn_session_stays_bounded() -> None:
    elapsed = await run_long_session(800, retained_message_limit=100)
    print(f"800-turn guard: {elapsed:.1f} s")


@pytest.mark.skipif(
    os.environ.get("DEX_AGENTS_LONG_TESTS") != "1", reason="set DEX_AGENTS_LONG_TESTS=1"
)
async def test_a_2000_turn_session_stays_bounded() -> None:
    elapsed = await run_long_session(2000, retained_message_limit=1000)
    print(f"2000-turn session: {elapsed:.1f} s")
