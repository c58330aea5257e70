"""The SIGKILL matrix: every effect class killed at every point, on a real Worker process.

Each cell of the matrix (four kill points by four effect classes) is a session
of its own on one Worker child. All sixteen stop at their gates
(``tests.reliability.matrix_agent``), the Worker is SIGKILLed there, the gates
open, and a replacement Worker finishes every session; ``DEX_AGENTS_SOAK=1``
runs more rounds. The ``InvocationLog`` then says what really ran, in which
process, how often, against the README's effect table:

- killed in the model call that asks for the tool (``before``): the model call
  runs again and the tool runs once, whatever its effect;
- killed at the tool's first line (``mid``) or after its effect (``after``): a
  read or an idempotent write runs again as attempt 2 with the same
  idempotency key; a non-idempotent or unclassified write is recorded
  ``outcome_unknown`` and never runs again;
- killed in the model call that reads the result (``model``): that model call
  runs again once, and its answer is stored once.
"""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

import pytest

from dex_agents.domain.messages import MessageRole
from dex_agents.domain.tool_calls import ToolCallStatus
from dex_agents.domain.tool_outcomes import OUTCOME_UNKNOWN_TOOL_RESULT
from dex_agents.testing import AgentTestStack, Invocation, WorkerProcess
from tests.reliability.harness import (
    REPO_ROOT,
    Stopwatch,
    approving,
    finished_tool_calls,
    record_figures,
    soak,
    stored_messages,
    wait_idle,
)
from tests.reliability.matrix_agent import (
    KILL_POINTS,
    RETRYABLE,
    STATE_DIR_ENV,
    TOOL_EFFECTS,
    build_matrix_flow,
    invocation_log,
    kill_gate,
    session_id,
)

T = TypeVar("T")

GATE_TIMEOUT = 60.0


async def diagnosed(stack: AgentTestStack, waiting: Awaitable[T]) -> T:
    """Await ``waiting``; on a timeout, fail with the Worker children's output."""
    try:
        return await waiting
    except TimeoutError as error:
        pytest.fail(f"{error}\n{stack.worker_logs()}")


def expected_entries(
    point: str, tool: str, key: str, first: WorkerProcess, second: WorkerProcess
) -> list[Invocation]:
    """What really runs for session ``<point>-<tool>`` when ``first`` dies at its gate."""
    session = session_id(point, tool)
    retried = TOOL_EFFECTS[tool] in RETRYABLE
    model_request = [Invocation(first.pid, f"model {session} request")]
    call_1 = [Invocation(first.pid, f"call {session} {key} attempt=1")]
    effect_1 = [Invocation(first.pid, f"effect {session} {key}")]
    answer = [Invocation(second.pid, f"model {session} answer")]
    if point == "before":
        return [
            *model_request,
            Invocation(second.pid, f"model {session} request"),
            Invocation(second.pid, f"call {session} {key} attempt=1"),
            Invocation(second.pid, f"effect {session} {key}"),
            *answer,
        ]
    if point == "model":
        return [
            *model_request,
            *call_1,
            *effect_1,
            Invocation(first.pid, f"model {session} answer"),
            *answer,
        ]
    before_kill = [*model_request, *call_1, *(effect_1 if point == "after" else [])]
    if not retried:
        return [*before_kill, *answer]
    attempt_2 = [
        Invocation(second.pid, f"call {session} {key} attempt=2"),
        Invocation(second.pid, f"effect {session} {key}"),
    ]
    return [*before_kill, *attempt_2, *answer]


CELLS = [(point, tool) for point in KILL_POINTS for tool in TOOL_EFFECTS]


@pytest.mark.parametrize("round_number", range(soak(1, 4)))
async def test_a_worker_killed_at_every_point_keeps_every_effects_promise(
    tmp_path: Path, round_number: int
) -> None:
    """All sixteen cells at once: sixteen sessions reach their gates, and one SIGKILL hits them all."""
    clock = Stopwatch()
    flow = build_matrix_flow()
    log = invocation_log(tmp_path)
    ids = {cell: session_id(*cell) for cell in CELLS}
    async with AgentTestStack(
        tmp_path,
        [flow],
        "tests.reliability.matrix_worker",
        worker_cwd=REPO_ROOT,
        worker_env={STATE_DIR_ENV: str(tmp_path)},
    ) as stack:
        sessions = stack.sessions(flow)
        first = await stack.start_worker()
        for (point, tool), session in ids.items():
            await sessions.open_session(session)
            assert await sessions.send_user_message(session, f"{point} {tool}")
        async with approving(sessions, list(ids.values())):
            for cell in CELLS:
                reached = kill_gate(tmp_path, *cell).wait_until_reached(GATE_TIMEOUT)
                assert await diagnosed(stack, reached) == first.pid
            first.kill()
            # A run that must not happen again would now pass its gate and be logged.
            for cell in CELLS:
                kill_gate(tmp_path, *cell).release()
            second = await stack.start_worker()
            snapshots = {
                cell: await diagnosed(stack, wait_idle(sessions, session))
                for cell, session in ids.items()
            }
        messages = {session: await stored_messages(sessions, session) for session in ids.values()}
        finished = {
            session: await finished_tool_calls(stack.client, sessions, session)
            for session in ids.values()
        }

    assert first.returncode == -9
    for (point, tool), session in ids.items():
        snapshot = snapshots[point, tool]
        ((tool_call_id, status),) = finished[session].items()
        key = f"{session}/turn-1/{tool_call_id}"
        entries = [e for e in log.entries() if e.name.split()[1] == session]
        assert entries == expected_entries(point, tool, key, first, second), session
        unknown = point in ("mid", "after") and TOOL_EFFECTS[tool] not in RETRYABLE
        output = OUTCOME_UNKNOWN_TOOL_RESULT if unknown else f"{tool} ok"
        assert status is (ToolCallStatus.OUTCOME_UNKNOWN if unknown else ToolCallStatus.SUCCEEDED)
        stored = messages[session]
        results = [m.tool_output for m in stored if m.role is MessageRole.TOOL]
        assert results == [output], session
        assert [m.text for m in stored if m.role is MessageRole.USER] == [f"{point} {tool}"]
        answers = [m.text for m in stored if m.role is MessageRole.ASSISTANT and m.text]
        assert answers == [f"{session}: {output}"], session
        assert snapshot.state is not None
        assert snapshot.state.last_turn_error is None
    record_figures(
        "kill_matrix",
        round=round_number,
        kills=1,
        cells=len(CELLS),
        messages_lost=0,
        writes_duplicated=0,
        seconds=clock.seconds(),
    )
