"""The session's RPCs: each reads and writes state in one transaction.

RPCs cannot write Stream events; the Step that consumes what an RPC published
writes them (``interrupt_resolved`` is written by the waiting Step, for example).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from dex_agents.app.message_store import CHUNKS_LOAD, WINDOW_LOAD, all_messages
from dex_agents.app.session import SessionRuntime, accepts_user_message, turn_records
from dex_agents.domain.attention import session_attention, with_cancelled_turn
from dex_agents.domain.builtin_tools import is_allowed_answer
from dex_agents.domain.interrupts import (
    AgentInterrupt,
    AgentInterruptResolution,
    InterruptKind,
    answerable_interrupts,
    without_interrupt,
)
from dex_agents.domain.messages import AgentUserMessage, QueuedUserMessage
from dex_agents.domain.paging import (
    deleted_before_sequence,
    page_agent_messages,
    snapshot_floor,
    snapshot_messages,
)
from dex_agents.domain.plans import PlanExecutionRequest, is_current_plan_approval
from dex_agents.domain.requests import (
    AgentMessagesPage,
    AgentSnapshot,
    AnswerQuestionRequest,
    ListAgentMessagesRequest,
    ResolveInterruptRequest,
    UpdateSessionSettingsRequest,
)
from dex_agents.domain.session_settings import accepts_session_settings_update
from dex_agents.domain.usage import AgentUsage
from dex_agents.ports.engine import AttributeLock, MapLoad, Rpc, RpcResult
from dex_agents.ports.persistence import StateReader
from dex_agents.ports.session_schema import (
    AGENT_MESSAGE_INDEX,
    AGENT_PLAN,
    AGENT_STATE,
    AGENT_TOOL_CALLS,
    AGENT_USAGE,
    CONTEXT_SUMMARY,
    INTERRUPT_RESOLUTIONS,
    PENDING_INTERRUPTS,
    PENDING_PLAN_EXECUTION,
    QUEUED_USER_MESSAGES,
    SESSION_SETTINGS,
    STEERED_USER_MESSAGES,
    TURN_CANCELLATION_REQUEST,
)
from dex_agents.ports.step_contexts import RpcContext


def _queued(context: RpcContext, channel: Any) -> tuple[QueuedUserMessage, ...]:
    return tuple(
        QueuedUserMessage(
            message_id=message.message_id,
            text=message.value.text,
            plan_mode=message.value.plan_mode,
            images=message.value.images,
        )
        for message in context.state.pending_messages(channel)
    )


def send_user_message(runtime: SessionRuntime) -> Rpc[AgentUserMessage, bool]:
    """``send_user_message``: queue a message for the next turn."""

    def handle(context: RpcContext, message: AgentUserMessage) -> RpcResult[bool]:
        if not context.flow_active or not accepts_user_message(runtime, message):
            return RpcResult(False)
        context.state.publish(QUEUED_USER_MESSAGES, message)
        return RpcResult(True)

    return Rpc("send_user_message", AgentUserMessage, bool, handle, is_transactional=True)


def _answerable(context: RpcContext) -> tuple[AgentInterrupt, ...]:
    """``PendingInterrupts`` without those of a turn that ``cancel_turn`` already cancelled
    or past their deadline (nobody would consume their answer)."""
    state = context.state
    cancellation = state.get(TURN_CANCELLATION_REQUEST)
    cancelled_turn_id = None if cancellation is None else cancellation.turn_id
    pending: tuple[AgentInterrupt, ...] = state.get(PENDING_INTERRUPTS) or ()
    return answerable_interrupts(pending, cancelled_turn_id, now=context.now)


def _pending_interrupt(context: RpcContext, interrupt_id: str) -> AgentInterrupt | None:
    """A pending interrupt an answer may still reach: answerable, so not past its deadline."""
    return next((item for item in _answerable(context) if item.interrupt_id == interrupt_id), None)


def _remove_and_publish(
    context: RpcContext, interrupt: AgentInterrupt, resolution: AgentInterruptResolution
) -> None:
    state = context.state
    pending = state.get(PENDING_INTERRUPTS) or ()
    state.set(PENDING_INTERRUPTS, without_interrupt(pending, interrupt.interrupt_id))
    state.publish_to(INTERRUPT_RESOLUTIONS, interrupt.interrupt_id, resolution)


def resolve_interrupt(runtime: SessionRuntime) -> Rpc[ResolveInterruptRequest, bool]:
    """``resolve_interrupt``: approve or reject an approval, or decline a question."""

    def handle(context: RpcContext, request: ResolveInterruptRequest) -> RpcResult[bool]:
        interrupt = _pending_interrupt(context, request.interrupt_id)
        if interrupt is None or (interrupt.kind is InterruptKind.QUESTION and request.approved):
            return RpcResult(False)
        resolution = AgentInterruptResolution(
            interrupt_id=interrupt.interrupt_id,
            approved=request.approved,
            # resolve_interrupt drops rejection_message on approval.
            rejection_message=None if request.approved else request.rejection_message,
        )
        _remove_and_publish(context, interrupt, resolution)
        return RpcResult(True)

    return Rpc(
        "resolve_interrupt",
        ResolveInterruptRequest,
        bool,
        handle,
        locks=(AttributeLock(PENDING_INTERRUPTS),),
    )


def answer_question(runtime: SessionRuntime) -> Rpc[AnswerQuestionRequest, bool]:
    """``answer_question``: answer a pending question."""

    def handle(context: RpcContext, request: AnswerQuestionRequest) -> RpcResult[bool]:
        interrupt = _pending_interrupt(context, request.interrupt_id)
        if interrupt is None or interrupt.kind is not InterruptKind.QUESTION:
            return RpcResult(False)
        if not is_allowed_answer(
            request.answer, choices=interrupt.choices, allows_free_text=interrupt.allows_free_text
        ):
            return RpcResult(False)
        resolution = AgentInterruptResolution(
            interrupt_id=interrupt.interrupt_id, approved=True, answer=request.answer
        )
        _remove_and_publish(context, interrupt, resolution)
        return RpcResult(True)

    return Rpc(
        "answer_question",
        AnswerQuestionRequest,
        bool,
        handle,
        locks=(AttributeLock(PENDING_INTERRUPTS),),
    )


def update_session_settings(runtime: SessionRuntime) -> Rpc[UpdateSessionSettingsRequest, bool]:
    """``update_session_settings``: replace the settings the next turn copies; ``{}`` clears them."""

    def handle(context: RpcContext, request: UpdateSessionSettingsRequest) -> RpcResult[bool]:
        settings = request.session_settings
        if context.state.get(AGENT_STATE) is None or not accepts_session_settings_update(settings):
            return RpcResult(False)
        assert settings is not None
        context.state.set(SESSION_SETTINGS, dict(settings))
        return RpcResult(True)

    return Rpc(
        "update_session_settings",
        UpdateSessionSettingsRequest,
        bool,
        handle,
        is_transactional=True,
    )


_SNAPSHOT_LOADS = (WINDOW_LOAD, CHUNKS_LOAD, MapLoad(AGENT_TOOL_CALLS))
_SNAPSHOT_CHANNEL_LOADS = (QUEUED_USER_MESSAGES, STEERED_USER_MESSAGES)


def _attention_snapshot(context: RpcContext, _: None) -> RpcResult[AgentSnapshot]:
    state = context.state
    agent_state = state.get(AGENT_STATE)
    queued = _queued(context, QUEUED_USER_MESSAGES)
    steered = _queued(context, STEERED_USER_MESSAGES)
    if agent_state is None:
        # Messages sent before StartAgentSession commits already wait in the Channels;
        # a snapshot without them said 0 queued and gave no ID to delete one by.
        return RpcResult(
            AgentSnapshot(
                state=None,
                queued_message_count=len(queued),
                queued_messages=queued,
                steered_messages=steered,
            )
        )
    return RpcResult(
        AgentSnapshot(
            # A turn cancelled before AgentState kept cancelled_turn_id read as ended.
            state=with_cancelled_turn(agent_state, state.get(TURN_CANCELLATION_REQUEST)),
            # A cancelled turn's interrupts stay listed until FinishTurnCancellation runs,
            # and an expired one until its Timer does, but no answer reaches them: a snapshot that showed them would send
            # wait_for_user, a listing or a UI to a person for nothing.
            pending_interrupts=_answerable(context),
            queued_message_count=len(queued),
            queued_messages=queued,
            steered_messages=steered,
            pending_plan_execution=_pending_plan_execution(state),
        )
    )


def _pending_plan_execution(state: StateReader) -> PlanExecutionRequest | None:
    """The accepted plan approval that ``AwaitUserMessage`` will start a turn with, if any.

    Until it does, the session waits for a user message with nothing queued, so a
    snapshot without it read as idle: ``wait_for_user`` right after ``execute_plan``
    returned the draft plan at once. A stale approval (its revision replaced) never
    runs, so it is left out.
    """
    pending = state.get(PENDING_PLAN_EXECUTION)
    if pending is None or not is_current_plan_approval(state.get(AGENT_PLAN), pending):
        return None
    return pending


ATTENTION_SNAPSHOT: Rpc[None, AgentSnapshot] = Rpc(
    "attention_snapshot",
    type(None),
    AgentSnapshot,
    _attention_snapshot,
    channel_loads=_SNAPSHOT_CHANNEL_LOADS,
)
"""The part of ``get_agent_snapshot`` that says whether a session needs a person.

Its ``AgentSnapshot`` has the state, the pending interrupts and the queued and
steered messages that ``session_attention`` and a listing's status read, and
leaves out the messages, tool call records, usage, plan, settings and summary,
so it reads none of the session's message chunks. It is no RPC of the session
Flow (Dex never registers it): the embedded engine's listings, the console's
inbox and ``dex-agents sessions``, run it read-only on many sessions at once.
"""


def _full_snapshot(context: RpcContext, attention: AgentSnapshot) -> AgentSnapshot:
    """``get_agent_snapshot``'s answer: ``attention`` with the rest of the snapshot read."""
    agent_state = attention.state
    if agent_state is None:
        return attention
    state = context.state
    records = sorted(turn_records(state).values(), key=lambda record: record.deferral_order)
    settings: Mapping[str, Any] = state.get(SESSION_SETTINGS) or {}
    return attrs.evolve(
        attention,
        messages=snapshot_messages(
            all_messages(
                state,
                after_sequence=snapshot_floor(agent_state.last_sequence),
                keep_chunks=False,
            )
        ),
        tool_calls=tuple(records),
        usage=state.get(AGENT_USAGE) or AgentUsage(),
        plan=state.get(AGENT_PLAN),
        session_settings=dict(settings),
        context_summary=state.get(CONTEXT_SUMMARY),
        deleted_before_sequence=deleted_before_sequence(state.get(AGENT_MESSAGE_INDEX)),
    )


def get_agent_snapshot(runtime: SessionRuntime) -> Rpc[None, AgentSnapshot]:
    """``get_agent_snapshot``: state, the last 200 messages, interrupts, the turn's calls, and more."""

    def handle(context: RpcContext, _: None) -> RpcResult[AgentSnapshot]:
        return RpcResult(_full_snapshot(context, _attention_snapshot(context, None).output))

    return Rpc(
        "get_agent_snapshot",
        type(None),
        AgentSnapshot,
        handle,
        loads=_SNAPSHOT_LOADS,
        channel_loads=_SNAPSHOT_CHANNEL_LOADS,
    )


def _snapshot_when_needed(context: RpcContext, _: None) -> RpcResult[AgentSnapshot]:
    attention = _attention_snapshot(context, None).output
    if session_attention(attention) is None:
        return RpcResult(attention)
    return RpcResult(_full_snapshot(context, attention))


SNAPSHOT_WHEN_NEEDED: Rpc[None, AgentSnapshot] = Rpc(
    "snapshot_when_needed",
    type(None),
    AgentSnapshot,
    _snapshot_when_needed,
    loads=_SNAPSHOT_LOADS,
    channel_loads=_SNAPSHOT_CHANNEL_LOADS,
)
"""``get_agent_snapshot`` while the session needs a person, else ``ATTENTION_SNAPSHOT``.

What ``wait_for_user`` reads on the embedded engine: most of its reads find the
session busy (the first, right after ``send_user_message``, always does), and
``session_attention`` then says so from the attention part alone, so they read
none of the session's messages. A session that needs a person gets the whole
snapshot, read in the same transaction. Like ``ATTENTION_SNAPSHOT`` it is no RPC
of the session Flow: Dex never registers it, and ``wait_for_user`` on Dex reads
``get_agent_snapshot`` each time.
"""


def list_agent_messages(
    runtime: SessionRuntime,
) -> Rpc[ListAgentMessagesRequest, AgentMessagesPage]:
    """``list_agent_messages``: a page of stored messages, oldest first."""

    def handle(
        context: RpcContext, request: ListAgentMessagesRequest
    ) -> RpcResult[AgentMessagesPage]:
        state = context.state
        page = page_agent_messages(request, all_messages(state), state.get(AGENT_MESSAGE_INDEX))
        return RpcResult(page)

    return Rpc(
        "list_agent_messages",
        ListAgentMessagesRequest,
        AgentMessagesPage,
        handle,
        loads=(WINDOW_LOAD, CHUNKS_LOAD),
    )


def core_rpcs(runtime: SessionRuntime) -> list[Rpc[Any, Any]]:
    """Every RPC of this module."""
    return [
        send_user_message(runtime),
        resolve_interrupt(runtime),
        answer_question(runtime),
        update_session_settings(runtime),
        get_agent_snapshot(runtime),
        list_agent_messages(runtime),
    ]
