"""The RPCs of steering, turn cancellation and plan execution.

``steer_user_message`` and ``delete_queued_message`` are transactional and lock
nothing; ``cancel_turn`` locks ``TurnCancellationRequest`` and
``PendingInterrupts``; ``execute_plan`` locks ``PendingPlanExecution``. Like every
RPC they write no Stream events: the Steps that apply them do.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dex_agents.app.session import SessionRuntime, accepts_user_message
from dex_agents.app.steps import turn_control
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.domain.plans import (
    PlanExecutionRequest,
    accepts_plan_execution,
    plan_execution_key,
)
from dex_agents.domain.requests import (
    CancelTurnRequest,
    DeleteQueuedMessageRequest,
    ExecutePlanRequest,
    SteerUserMessageRequest,
)
from dex_agents.domain.session_graph_actions import CANCEL_TURN_STEP_TYPES
from dex_agents.domain.state import TurnCancellationRequest, TurnControlKind, TurnControlRequest
from dex_agents.ports.engine import AttributeLock, Rpc, RpcResult, Step, StepMovement
from dex_agents.ports.errors import ChannelMessageNotFoundError
from dex_agents.ports.persistence import ChannelMessage, StateTransaction
from dex_agents.ports.session_schema import (
    AGENT_PLAN,
    AGENT_STATE,
    PENDING_INTERRUPTS,
    PENDING_PLAN_EXECUTION,
    PLAN_EXECUTIONS,
    QUEUED_USER_MESSAGES,
    STEERED_USER_MESSAGES,
    TURN_CANCELLATION_REQUEST,
    TURN_CONTROL_REQUESTS,
)
from dex_agents.ports.step_contexts import RpcContext

CANCELLED_STEP_TYPES = CANCEL_TURN_STEP_TYPES
"""The Step types ``cancel_turn`` cancels: the model call, compaction (and their failure
route, which would otherwise end the turn a second time), and every wait of a tool call.
The graph's ``cancel_turn`` Action lists the same tuple."""


def _session_step_classes(root: type[Any]) -> Iterable[type[Step[Any]]]:
    for subclass in root.__subclasses__():
        yield subclass
        yield from _session_step_classes(subclass)


def canceling_steps(
    step_types: Iterable[str] = CANCELLED_STEP_TYPES,
) -> tuple[type[Step[Any]], ...]:
    """The session's Step classes of ``step_types``, skipping types this release does not have.

    Looked up by ``step_type`` among the session's own Step classes, so a Step
    another module adds is cancelled once it exists, and a missing one is skipped.
    """
    found: dict[str, type[Step[Any]]] = {}
    for step in _session_step_classes(Step):
        if step.__module__.startswith("dex_agents.app."):
            found.setdefault(step.step_type, step)
    return tuple(found[name] for name in step_types if name in found)


def _queued_message(
    state: StateTransaction, message_id: str
) -> ChannelMessage[AgentUserMessage] | None:
    pending = state.pending_messages(QUEUED_USER_MESSAGES)
    return next((message for message in pending if message.message_id == message_id), None)


def _take_queued(state: StateTransaction, message_id: str) -> AgentUserMessage | None:
    queued = _queued_message(state, message_id)
    if queued is None:
        return None
    if not state.delete_message(QUEUED_USER_MESSAGES, message_id):
        raise ChannelMessageNotFoundError(
            f"queued message {message_id!r} was consumed while the RPC ran; "
            "reload the snapshot and choose again"
        )
    return queued.value


def steer_user_message(runtime: SessionRuntime) -> Rpc[SteerUserMessageRequest, bool]:
    """``steer_user_message``: move a queued message by ``message_id``, or steer with ``text``.

    While no turn is active, ``text`` is queued like ``send_user_message``, unless
    steered messages wait to start the next turn: then it joins them, so one
    sender's steers start turns in the order sent. ``False`` for both or neither,
    blank text, a message no longer queued, or a turn that does not accept steering.
    """

    def handle(context: RpcContext, request: SteerUserMessageRequest) -> RpcResult[bool]:
        if not context.flow_active or (request.message_id is None) == (request.text is None):
            return RpcResult(False)
        state = context.state
        agent_state = state.get(AGENT_STATE)
        turn = None if agent_state is None else agent_state.active_turn_id
        if agent_state is not None and turn is not None and not agent_state.accepts_turn_control:
            return RpcResult(False)
        if request.text is not None:
            message = AgentUserMessage(
                text=request.text, plan_mode=request.plan_mode, images=request.images
            )
            if not accepts_user_message(runtime, message):
                return RpcResult(False)
            # While steered messages wait to start the next turn (the steered turn has
            # ended, theirs has not started), the text joins them: queued, it would start
            # a turn only after theirs, and after a steer sent later. The listed messages,
            # unlike channel_size, include those ApplyTurnControl's wait has taken.
            if turn is None and not state.pending_messages(STEERED_USER_MESSAGES):
                state.publish(QUEUED_USER_MESSAGES, message)
                return RpcResult(True)
        else:
            assert request.message_id is not None
            # A moved message keeps its own plan_mode and images.
            taken = _take_queued(state, request.message_id)
            if taken is None:
                return RpcResult(False)
            message = taken
        state.publish(STEERED_USER_MESSAGES, message)
        state.publish(
            TURN_CONTROL_REQUESTS, TurnControlRequest(kind=TurnControlKind.STEER, turn_id=turn)
        )
        return RpcResult(True)

    return Rpc(
        "steer_user_message",
        SteerUserMessageRequest,
        bool,
        handle,
        is_transactional=True,
        channel_loads=(QUEUED_USER_MESSAGES, STEERED_USER_MESSAGES),
    )


def delete_queued_message(runtime: SessionRuntime) -> Rpc[DeleteQueuedMessageRequest, bool]:
    """``delete_queued_message``: delete a queued message; ``False`` when it is no longer queued."""

    def handle(context: RpcContext, request: DeleteQueuedMessageRequest) -> RpcResult[bool]:
        if not context.flow_active:
            return RpcResult(False)
        return RpcResult(_take_queued(context.state, request.message_id) is not None)

    return Rpc(
        "delete_queued_message",
        DeleteQueuedMessageRequest,
        bool,
        handle,
        is_transactional=True,
        channel_loads=(QUEUED_USER_MESSAGES,),
    )


def cancel_turn(runtime: SessionRuntime) -> Rpc[CancelTurnRequest, bool]:
    """``cancel_turn``: stop the active turn now, with no new turn.

    Records ``TurnCancellationRequest``, cancels the model call, compaction and
    the waiting Steps, and moves to ``FinishTurnCancellation``. ``False`` when no
    turn is active, ``turn_id`` names another turn, or the turn does not accept
    cancellation; a second call for the same turn returns ``True`` and changes
    nothing.
    """

    def handle(context: RpcContext, request: CancelTurnRequest) -> RpcResult[bool]:
        state = context.state
        agent_state = state.get(AGENT_STATE)
        if (
            agent_state is None
            or agent_state.active_turn_id is None
            or agent_state.active_turn_id != request.turn_id
            or not agent_state.accepts_turn_control
        ):
            return RpcResult(False)
        recorded = state.get(TURN_CANCELLATION_REQUEST)
        if recorded is not None and recorded.turn_id == request.turn_id:
            return RpcResult(True)
        state.set(
            TURN_CANCELLATION_REQUEST,
            TurnCancellationRequest(turn_id=request.turn_id, requested_at=context.now),
        )
        finish = StepMovement(turn_control.FinishTurnCancellation, request.turn_id)
        return RpcResult(True, next_steps=(finish,), canceling_steps=canceling_steps())

    return Rpc(
        "cancel_turn",
        CancelTurnRequest,
        bool,
        handle,
        locks=(AttributeLock(TURN_CANCELLATION_REQUEST), AttributeLock(PENDING_INTERRUPTS)),
    )


def execute_plan(runtime: SessionRuntime) -> Rpc[ExecutePlanRequest, bool]:
    """``execute_plan``: approve a plan revision; ``AwaitUserMessage`` starts the executing turn.

    ``True`` only while the session waits for a user message, the plan has this
    revision and is ``draft`` or ``active``, no execution is pending, and nothing
    is queued, steered, or pending.
    """

    def handle(context: RpcContext, request: ExecutePlanRequest) -> RpcResult[bool]:
        state = context.state
        interrupts = state.get(PENDING_INTERRUPTS) or ()
        accepted = accepts_plan_execution(
            revision=request.revision,
            state=state.get(AGENT_STATE),
            plan=state.get(AGENT_PLAN),
            pending_execution=state.get(PENDING_PLAN_EXECUTION),
            queued_message_count=state.channel_size(QUEUED_USER_MESSAGES),
            steered_message_count=state.channel_size(STEERED_USER_MESSAGES),
            pending_interrupt_count=len(interrupts),
        )
        if not accepted:
            return RpcResult(False)
        approval = PlanExecutionRequest(revision=request.revision)
        state.set(PENDING_PLAN_EXECUTION, approval)
        state.publish_to(PLAN_EXECUTIONS, plan_execution_key(request.revision), approval)
        return RpcResult(True)

    return Rpc(
        "execute_plan",
        ExecutePlanRequest,
        bool,
        handle,
        locks=(AttributeLock(PENDING_PLAN_EXECUTION),),
    )


def turn_control_rpcs(runtime: SessionRuntime) -> list[Rpc[Any, Any]]:
    """Every RPC of this module."""
    return [
        steer_user_message(runtime),
        delete_queued_message(runtime),
        cancel_turn(runtime),
        execute_plan(runtime),
    ]
