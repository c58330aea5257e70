"""``ContextWindowSessionScenario`` against the built-in loop and the core's scripted runner.

The built-in loop is one adapter of the runner contract, so its tests run the
scenario as any adapter's would: the Flow built from the scenario's compaction
and storage, on the in-memory and the SQLite engine. Runners that never compact,
or compact once and then stop, show the scenario fails them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dex_agents import AgentSessionClient, AgentSessionFlow
from dex_agents.app.builtin_loop.definition import AgentDefinition
from dex_agents.app.builtin_loop.flow import builtin_agent_session_options
from dex_agents.app.builtin_loop.runner import BuiltinLoopAgentRunner
from dex_agents.builtin_loop import ModelRequest, ScriptedModelClient, ScriptedModelReply
from dex_agents.domain.compaction import estimate_stored_input_tokens
from dex_agents.domain.context_summary import ContextSummary
from dex_agents.domain.context_summary_prompt import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    CONTEXT_SUMMARY_NOTE_HEADER,
)
from dex_agents.domain.messages import MessageRole
from dex_agents.domain.model_io import UserTextItem
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.state import AgentState, AgentStatus
from dex_agents.local import LocalRuntime
from dex_agents.ports.runner import AgentTurnContext
from dex_agents.testing import ContextWindowSessionResult, ContextWindowSessionScenario
from tests.app.compaction_support import CompactingRunner

SCENARIO = ContextWindowSessionScenario()


def reply(request: ModelRequest) -> ScriptedModelReply:
    """A summary of how many requests it saw for summary calls; a short answer otherwise."""
    if request.instructions == CONTEXT_SUMMARY_INSTRUCTIONS:
        (prompt,) = ScriptedModelClient.user_texts(request)
        return ScriptedModelReply(text=f"The user sent {prompt.count('Request ')} requests.")
    last = ScriptedModelClient.user_texts(request)[-1]
    return ScriptedModelReply(text=f"Noted {last.split(':')[0].lower()}.")


@pytest.fixture(params=["memory", "sqlite"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Path | None:
    return None if request.param == "memory" else tmp_path / "sessions.sqlite3"


@asynccontextmanager
async def serving(
    database: Path | None, flow: AgentSessionFlow
) -> AsyncIterator[AgentSessionClient]:
    async with LocalRuntime(database, [flow], poll_interval=timedelta(milliseconds=20)) as runtime:
        yield runtime.sessions(flow)


def builtin_flow(
    scenario: ContextWindowSessionScenario,
) -> tuple[AgentSessionFlow, ScriptedModelClient]:
    model = ScriptedModelClient(reply, max_recorded_requests=1000)
    definition = AgentDefinition(
        name="notes",
        instructions="Acknowledge each request.",
        model=model,
        compaction=scenario.compaction,
    )
    options = scenario.session_options(builtin_agent_session_options(definition))
    flow = AgentSessionFlow(
        BuiltinLoopAgentRunner(definition), flow_type="NotesAgent", options=options
    )
    return flow, model


async def test_the_builtin_loop_holds_compaction_retention_and_the_summary(
    database: Path | None,
) -> None:
    flow, model = builtin_flow(SCENARIO)
    async with serving(database, flow) as sessions:
        result = await SCENARIO.run(sessions)
    assert isinstance(result, ContextWindowSessionResult)
    assert len(result.summaries) >= SCENARIO.min_compactions
    summary = result.summaries[-1]
    assert result.snapshot.context_summary == summary
    assert 1 < result.deleted_before_sequence <= summary.last_sequence + 1
    # What the scenario cannot see: the built-in loop's last model input starts with the
    # summary note and leaves out every summarized message.
    answers = [r for r in model.requests if r.instructions != CONTEXT_SUMMARY_INSTRUCTIONS]
    last_input = answers[-1]
    first = last_input.items[0]
    assert isinstance(first, UserTextItem)
    assert first.text == f"{CONTEXT_SUMMARY_NOTE_HEADER}\n{summary.text}"
    kept_after_summary = {
        message.text
        for message in result.messages
        if message.role is MessageRole.USER and message.sequence > summary.last_sequence
    }
    assert set(last_input.user_texts[1:]) == kept_after_summary
    assert last_input.user_texts[-1] == SCENARIO.user_message(SCENARIO.turns)
    summary_calls = [r for r in model.requests if r.instructions == CONTEXT_SUMMARY_INSTRUCTIONS]
    assert len(summary_calls) == summary.generation


@dataclasses.dataclass
class SharedRuleRunner(CompactingRunner):
    """The core's scripted runner with a framework adapter's estimate: the shared rule."""

    def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        return estimate_stored_input_tokens(turn)


async def test_a_framework_adapter_on_the_shared_rule_passes_the_same_scenario() -> None:
    flow = AgentSessionFlow(
        SharedRuleRunner(), flow_type="TestAgent", options=SCENARIO.session_options()
    )
    async with serving(None, flow) as sessions:
        result = await SCENARIO.run(sessions)
    assert result.summaries[-1].generation >= SCENARIO.min_compactions


@dataclasses.dataclass
class NeverCompacts(SharedRuleRunner):
    """Counts no tokens, so the window never fills."""

    def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        return 0


@dataclasses.dataclass
class CompactsOnce(SharedRuleRunner):
    """Finds one cut and never another: the summary stops moving forward."""

    def select_compaction_cutoff(
        self, turn: AgentTurnContext, retained_token_budget: int
    ) -> int | None:
        if turn.context_summary is not None:
            return None
        return super().select_compaction_cutoff(turn, retained_token_budget)


@pytest.mark.parametrize(
    ("runner", "reached"), [(NeverCompacts(), 0), (CompactsOnce(), 1)], ids=["never", "once"]
)
async def test_a_runner_that_does_not_keep_compacting_fails_the_scenario(
    runner: CompactingRunner, reached: int
) -> None:
    flow = AgentSessionFlow(runner, flow_type="TestAgent", options=SCENARIO.session_options())
    async with serving(None, flow) as sessions:
        with pytest.raises(AssertionError) as raised:
            await SCENARIO.run(sessions)
    assert str(raised.value).startswith(
        f"the session compacted {reached} times in {SCENARIO.turns} turns, not at least 2"
    )


async def test_a_session_that_existed_before_fails_the_scenario() -> None:
    flow = AgentSessionFlow(
        SharedRuleRunner(), flow_type="TestAgent", options=SCENARIO.session_options()
    )
    async with serving(None, flow) as sessions:
        await sessions.open_session(SCENARIO.session_id)
        with pytest.raises(AssertionError, match="existed before the scenario started"):
            await SCENARIO.run(sessions)


def test_the_scenario_messages_are_distinct_and_about_the_token_size() -> None:
    texts = [SCENARIO.user_message(turn) for turn in range(1, SCENARIO.turns + 1)]
    assert len(set(texts)) == SCENARIO.turns
    assert all(len(text.encode()) == SCENARIO.user_message_tokens * 3 for text in texts)
    options = SCENARIO.session_options()
    assert options.compaction == SCENARIO.compaction
    assert options.compaction is not None
    assert options.compaction.context_window_tokens == 2_000
    assert (options.message_chunk_size, options.retained_message_limit) == (4, 8)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"turns": 0}, "turns must be an int of at least 1, not 0"),
        ({"min_compactions": True}, "min_compactions must be an int of at least 1, not True"),
        (
            {"user_message_tokens": 2_000},
            "user_message_tokens must be below context_window_tokens, or no turn fits",
        ),
        ({"context_window_tokens": 0}, "context_window_tokens must be at least 1, not 0"),
        ({"turn_timeout": 60}, "turn_timeout must be a positive timedelta, not 60"),
        (
            {"turn_timeout": timedelta(0)},
            "turn_timeout must be a positive timedelta, not datetime.timedelta(0)",
        ),
        ({"session_id": " "}, "invalid session ID ' ': it is blank"),
    ],
)
def test_a_setting_the_run_cannot_meet_raises(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        ContextWindowSessionScenario(**changes)  # type: ignore[arg-type]


def after_turn(
    last_sequence: int, summary: ContextSummary | None, deleted_before: int | None
) -> AgentSnapshot:
    """A snapshot of an idle session after turn 3."""
    state = AgentState(
        status=AgentStatus.WAITING_FOR_USER_MESSAGE, turn_count=3, last_sequence=last_sequence
    )
    return AgentSnapshot(
        state=state, context_summary=summary, deleted_before_sequence=deleted_before
    )


def summary_through(generation: int, last_sequence: int) -> ContextSummary:
    return ContextSummary(
        generation=generation,
        last_sequence=last_sequence,
        text="earlier requests",
        created_at=datetime(2026, 12, 1, tzinfo=UTC),
    )


@pytest.mark.parametrize(
    ("previous", "snapshot", "message"),
    [
        (
            [summary_through(2, 10)],
            after_turn(30, summary_through(2, 12), None),
            "turn 3: summary generation 2 through 12 does not move past generation 2 through 10",
        ),
        (
            [summary_through(1, 10)],
            after_turn(30, None, None),
            "turn 3: the context summary disappeared",
        ),
        (
            [],
            after_turn(30, summary_through(1, 10), 13),
            "turn 3: retention deleted messages before 13, but only 10 are summarized",
        ),
        (
            [],
            after_turn(30, summary_through(1, 28), 25),
            "turn 3: retention kept 6 messages, fewer than retained_message_limit 8",
        ),
        (
            [],
            after_turn(30, summary_through(1, 30), None),
            "turn 3: the summary reaches sequence 30, but the session's last message is 30",
        ),
    ],
)
def test_each_turn_check_names_what_broke(
    previous: list[ContextSummary], snapshot: AgentSnapshot, message: str
) -> None:
    # The checks a correct engine never trips, shown on hand-built snapshots.
    with pytest.raises(AssertionError) as raised:
        SCENARIO._check_turn(3, snapshot, previous, 1)
    assert str(raised.value) == message
