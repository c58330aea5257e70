"""``get_agent_snapshot`` with the resume token a browser opens the event stream from.

The token comes from the Stream: with no active turn, the newest event's,
read *before* the snapshot, so an event committed meanwhile is replayed rather
than missed; with an active turn, the token before the turn's first retained
event, found after the snapshot by walking the Stream newest first
(``dex_agents.domain.ui_stream_replay``). The active turn's first event commits
with the state that makes it active, so the walk after the snapshot finds it
unless the Stream trimmed it; a later turn's events, should the turn end
meanwhile, are passed by up to the newest event read before the snapshot.
"""

from __future__ import annotations

from typing import Any

from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.session_ids import validate_session_id
from dex_agents.domain.ui_stream_replay import ReplaySearch, advance_replay_search
from dex_agents.domain.ui_stream_snapshot import AgentEventStreamSnapshot
from dex_agents.ports.engine import FlowDefinition
from dex_agents.ports.flow_client import FlowClient, StreamMessage
from dex_agents.ports.stream_pages import StreamMessagesPage, StreamPageReader
from dex_agents.ports.sync_flow_client import SyncFlowClient

REPLAY_SEARCH_PAGE_SIZE = 100
"""How many events one page of the newest-first walk asks for."""

_GET_AGENT_SNAPSHOT = "get_agent_snapshot"


def _active_turn(snapshot: AgentSnapshot) -> str | None:
    return None if snapshot.state is None else snapshot.state.active_turn_id


def _page_size(search: ReplaySearch) -> int:
    # Without an active turn the walk stops at the newest event.
    return 1 if search.turn_id is None else REPLAY_SEARCH_PAGE_SIZE


def _advance(search: ReplaySearch, messages: list[StreamMessage[Any]]) -> ReplaySearch:
    for message in messages:
        event = message.value
        search = advance_replay_search(
            search,
            event_type=getattr(event, "type", ""),
            event_turn_id=getattr(event, "turn_id", None),
            resume_token=message.resume_token,
        )
        if search.done:
            break
    return search


def _next_page(search: ReplaySearch, page: StreamMessagesPage[Any]) -> tuple[ReplaySearch, str]:
    """The search after a page, and the token of the page to read next (``""``: stop)."""
    search = _advance(search, list(page.messages))
    return search, "" if search.done else page.next_page_token


async def find_replay_start(
    pages: StreamPageReader,
    flow: FlowDefinition,
    session_id: str,
    turn_id: str | None,
    snapshot_token: str | None = None,
) -> str:
    """The token to open the event stream from, for active turn ``turn_id`` (``None``: none).

    ``snapshot_token`` is the token after the newest event read before the
    snapshot that showed ``turn_id`` (``ReplaySearch.snapshot_token``).
    """
    search = ReplaySearch(turn_id=turn_id, snapshot_token=snapshot_token)
    page_token = ""
    while True:
        page = await pages.list_stream_messages(flow, session_id, _page_size(search), page_token)
        search, page_token = _next_page(search, page)
        if not page_token:
            return search.resume_token


def find_replay_start_sync(
    client: SyncFlowClient,
    flow: FlowDefinition,
    session_id: str,
    turn_id: str | None,
    snapshot_token: str | None = None,
) -> str:
    """``find_replay_start`` over a blocking client."""
    search = ReplaySearch(turn_id=turn_id, snapshot_token=snapshot_token)
    page_token = ""
    while True:
        page = client.list_stream_messages(flow, session_id, _page_size(search), page_token)
        search, page_token = _next_page(search, page)
        if not page_token:
            return search.resume_token


async def read_event_stream_snapshot(
    client: FlowClient, pages: StreamPageReader, flow: FlowDefinition, session_id: str
) -> AgentEventStreamSnapshot:
    """The browser snapshot of a session and the token to open its event stream from.

    Raises ``InvalidSessionIdError`` before it reads anything for an ID that
    ``validate_session_id`` refuses, and the engine's errors (``FlowNotFoundError``).
    """
    validate_session_id(session_id)
    newest = await find_replay_start(pages, flow, session_id, None)
    snapshot: AgentSnapshot = await client.invoke_rpc(flow, session_id, _GET_AGENT_SNAPSHOT, None)
    turn = _active_turn(snapshot)
    token = (
        newest
        if turn is None
        else await find_replay_start(pages, flow, session_id, turn, snapshot_token=newest)
    )
    return AgentEventStreamSnapshot.of(snapshot, token)


def read_event_stream_snapshot_sync(
    client: SyncFlowClient, flow: FlowDefinition, session_id: str
) -> AgentEventStreamSnapshot:
    """``read_event_stream_snapshot`` over a blocking client."""
    validate_session_id(session_id)
    newest = find_replay_start_sync(client, flow, session_id, None)
    snapshot: AgentSnapshot = client.invoke_rpc(flow, session_id, _GET_AGENT_SNAPSHOT, None)
    turn = _active_turn(snapshot)
    token = (
        newest
        if turn is None
        else find_replay_start_sync(client, flow, session_id, turn, snapshot_token=newest)
    )
    return AgentEventStreamSnapshot.of(snapshot, token)
