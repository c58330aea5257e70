"""The ``AgentEvents`` Stream of one session as Server-Sent Event frames, from a resume token.

Opening checks the token with one short read, so a token the engine refuses
raises ``InvalidAgentEventResumeTokenError`` before a response starts; an event
that read returns is the stream's first frame (on Dex, whose waits are whole
seconds, the check waits up to 1 s on an idle Stream). The stream then
long-polls the Stream forever, one frame per event (``agent_event_frame``) and
``KEEP_ALIVE_FRAME`` after each poll that saw none, including the check read.
It never ends by itself: the web framework closes it when the browser leaves.
An async stream stops when its task is cancelled; a blocking one when the
server closes it, which happens at its next frame, so it first finishes its
current long poll, up to ``poll_timeout``. An engine error while it runs ends
the response; the browser's ``EventSource`` then reconnects with the last
``id`` it received.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Generator
from datetime import timedelta
from typing import Any

from dex_agents.app.ui_stream.errors import InvalidAgentEventResumeTokenError
from dex_agents.domain.arguments import require_str
from dex_agents.domain.session_ids import validate_session_id
from dex_agents.domain.ui_stream_frames import KEEP_ALIVE_FRAME, agent_event_frame
from dex_agents.ports.engine import FlowDefinition
from dex_agents.ports.errors import InvalidResumeTokenError, StreamReadTimeoutError
from dex_agents.ports.flow_client import FlowClient, StreamMessage
from dex_agents.ports.sync_flow_client import SyncFlowClient

DEFAULT_AGENT_EVENT_POLL_TIMEOUT = timedelta(seconds=15)
"""How long one long poll of the event stream waits before a keep-alive comment."""

TOKEN_CHECK_TIMEOUT = timedelta(milliseconds=1)
"""How long the read that checks a resume token waits for an event."""


def _check(where: str, session_id: str, resume_token: str, poll_timeout: timedelta) -> None:
    validate_session_id(session_id)
    require_str(where, "resume_token", resume_token)
    if not isinstance(poll_timeout, timedelta):
        raise TypeError(
            f"{where}: poll_timeout must be a timedelta, not {type(poll_timeout).__name__}"
        )
    if poll_timeout <= timedelta(0):
        raise ValueError(f"{where}: poll_timeout must be positive, not {poll_timeout}")


def _refused(session_id: str, error: InvalidResumeTokenError) -> InvalidAgentEventResumeTokenError:
    return InvalidAgentEventResumeTokenError(
        f"the event stream of session {session_id!r} cannot resume from this token: {error}"
    )


def _frame(message: StreamMessage[Any]) -> str:
    return agent_event_frame(message.value, message.resume_token)


async def open_event_frames(
    client: FlowClient,
    flow: FlowDefinition,
    session_id: str,
    *,
    resume_token: str = "",
    poll_timeout: timedelta = DEFAULT_AGENT_EVENT_POLL_TIMEOUT,
) -> AsyncGenerator[str, None]:
    """Check ``resume_token`` with one short read, then return the session's frames after it.

    Raises ``InvalidAgentEventResumeTokenError`` for a token the engine refuses
    and ``InvalidSessionIdError`` for a session ID ``validate_session_id`` refuses.
    """
    _check("stream_agent_event_frames", session_id, resume_token, poll_timeout)
    try:
        first: StreamMessage[Any] | None = await client.read_stream(
            flow, session_id, resume_token, poll_timeout=TOKEN_CHECK_TIMEOUT
        )
    except StreamReadTimeoutError:
        first = None
    except InvalidResumeTokenError as error:
        raise _refused(session_id, error) from error
    return _follow(client, flow, session_id, resume_token, first, poll_timeout)


async def _follow(
    client: FlowClient,
    flow: FlowDefinition,
    session_id: str,
    token: str,
    message: StreamMessage[Any] | None,
    poll_timeout: timedelta,
) -> AsyncGenerator[str, None]:
    while True:
        if message is None:
            yield KEEP_ALIVE_FRAME
        else:
            yield _frame(message)
            token = message.resume_token
        try:
            message = await client.read_stream(flow, session_id, token, poll_timeout=poll_timeout)
        except StreamReadTimeoutError:
            message = None


def open_event_frames_sync(
    client: SyncFlowClient,
    flow: FlowDefinition,
    session_id: str,
    *,
    resume_token: str = "",
    poll_timeout: timedelta = DEFAULT_AGENT_EVENT_POLL_TIMEOUT,
) -> Generator[str, None, None]:
    """``open_event_frames`` over a blocking client: the check read runs now, the rest when iterated."""
    _check("stream_agent_event_frames_sync", session_id, resume_token, poll_timeout)
    try:
        first: StreamMessage[Any] | None = client.read_stream(
            flow, session_id, resume_token, poll_timeout=TOKEN_CHECK_TIMEOUT
        )
    except StreamReadTimeoutError:
        first = None
    except InvalidResumeTokenError as error:
        raise _refused(session_id, error) from error
    return _follow_sync(client, flow, session_id, resume_token, first, poll_timeout)


def _follow_sync(
    client: SyncFlowClient,
    flow: FlowDefinition,
    session_id: str,
    token: str,
    message: StreamMessage[Any] | None,
    poll_timeout: timedelta,
) -> Generator[str, None, None]:
    while True:
        if message is None:
            yield KEEP_ALIVE_FRAME
        else:
            yield _frame(message)
            token = message.resume_token
        try:
            message = client.read_stream(flow, session_id, token, poll_timeout=poll_timeout)
        except StreamReadTimeoutError:
            message = None
