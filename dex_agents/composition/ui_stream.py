"""The browser stream helpers of ``dex_agents.ui_stream``, over whatever client an application holds.

The async helpers take a Dex ``AsyncClient`` (with the ``AgentSessionFlow``
registered in its Registry), a ``FlowClient`` (the embedded engine's
``runtime.flow_client``, or a ``DexFlowClient``) or an ``AgentSessionClient``;
the ``_sync`` helpers a Dex ``dex.Client`` or a ``SyncFlowClient`` (the
embedded engine's ``open_sync_flow_client(runtime)``). Each picks the engine's
Stream listing for the snapshot's resume token. Dex clients read the Stream
through ``DexFlowClient``, whose waits are whole seconds as Dex takes them.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Generator
from datetime import timedelta

import dex

from dex_agents.adapters.dex.flow import DexFlow
from dex_agents.adapters.dex.flow_client import DexFlowClient
from dex_agents.adapters.dex.stream_reads import (
    DexStreamListingClient,
    DexStreamPageReader,
)
from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.stream_pages import LocalStreamPageReader
from dex_agents.app.session_client import PortableSessionClient
from dex_agents.app.session_flow import PortableSessionFlow
from dex_agents.app.ui_stream.frames import (
    DEFAULT_AGENT_EVENT_POLL_TIMEOUT,
    open_event_frames,
    open_event_frames_sync,
)
from dex_agents.app.ui_stream.snapshot import (
    read_event_stream_snapshot,
    read_event_stream_snapshot_sync,
)
from dex_agents.composition.sync_session_client import SyncStreamClient, as_sync_flow_client
from dex_agents.domain.ui_stream_snapshot import AgentEventStreamSnapshot
from dex_agents.ports.engine import FlowDefinition
from dex_agents.ports.flow_client import FlowClient
from dex_agents.ports.stream_pages import StreamPageReader

AsyncStreamClient = dex.AsyncClient | FlowClient | PortableSessionClient
"""What the async browser stream helpers take as ``client``."""


def _require_session_flow(where: str, flow: object) -> None:
    # A type name was read as a Flow and failed with "'str' object has no attribute 'flow_type'".
    if not isinstance(flow, PortableSessionFlow):
        raise TypeError(
            f"{where}: flow must be a session Flow (an AgentSessionFlow), "
            f"not {type(flow).__name__} ({flow!r:.40})"
        )


def _flow_client(client: AsyncStreamClient, flow: FlowDefinition) -> FlowClient:
    if isinstance(client, PortableSessionClient):
        client = client.flow_client
    if isinstance(client, dex.AsyncClient):
        if not isinstance(flow, DexFlow):
            raise TypeError(
                "a Dex AsyncClient needs the AgentSessionFlow registered in its Registry, "
                f"not a {type(flow).__name__}"
            )
        return DexFlowClient(client)
    # Typed as an async client, but a developer may pass a sync one.
    candidate: object = client
    read_stream = getattr(candidate, "read_stream", None)
    if isinstance(candidate, dex.Client) or (
        read_stream is not None and not inspect.iscoroutinefunction(read_stream)
    ):
        raise TypeError(
            f"a {type(candidate).__name__} is synchronous: pass it to "
            "read_agent_event_stream_snapshot_sync or stream_agent_event_frames_sync"
        )
    return client


def _page_reader(client: FlowClient) -> StreamPageReader:
    if isinstance(client, LocalFlowClient):
        return LocalStreamPageReader(client.engine)
    if isinstance(client, DexFlowClient):
        dex_client = client.client
        if isinstance(dex_client, DexStreamListingClient):
            return DexStreamPageReader(dex_client)
    if isinstance(client, StreamPageReader):
        return client
    raise TypeError(
        f"the browser snapshot needs to list the Stream newest first, which a "
        f"{type(client).__name__} cannot: pass a Dex AsyncClient, the embedded engine's "
        "flow_client, or a FlowClient that is also a StreamPageReader"
    )


async def read_agent_event_stream_snapshot(
    client: AsyncStreamClient, flow: FlowDefinition, session_id: str
) -> AgentEventStreamSnapshot:
    """The ``get_agent_snapshot`` result for a browser, plus the resume token to open the events from.

    Serve its ``to_json()``: ``{"snapshot": ..., "resume_token": ...}``. The
    snapshot leaves out ``framework_item`` on messages and, on tool calls,
    ``tool_source_reference``, ``trace_context``, ``input_continuation``,
    ``input_answers``, ``task_answer_pending`` and ``runner_tool_state``; it keeps
    ``session_settings`` as stored, and writes a lone surrogate in text a tool
    gave (a file name that is not UTF-8) as U+FFFD, so any framework's JSON
    response can encode it. While a turn is active the token replays that
    turn's events, from its first retained one (``turn_started``, or the plan
    events of an ``executing`` turn); otherwise it follows the newest event.
    Authorize the caller for ``session_id`` first.
    """
    _require_session_flow("read_agent_event_stream_snapshot", flow)
    flow_client = _flow_client(client, flow)
    pages = _page_reader(flow_client)
    return await read_event_stream_snapshot(flow_client, pages, flow, session_id)


async def stream_agent_event_frames(
    client: AsyncStreamClient,
    flow: FlowDefinition,
    session_id: str,
    *,
    resume_token: str = "",
    poll_timeout: timedelta = DEFAULT_AGENT_EVENT_POLL_TIMEOUT,
) -> AsyncGenerator[str, None]:
    """Check ``resume_token`` with one short read, then return the session's SSE frames after it.

    Each frame's ``id`` is the event's resume token and its ``data`` the
    ``AgentEvent`` wire JSON with ``payload`` as JSON text; ``KEEP_ALIVE_FRAME``
    follows each empty long poll of up to ``poll_timeout`` (15 s). A token the
    engine refuses, such as one of another session, raises
    ``InvalidAgentEventResumeTokenError`` here, before the response starts:
    answer 400. Pass a reconnecting browser's ``Last-Event-ID`` as
    ``resume_token``. The generator never ends by itself.
    """
    _require_session_flow("stream_agent_event_frames", flow)
    flow_client = _flow_client(client, flow)
    return await open_event_frames(
        flow_client, flow, session_id, resume_token=resume_token, poll_timeout=poll_timeout
    )


def read_agent_event_stream_snapshot_sync(
    client: SyncStreamClient, flow: FlowDefinition, session_id: str
) -> AgentEventStreamSnapshot:
    """``read_agent_event_stream_snapshot`` with a synchronous client, for WSGI servers."""
    _require_session_flow("read_agent_event_stream_snapshot_sync", flow)
    return read_event_stream_snapshot_sync(as_sync_flow_client(client), flow, session_id)


def stream_agent_event_frames_sync(
    client: SyncStreamClient,
    flow: FlowDefinition,
    session_id: str,
    *,
    resume_token: str = "",
    poll_timeout: timedelta = DEFAULT_AGENT_EVENT_POLL_TIMEOUT,
) -> Generator[str, None, None]:
    """``stream_agent_event_frames`` with a synchronous client, for WSGI servers.

    The token is checked now; the frames are read as the server iterates them.
    Each open stream holds one server thread, and after the browser leaves the
    thread finishes its current long poll, up to ``poll_timeout``, before the
    server closes the generator.
    """
    _require_session_flow("stream_agent_event_frames_sync", flow)
    return open_event_frames_sync(
        as_sync_flow_client(client),
        flow,
        session_id,
        resume_token=resume_token,
        poll_timeout=poll_timeout,
    )
