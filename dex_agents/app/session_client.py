"""``AgentSessionClient``: start sessions and call their RPCs through any engine's client."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from dex_agents.app.rpcs import SNAPSHOT_WHEN_NEEDED
from dex_agents.app.session import checked_user_images, user_message_refusal
from dex_agents.app.session_flow import PortableSessionFlow
from dex_agents.app.session_waits import DEFAULT_WAIT_FOR_USER_TIMEOUT, wait_for_person
from dex_agents.domain.arguments import (
    require_bool,
    require_int,
    require_optional_int,
    require_optional_str,
    require_str,
    require_str_mapping,
)
from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.domain.requests import (
    AgentMessagesPage,
    AgentSnapshot,
    AnswerQuestionRequest,
    CancelTurnRequest,
    DeleteQueuedMessageRequest,
    ExecutePlanRequest,
    ListAgentMessagesRequest,
    ResolveInterruptRequest,
    SteerUserMessageRequest,
    UpdateSessionSettingsRequest,
)
from dex_agents.domain.session_ids import validate_session_id
from dex_agents.domain.session_settings import validate_session_settings
from dex_agents.domain.state import AgentSessionStartInput
from dex_agents.ports.errors import FlowAlreadyStartedError, RpcLockConflictError
from dex_agents.ports.flow_client import FlowClient
from dex_agents.ports.flow_rows import FlowStatus

LOCK_CONFLICT_RETRY_TIMEOUT = timedelta(seconds=5)
"""How long ``AgentSessionClient`` retries an RPC that hit ``RpcLockConflictError``."""

_RETRY_DELAY_SECONDS = 0.05

# What every door calls on its client: an object without them is no FlowClient.
_FLOW_CLIENT_CALLS = ("start_flow", "invoke_rpc", "describe_flow", "read_stream")


def _require_session_id(where: str, session_id: object) -> str:
    """``session_id`` as a checked session ID: a ``TypeError`` naming ``where``, or the ID rule's error."""
    return validate_session_id(require_str(where, "session_id", session_id))


class PortableSessionClient:
    """Sessions of one ``PortableSessionFlow`` through an engine's client.

    Every RPC that locks retries ``RpcLockConflictError`` for 5 seconds, so a
    caller only sees it when a Step held the lock that long.

    Every method checks its arguments before it sends anything: one of the wrong
    type raises ``TypeError`` naming the method and the argument (nothing is
    coerced, so ``approved="false"`` approves nothing), and a session ID that
    ``validate_session_id`` refuses raises ``InvalidSessionIdError``.
    """

    def __init__(self, client: FlowClient, flow: PortableSessionFlow) -> None:
        # Both were kept, and the first call failed with an AttributeError naming neither.
        if not isinstance(flow, PortableSessionFlow):
            raise TypeError(
                "AgentSessionClient: flow must be a session Flow (an AgentSessionFlow), "
                f"not {type(flow).__name__}"
            )
        if not all(callable(getattr(client, name, None)) for name in _FLOW_CLIENT_CALLS):
            raise TypeError(
                "AgentSessionClient: client must be a Dex AsyncClient or a FlowClient "
                f"(such as runtime.flow_client), not {type(client).__name__}"
            )
        self._client = client
        self._flow = flow

    @property
    def flow(self) -> PortableSessionFlow:
        """The session Flow type this client serves."""
        return self._flow

    @property
    def flow_client(self) -> FlowClient:
        """The engine's client this session client calls (a ``DexFlowClient`` over Dex)."""
        return self._client

    async def start_session(
        self,
        session_id: str,
        initial_message: str = "",
        *,
        session_settings: Mapping[str, Any] | None = None,
        start_environment: Mapping[str, str] | None = None,
        plan_mode: bool = False,
        images: Sequence[AgentImageReference] = (),
    ) -> str:
        """Start a session; a non-blank ``initial_message`` starts its first turn. Returns the run ID.

        Settings are checked before anything is sent (``validate_session_settings``).
        ``plan_mode=True`` on a Flow with plan mode off, and images for a runner
        that cannot build a message with them, raise ``ValueError`` before
        anything is sent, where ``send_user_message`` returns ``False``: the
        first turn would otherwise fail the session for good, or plan in a
        Flow that has no plan mode. So do images with a blank
        ``initial_message``, which starts no turn and would drop them.
        """
        where = "start_session"
        _require_session_id(where, session_id)
        require_str(where, "initial_message", initial_message)
        if session_settings is not None:
            validate_session_settings(session_settings)
        if start_environment is not None:
            require_str_mapping(where, "start_environment", start_environment)
        require_bool(where, "plan_mode", plan_mode)
        checked_images = checked_user_images(self._flow.runtime, images)
        refusal = user_message_refusal(
            self._flow.runtime, plan_mode=plan_mode, images=checked_images
        )
        if refusal is not None:
            raise ValueError(f"{where}: {refusal}")
        if checked_images and not initial_message.strip():
            # StartAgentSession starts no turn for a blank message, so nothing would keep them.
            raise ValueError(
                f"{where}: images need a non-blank initial_message: a blank one starts "
                "no turn, so the session would start without them"
            )
        start = AgentSessionStartInput(
            initial_message=initial_message,
            session_settings=None if session_settings is None else dict(session_settings),
            start_environment=dict(start_environment or {}),
            plan_mode=plan_mode,
            images=checked_images,
        )
        return await self._client.start_flow(self._flow, session_id, start)

    async def _invoke(self, session_id: str, rpc: str, value: Any) -> Any:
        # Each door checks first, to name itself; this one makes sure a door added
        # later cannot send an unchecked session ID.
        _require_session_id(rpc, session_id)
        return await self._client.invoke_rpc(self._flow, session_id, rpc, value)

    async def _invoke_locking(self, session_id: str, rpc: str, request: Any) -> bool:
        # An RPC that takes a lock a Step may hold: a conflict is retried, not shown.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LOCK_CONFLICT_RETRY_TIMEOUT.total_seconds()
        while True:
            try:
                result: bool = await self._invoke(session_id, rpc, request)
                return result
            except RpcLockConflictError:
                if loop.time() >= deadline:
                    raise
                await asyncio.sleep(_RETRY_DELAY_SECONDS)

    async def send_user_message(
        self,
        session_id: str,
        text: str,
        *,
        plan_mode: bool = False,
        images: Sequence[AgentImageReference] = (),
    ) -> bool:
        """Queue a message for the next turn; ``False`` for blank text or what the session refuses."""
        where = "send_user_message"
        _require_session_id(where, session_id)
        require_str(where, "text", text)
        require_bool(where, "plan_mode", plan_mode)
        message = AgentUserMessage(
            text=text, plan_mode=plan_mode, images=checked_user_images(self._flow.runtime, images)
        )
        result: bool = await self._invoke(session_id, "send_user_message", message)
        return result

    async def steer_user_message(
        self,
        session_id: str,
        *,
        message_id: str | None = None,
        text: str | None = None,
        plan_mode: bool = False,
        images: Sequence[AgentImageReference] = (),
    ) -> bool:
        """Steer the running turn with a queued message (``message_id``) or new ``text``.

        While no turn is active, ``text`` is queued, unless steered messages wait to
        start the next turn: then it joins them. ``False`` for both or neither, blank
        text, a message no longer queued, or a turn that does not accept steering.
        """
        where = "steer_user_message"
        _require_session_id(where, session_id)
        require_optional_str(where, "message_id", message_id)
        require_optional_str(where, "text", text)
        require_bool(where, "plan_mode", plan_mode)
        request = SteerUserMessageRequest(
            message_id=message_id,
            text=text,
            plan_mode=plan_mode,
            images=checked_user_images(self._flow.runtime, images),
        )
        result: bool = await self._invoke(session_id, "steer_user_message", request)
        return result

    async def delete_queued_message(self, session_id: str, message_id: str) -> bool:
        """Delete a queued message; ``False`` when it is no longer queued."""
        _require_session_id("delete_queued_message", session_id)
        require_str("delete_queued_message", "message_id", message_id)
        request = DeleteQueuedMessageRequest(message_id=message_id)
        result: bool = await self._invoke(session_id, "delete_queued_message", request)
        return result

    async def cancel_turn(self, session_id: str, turn_id: str) -> bool:
        """Stop turn ``turn_id`` now, with no new turn; ``False`` when it is not the active turn."""
        _require_session_id("cancel_turn", session_id)
        require_str("cancel_turn", "turn_id", turn_id)
        request = CancelTurnRequest(turn_id=turn_id)
        return await self._invoke_locking(session_id, "cancel_turn", request)

    async def execute_plan(self, session_id: str, revision: int) -> bool:
        """Approve plan ``revision`` for execution; an ``executing`` turn then starts."""
        _require_session_id("execute_plan", session_id)
        require_int("execute_plan", "revision", revision)
        request = ExecutePlanRequest(revision=revision)
        return await self._invoke_locking(session_id, "execute_plan", request)

    async def resolve_interrupt(
        self,
        session_id: str,
        interrupt_id: str,
        approved: bool,
        rejection_message: str | None = None,
    ) -> bool:
        """Approve or reject a pending approval, or decline a question (``approved=False``).

        ``approved`` must be a ``bool``: ``"false"`` or ``0`` raises ``TypeError``
        and resolves nothing.
        """
        where = "resolve_interrupt"
        _require_session_id(where, session_id)
        require_str(where, "interrupt_id", interrupt_id)
        require_bool(where, "approved", approved)
        require_optional_str(where, "rejection_message", rejection_message)
        request = ResolveInterruptRequest(
            interrupt_id=interrupt_id, approved=approved, rejection_message=rejection_message
        )
        return await self._invoke_locking(session_id, "resolve_interrupt", request)

    async def answer_question(self, session_id: str, interrupt_id: str, answer: str) -> bool:
        """Answer a pending question."""
        _require_session_id("answer_question", session_id)
        require_str("answer_question", "interrupt_id", interrupt_id)
        require_str("answer_question", "answer", answer)
        request = AnswerQuestionRequest(interrupt_id=interrupt_id, answer=answer)
        return await self._invoke_locking(session_id, "answer_question", request)

    async def update_session_settings(
        self, session_id: str, session_settings: Mapping[str, Any] | None
    ) -> bool:
        """Replace the settings the next turn copies; ``{}`` clears them, ``None`` returns ``False``."""
        _require_session_id("update_session_settings", session_id)
        if session_settings is not None:
            validate_session_settings(session_settings)
        request = UpdateSessionSettingsRequest(
            session_settings=None if session_settings is None else dict(session_settings)
        )
        result: bool = await self._invoke(session_id, "update_session_settings", request)
        return result

    async def get_agent_snapshot(self, session_id: str) -> AgentSnapshot:
        """The session's state, last 200 messages, interrupts, tool calls, usage, plan and queue."""
        _require_session_id("get_agent_snapshot", session_id)
        snapshot: AgentSnapshot = await self._invoke(session_id, "get_agent_snapshot", None)
        return snapshot

    async def list_agent_messages(
        self,
        session_id: str,
        *,
        before_sequence: int | None = None,
        after_sequence: int | None = None,
        limit: int = 100,
    ) -> AgentMessagesPage:
        """A page of stored messages, oldest first; ``limit`` is clamped to 1..200."""
        where = "list_agent_messages"
        _require_session_id(where, session_id)
        require_optional_int(where, "before_sequence", before_sequence)
        require_optional_int(where, "after_sequence", after_sequence)
        require_int(where, "limit", limit)
        request = ListAgentMessagesRequest(
            before_sequence=before_sequence, after_sequence=after_sequence, limit=limit
        )
        page: AgentMessagesPage = await self._invoke(session_id, "list_agent_messages", request)
        return page

    async def open_session(
        self,
        session_id: str,
        *,
        session_settings: Mapping[str, Any] | None = None,
        start_environment: Mapping[str, str] | None = None,
        plan_mode: bool = False,
    ) -> bool:
        """Start the session, or resume it when it exists already: ``True`` when it started now.

        A restarted program calls this instead of ``start_session``, which raises
        ``FlowAlreadyStartedError`` for an ID that was started before. The settings
        and environment apply only to a session started now; send the first message
        with ``send_user_message``. ``plan_mode`` belongs to a message, and this call
        sends none: ``plan_mode=True`` only checks that the Flow has plan mode on
        (``ValueError`` when it is off), so send the message that should plan with
        ``send_user_message(..., plan_mode=True)``. A program that must send a first
        message once calls ``start_session(id, text)`` instead and resumes on
        ``FlowAlreadyStartedError``: the session and its message commit together, where
        a kill between this call and ``send_user_message`` leaves a session with none.
        """
        where = "open_session"
        _require_session_id(where, session_id)
        # Checked here too, so a mistake names the door the caller used, not start_session.
        if start_environment is not None:
            require_str_mapping(where, "start_environment", start_environment)
        require_bool(where, "plan_mode", plan_mode)
        try:
            await self.start_session(
                session_id,
                session_settings=session_settings,
                start_environment=start_environment,
                plan_mode=plan_mode,
            )
        except FlowAlreadyStartedError:
            return False
        return True

    async def wait_for_user(
        self,
        session_id: str,
        *,
        # A deadline of the wait itself: it raises SessionWaitTimeoutError, not CancelledError.
        timeout: timedelta = DEFAULT_WAIT_FOR_USER_TIMEOUT,  # noqa: ASYNC109
    ) -> AgentSnapshot:
        """Wait until the session next needs a person, and return that snapshot.

        That is when an approval or a question is pending, or when the session is
        idle: its turn ended, failed or was cancelled, and nothing is queued
        (``dex_agents.domain.attention.session_attention`` says which). It
        follows the ``AgentEvents`` Stream rather than polling, with the
        snapshot as the source of truth, and raises ``SessionWaitTimeoutError``
        after ``timeout`` (5 minutes by default), or ``FlowNotActiveError`` once
        the session failed or was stopped while it needed no person (a failed one's
        says why, as ``FlowInfo.failure_reason`` does). Right after
        ``send_user_message`` returned ``True`` it waits for that message's turn:
        an accepted message is queued until it is stored; likewise after
        ``execute_plan``, for the executing turn.
        """
        _require_session_id("wait_for_user", session_id)
        if not isinstance(timeout, timedelta):
            raise TypeError(
                f"wait_for_user: timeout must be a timedelta, not {type(timeout).__name__}"
            )
        read_view = getattr(self._client, "read_view", None)
        read_snapshot: Callable[[], Awaitable[AgentSnapshot]]
        if read_view is None:
            read_snapshot = functools.partial(self.get_agent_snapshot, session_id)
        else:  # the embedded engine: a busy session's reads leave its messages alone
            read_snapshot = functools.partial(
                read_view, self._flow, session_id, SNAPSHOT_WHEN_NEEDED
            )
        client = self._client

        async def closed_status() -> str | None:
            info = await client.describe_flow(session_id)
            if info.status == FlowStatus.RUNNING:
                return None
            if info.status == FlowStatus.FAILED and info.failure_reason:
                # As a message sent to it is refused: why it failed.
                return f"{info.status}: {info.failure_reason}"
            return f"{info.status}: it will not need a person"

        return await wait_for_person(
            self._client,
            self._flow,
            session_id,
            read_snapshot,
            timeout,
            closed_status,
        )
