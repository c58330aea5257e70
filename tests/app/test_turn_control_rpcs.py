"""The turn control RPCs over a fake transaction: every refusal of the RPC table, and what
each RPC stages."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import attrs
import pytest

from dex_agents.app.rpcs import ATTENTION_SNAPSHOT, SNAPSHOT_WHEN_NEEDED, resolve_interrupt
from dex_agents.app.steps.turn_control import FinishTurnCancellation
from dex_agents.app.turn_control_rpcs import (
    CANCELLED_STEP_TYPES,
    cancel_turn,
    delete_queued_message,
    execute_plan,
    steer_user_message,
)
from dex_agents.domain.attention import SessionAttention, session_attention
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.domain.plans import PlanExecutionRequest
from dex_agents.domain.requests import (
    CancelTurnRequest,
    DeleteQueuedMessageRequest,
    ExecutePlanRequest,
    ResolveInterruptRequest,
    SteerUserMessageRequest,
)
from dex_agents.domain.session_graph_document import session_flow_definition_document
from dex_agents.domain.state import (
    AgentState,
    TurnCancellationRequest,
    TurnControlKind,
    TurnControlRequest,
)
from dex_agents.domain.wire import to_json
from dex_agents.ports.engine import StepMovement
from dex_agents.ports.errors import ChannelMessageNotFoundError
from dex_agents.ports.persistence import AttributeDef, ChannelDef
from dex_agents.ports.session_schema import (
    AGENT_PLAN,
    PENDING_INTERRUPTS,
    PENDING_PLAN_EXECUTION,
    QUEUED_USER_MESSAGES,
    STEERED_USER_MESSAGES,
    TURN_CANCELLATION_REQUEST,
    TURN_CONTROL_REQUESTS,
)
from tests.app.turn_control_fakes import (
    ACTIVE,
    DRAFT,
    IDLE,
    LOCKED,
    NOW,
    QUEUED,
    QUEUED_ID,
    WAITING_INTERRUPT,
    call,
    published,
    runtime,
    staged,
)


@pytest.mark.parametrize(
    ("case", "agent_state", "request_value"),
    [
        ("both", ACTIVE, SteerUserMessageRequest(message_id=QUEUED_ID, text="x")),
        ("neither", ACTIVE, SteerUserMessageRequest()),
        ("blank text", ACTIVE, SteerUserMessageRequest(text=" \n")),
        ("plan mode off", ACTIVE, SteerUserMessageRequest(text="x", plan_mode=True)),
        ("no longer queued", ACTIVE, SteerUserMessageRequest(message_id="gone")),
        ("no turn control, text", LOCKED, SteerUserMessageRequest(text="x")),
        ("no turn control, id", LOCKED, SteerUserMessageRequest(message_id=QUEUED_ID)),
    ],
)
def test_steer_user_message_refuses(
    case: str, agent_state: AgentState, request_value: SteerUserMessageRequest
) -> None:
    state = staged(agent_state, channels={QUEUED_USER_MESSAGES: [AgentUserMessage(text="q")]})
    assert call(steer_user_message(runtime()), state, request_value).output is False, case
    assert not state.has_effects


def test_steering_text_publishes_the_message_and_a_wake_for_the_turn() -> None:
    state = staged(ACTIVE)
    assert call(steer_user_message(runtime()), state, SteerUserMessageRequest(text="go")).output
    assert published(state) == [
        (STEERED_USER_MESSAGES.name, "", to_json(AgentUserMessage(text="go"))),
        (
            TURN_CONTROL_REQUESTS.name,
            "",
            to_json(TurnControlRequest(kind=TurnControlKind.STEER, turn_id="turn-1")),
        ),
    ]


def test_steering_text_while_no_turn_is_active_queues_it() -> None:
    state = staged(IDLE)
    assert call(steer_user_message(runtime()), state, SteerUserMessageRequest(text="go")).output
    assert published(state) == [
        (QUEUED_USER_MESSAGES.name, "", to_json(AgentUserMessage(text="go")))
    ]


EARLIER = [AgentUserMessage(text="earlier")]


@pytest.mark.parametrize(
    ("case", "request_value", "moved", "steered", "taken"),
    [
        ("text", SteerUserMessageRequest(text="go"), AgentUserMessage(text="go"), EARLIER, []),
        (
            "text, the steered messages taken by ApplyTurnControl's wait",
            SteerUserMessageRequest(text="go"),
            AgentUserMessage(text="go"),
            [],
            EARLIER,
        ),
        ("a queued message", SteerUserMessageRequest(message_id=QUEUED_ID), QUEUED, EARLIER, []),
    ],
)
def test_a_steer_between_a_steered_turn_and_the_turn_it_starts_joins_the_steered_messages(
    case: str,
    request_value: SteerUserMessageRequest,
    moved: AgentUserMessage,
    steered: list[AgentUserMessage],
    taken: list[AgentUserMessage],
) -> None:
    # The steered turn has ended and the turn of its steered messages has not started:
    # queued text would start a turn only after that one, and after a steer sent later.
    # A wait that took the steered messages keeps them listed until its Step commits.
    state = staged(
        IDLE,
        channels={STEERED_USER_MESSAGES: steered, QUEUED_USER_MESSAGES: [QUEUED]},
        taken={STEERED_USER_MESSAGES: taken},
    )
    assert call(steer_user_message(runtime()), state, request_value).output is True, case
    assert published(state) == [
        (STEERED_USER_MESSAGES.name, "", to_json(moved)),
        (
            TURN_CONTROL_REQUESTS.name,
            "",
            to_json(TurnControlRequest(kind=TurnControlKind.STEER, turn_id=None)),
        ),
    ], case


def test_a_queued_plan_mode_message_moved_by_id_keeps_plan_mode() -> None:
    queued = AgentUserMessage(text="plan it", plan_mode=True)
    state = staged(ACTIVE, channels={QUEUED_USER_MESSAGES: [queued]})
    rpc = steer_user_message(runtime(plan_mode_enabled=False))
    assert call(rpc, state, SteerUserMessageRequest(message_id=QUEUED_ID)).output is True
    assert state.deleted_messages == [QUEUED_ID]
    assert published(state)[0] == (STEERED_USER_MESSAGES.name, "", to_json(queued))


@pytest.mark.parametrize(
    ("rpc", "request_value"),
    [
        (steer_user_message, SteerUserMessageRequest(message_id=QUEUED_ID)),
        (delete_queued_message, DeleteQueuedMessageRequest(message_id=QUEUED_ID)),
    ],
)
def test_a_message_consumed_while_the_rpc_runs_raises(rpc: Any, request_value: object) -> None:
    state = staged(
        ACTIVE, channels={QUEUED_USER_MESSAGES: [AgentUserMessage(text="q")]}, vanishing=[QUEUED_ID]
    )
    with pytest.raises(ChannelMessageNotFoundError, match="was consumed while the RPC ran"):
        call(rpc(runtime()), state, request_value)


def test_delete_queued_message() -> None:
    state = staged(IDLE, channels={QUEUED_USER_MESSAGES: [AgentUserMessage(text="q")]})
    rpc = delete_queued_message(runtime())
    assert call(rpc, state, DeleteQueuedMessageRequest(message_id="gone")).output is False
    assert call(rpc, state, DeleteQueuedMessageRequest(message_id=QUEUED_ID)).output is True
    assert state.deleted_messages == [QUEUED_ID]


@pytest.mark.parametrize(
    ("case", "agent_state", "turn_id"),
    [
        ("no session state", None, "turn-1"),
        ("no active turn", IDLE, "turn-1"),
        ("another turn", ACTIVE, "turn-2"),
        ("no turn control", LOCKED, "turn-1"),
    ],
)
def test_cancel_turn_refuses(case: str, agent_state: AgentState | None, turn_id: str) -> None:
    state = staged(agent_state)
    result = call(cancel_turn(runtime()), state, CancelTurnRequest(turn_id=turn_id))
    assert (result.output, result.next_steps, result.canceling_steps) == (False, (), ()), case
    assert not state.has_effects


def test_cancel_turn_records_the_request_cancels_the_waits_and_finishes_the_cancellation() -> None:
    state = staged(ACTIVE)
    result = call(cancel_turn(runtime()), state, CancelTurnRequest(turn_id="turn-1"))
    assert result.output is True
    assert state.get(TURN_CANCELLATION_REQUEST) == TurnCancellationRequest(
        turn_id="turn-1", requested_at=NOW
    )
    assert result.next_steps == (StepMovement(FinishTurnCancellation, "turn-1"),)
    assert [step.step_type for step in result.canceling_steps] == list(CANCELLED_STEP_TYPES)
    again = staged(ACTIVE, values={TURN_CANCELLATION_REQUEST: state.get(TURN_CANCELLATION_REQUEST)})
    second = call(cancel_turn(runtime()), again, CancelTurnRequest(turn_id="turn-1"))
    assert (second.output, second.next_steps, second.canceling_steps) == (True, (), ())
    assert not again.has_effects


def test_dex_webs_cancel_turn_action_names_exactly_what_the_rpc_cancels_and_starts() -> None:
    # The session graph tells Dex Web which Steps pressing cancel_turn cancels.
    result = call(cancel_turn(runtime()), staged(ACTIVE), CancelTurnRequest(turn_id="turn-1"))
    document = session_flow_definition_document("SupportAgent", "support-agent.operate")
    (action,) = [action for action in document.actions if action.name == "cancel_turn"]
    assert action.cancels == tuple(step.step_type for step in result.canceling_steps)
    assert action.moves_to == tuple(movement.step.step_type for movement in result.next_steps)


def test_a_cancelled_turns_interrupts_ask_no_person_before_finish_turn_cancellation() -> None:
    # cancel_turn leaves the turn's interrupts to FinishTurnCancellation, a later commit
    # (with no worker free, much later). Before, the snapshot still listed them, so
    # wait_for_user right after cancel_turn returned an approval that resolve_interrupt refused.
    other_turn = attrs.evolve(WAITING_INTERRUPT, interrupt_id="b", tool_call_id="b", turn_id="t0")
    both = staged(ACTIVE, values={PENDING_INTERRUPTS: (WAITING_INTERRUPT, other_turn)})
    assert call(cancel_turn(runtime()), both, CancelTurnRequest(turn_id="turn-1")).output
    assert call(ATTENTION_SNAPSHOT, both, None).output.pending_interrupts == (other_turn,)
    state = staged(ACTIVE, values={PENDING_INTERRUPTS: (WAITING_INTERRUPT,)})
    assert session_attention(call(ATTENTION_SNAPSHOT, state, None).output) is (
        SessionAttention.APPROVAL
    )
    assert call(cancel_turn(runtime()), state, CancelTurnRequest(turn_id="turn-1")).output
    snapshot = call(SNAPSHOT_WHEN_NEEDED, state, None).output
    assert snapshot.pending_interrupts == ()
    assert session_attention(snapshot) is None  # the turn is ending, not waiting for a person
    approval = ResolveInterruptRequest(interrupt_id="a", approved=True)
    assert call(resolve_interrupt(runtime()), state, approval).output is False


def test_an_interrupt_past_its_deadline_asks_no_person_before_its_timer_fires() -> None:
    # The deadline Timer removes an expired interrupt only once a worker runs it (with none
    # running, never). Before, the snapshot still listed it, so wait_for_user returned at
    # once, again and again, and `dex-agents sessions` said "waiting for approval", for an
    # approval that resolve_interrupt refused.
    expired = attrs.evolve(WAITING_INTERRUPT, deadline=NOW)
    later = attrs.evolve(
        WAITING_INTERRUPT, interrupt_id="b", tool_call_id="b", deadline=NOW + timedelta(seconds=1)
    )
    state = staged(ACTIVE, values={PENDING_INTERRUPTS: (expired, later)})
    assert call(ATTENTION_SNAPSHOT, state, None).output.pending_interrupts == (later,)
    state = staged(ACTIVE, values={PENDING_INTERRUPTS: (expired,)})
    snapshot = call(SNAPSHOT_WHEN_NEEDED, state, None).output
    assert snapshot.pending_interrupts == ()
    assert session_attention(snapshot) is None  # the Timer rejects it; no person can
    approval = ResolveInterruptRequest(interrupt_id="a", approved=True)
    assert call(resolve_interrupt(runtime()), state, approval).output is False


@pytest.mark.parametrize(
    ("case", "revision", "values", "channels", "expected"),
    [
        ("accepted", 3, {}, {}, True),
        ("stale revision", 2, {}, {}, False),
        ("pending", 3, {PENDING_PLAN_EXECUTION: PlanExecutionRequest(revision=3)}, {}, False),
        ("queued", 3, {}, {QUEUED_USER_MESSAGES: [AgentUserMessage(text="q")]}, False),
        ("steered", 3, {}, {STEERED_USER_MESSAGES: [AgentUserMessage(text="q")]}, False),
        ("interrupt", 3, {PENDING_INTERRUPTS: (WAITING_INTERRUPT,)}, {}, False),
    ],
)
def test_execute_plan(
    case: str,
    revision: int,
    values: dict[AttributeDef[Any], Any],
    channels: dict[ChannelDef[Any], list[Any]],
    expected: bool,
) -> None:
    state = staged(IDLE, values={AGENT_PLAN: DRAFT, **values}, channels=channels)
    assert call(execute_plan(runtime()), state, ExecutePlanRequest(revision=revision)).output is (
        expected
    ), case
    if expected:
        approval = PlanExecutionRequest(revision=3)
        assert state.get(PENDING_PLAN_EXECUTION) == approval
        assert published(state) == [("PlanExecutions", "3", to_json(approval))]


def test_an_accepted_plan_approval_keeps_the_session_busy_until_its_turn_starts() -> None:
    # execute_plan commits the approval; AwaitUserMessage starts the executing turn in a
    # later commit (with no worker running, much later). Before, the snapshot in between
    # read as idle: wait_for_user right after execute_plan returned the draft plan at once.
    state = staged(IDLE, values={AGENT_PLAN: DRAFT})
    assert session_attention(call(ATTENTION_SNAPSHOT, state, None).output) is (
        SessionAttention.IDLE
    )
    assert call(execute_plan(runtime()), state, ExecutePlanRequest(revision=3)).output
    snapshot = call(ATTENTION_SNAPSHOT, state, None).output
    assert session_attention(snapshot) is None
    assert snapshot.pending_plan_execution == PlanExecutionRequest(revision=3)
    # An approval of a replaced revision never runs: the session waits for a person.
    replaced = attrs.evolve(DRAFT, revision=4)
    stale = staged(
        IDLE,
        values={AGENT_PLAN: replaced, PENDING_PLAN_EXECUTION: PlanExecutionRequest(revision=3)},
    )
    snapshot = call(ATTENTION_SNAPSHOT, stale, None).output
    assert snapshot.pending_plan_execution is None
    assert session_attention(snapshot) is SessionAttention.IDLE
