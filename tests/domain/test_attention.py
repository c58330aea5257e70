"""``session_attention`` and ``last_turn_cancelled``: when a session needs a person and how
its newest turn ended, as tables of snapshots and states."""

from __future__ import annotations

import attrs
import pytest

from dex_agents.domain.attention import (
    SessionAttention,
    last_turn_cancelled,
    session_attention,
    with_cancelled_turn,
)
from dex_agents.domain.interrupts import AgentInterrupt, InterruptKind
from dex_agents.domain.messages import QueuedUserMessage
from dex_agents.domain.plans import PlanExecutionRequest
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.state import AgentState, AgentStatus, TurnCancellationRequest

IDLE = AgentState(status=AgentStatus.WAITING_FOR_USER_MESSAGE, turn_count=1)
RUNNING = AgentState(status=AgentStatus.RUNNING_TOOLS, active_turn_id="turn-2", turn_count=2)
QUEUED = QueuedUserMessage(message_id="m-1", text="next")


def interrupt(kind: InterruptKind) -> AgentInterrupt:
    return AgentInterrupt(
        interrupt_id="i-1", tool_call_id="c-1", tool_name="refund", kind=kind, turn_id="turn-2"
    )


CASES: list[tuple[str, AgentSnapshot, SessionAttention | None]] = [
    ("not started yet", AgentSnapshot(state=None), None),
    ("idle after a turn", AgentSnapshot(state=IDLE), SessionAttention.IDLE),
    (
        "idle after a failed turn",
        AgentSnapshot(
            state=AgentState(status=AgentStatus.WAITING_FOR_USER_MESSAGE, last_turn_error="boom")
        ),
        SessionAttention.TURN_FAILED,
    ),
    (
        "idle after a failed turn that names itself",
        AgentSnapshot(state=attrs.evolve(IDLE, last_turn_error="boom", failed_turn_id="turn-1")),
        SessionAttention.TURN_FAILED,
    ),
    (
        # A cancelled or steered turn keeps an earlier turn's last_turn_error.
        "idle after a cancelled turn that followed a failed one",
        AgentSnapshot(
            state=attrs.evolve(IDLE, turn_count=2, last_turn_error="boom", failed_turn_id="turn-1")
        ),
        SessionAttention.IDLE,
    ),
    ("a turn running", AgentSnapshot(state=RUNNING), None),
    (
        "waiting status but a turn is active",
        AgentSnapshot(
            state=AgentState(status=AgentStatus.WAITING_FOR_USER_MESSAGE, active_turn_id="turn-2")
        ),
        None,
    ),
    (
        "a message queued",
        AgentSnapshot(state=IDLE, queued_message_count=1, queued_messages=(QUEUED,)),
        None,
    ),
    ("a message steered", AgentSnapshot(state=IDLE, steered_messages=(QUEUED,)), None),
    (
        "a plan approval accepted",
        AgentSnapshot(state=IDLE, pending_plan_execution=PlanExecutionRequest(revision=1)),
        None,
    ),
    (
        "an approval during a turn",
        AgentSnapshot(state=RUNNING, pending_interrupts=(interrupt(InterruptKind.APPROVAL),)),
        SessionAttention.APPROVAL,
    ),
    (
        "a question during a turn",
        AgentSnapshot(state=RUNNING, pending_interrupts=(interrupt(InterruptKind.QUESTION),)),
        SessionAttention.QUESTION,
    ),
]


@pytest.mark.parametrize(
    ("snapshot", "expected"), [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_session_attention(snapshot: AgentSnapshot, expected: SessionAttention | None) -> None:
    assert session_attention(snapshot) is expected


CANCELLED_CASES: list[tuple[str, AgentState, bool]] = [
    ("idle after a cancelled turn", attrs.evolve(IDLE, cancelled_turn_id="turn-1"), True),
    ("idle after a completed turn", IDLE, False),
    # The state of an older build keeps no cancelled turn: it reads as ended, as it did.
    ("a state stored before the field", AgentState(status="waiting_for_user_message"), False),
    (
        "a later turn completed",
        attrs.evolve(IDLE, turn_count=2, cancelled_turn_id="turn-1"),
        False,
    ),
    (
        "a later turn runs",
        attrs.evolve(RUNNING, cancelled_turn_id="turn-1"),
        False,
    ),
    (
        "a cancelled turn after a failed one",
        attrs.evolve(
            IDLE,
            turn_count=2,
            last_turn_error="boom",
            failed_turn_id="turn-1",
            cancelled_turn_id="turn-2",
        ),
        True,
    ),
]


@pytest.mark.parametrize(
    ("state", "expected"),
    [case[1:] for case in CANCELLED_CASES],
    ids=[case[0] for case in CANCELLED_CASES],
)
def test_last_turn_cancelled(state: AgentState, expected: bool) -> None:
    assert last_turn_cancelled(state) is expected


REQUEST_TURN_1 = TurnCancellationRequest(turn_id="turn-1")

FILLED_CASES: list[tuple[str, AgentState, TurnCancellationRequest | None, str | None]] = [
    ("an old state whose newest turn the request names", IDLE, REQUEST_TURN_1, "turn-1"),
    ("no request: no turn was ever cancelled", IDLE, None, None),
    (
        "the request names an older turn, and the newest ended otherwise",
        attrs.evolve(IDLE, turn_count=2),
        REQUEST_TURN_1,
        None,
    ),
    (
        "a turn is active: it has not ended yet",
        attrs.evolve(RUNNING, turn_count=1, active_turn_id="turn-1"),
        REQUEST_TURN_1,
        None,
    ),
    (
        "a state that keeps the field is left as it is",
        attrs.evolve(IDLE, turn_count=2, cancelled_turn_id="turn-2"),
        TurnCancellationRequest(turn_id="turn-2"),
        "turn-2",
    ),
    ("before any turn", attrs.evolve(IDLE, turn_count=0), REQUEST_TURN_1, None),
]


@pytest.mark.parametrize(
    ("state", "request_", "expected"),
    [case[1:] for case in FILLED_CASES],
    ids=[case[0] for case in FILLED_CASES],
)
def test_with_cancelled_turn(
    state: AgentState, request_: TurnCancellationRequest | None, expected: str | None
) -> None:
    filled = with_cancelled_turn(state, request_)
    assert filled.cancelled_turn_id == expected
    assert last_turn_cancelled(filled) is (expected is not None and state.active_turn_id is None)
    assert attrs.evolve(filled, cancelled_turn_id=state.cancelled_turn_id) == state
