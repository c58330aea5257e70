"""The embedded engine's Stream listed newest first: ``StreamPageReader`` over its store.

The store reads a session's events forward from an ID (``events_after``, an
indexed range), so a page of the newest events below an ID is found by probing
back: a window of IDs below it, doubled until it holds a page and one more
event or reaches the first ID. Event IDs are shared by every session of the
store, so a window spans other sessions' IDs too; each probe reads at most as
many of this session's events as its window has IDs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dex_agents.adapters.local.codec import decode_resume_token, encode_resume_token
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.registry import RegisteredFlow
from dex_agents.adapters.local.stream_owners import require_flow_type
from dex_agents.adapters.local.undecodable_events import SKIPPED, decode_or_skip
from dex_agents.domain.wire import from_json
from dex_agents.ports.engine import FlowDefinition
from dex_agents.ports.errors import FlowDefinitionError, FlowNotFoundError, InvalidResumeTokenError
from dex_agents.ports.flow_client import StreamMessage
from dex_agents.ports.flow_rows import EventRow
from dex_agents.ports.flow_store import StoreTransaction
from dex_agents.ports.persistence import StreamDef
from dex_agents.ports.stream_pages import StreamMessagesPage

_MIN_PROBE_SPAN = 64
_PAGE_TOKEN_PREFIX = "page."


def newest_events_before(
    tx: StoreTransaction, flow_id: str, before_id: int, count: int
) -> tuple[list[EventRow], bool]:
    """Up to ``count`` of a session's retained events with IDs below ``before_id``, newest first.

    The flag says whether older retained events remain.
    """
    want = count + 1
    span = max(4 * want, _MIN_PROBE_SPAN)
    while True:
        after = max(before_id - 1 - span, 0)
        # IDs are unique, so the window (after, before_id) holds at most this many events.
        window = max(before_id - 1 - after, 0)
        rows = [row for row in tx.events_after(flow_id, after, window) if row.id < before_id]
        if len(rows) >= want or after == 0:
            newest = rows[-want:][::-1]
            return newest[:count], len(newest) > count
        span *= 2


def _page_token(flow_id: str, before_id: int) -> str:
    return _PAGE_TOKEN_PREFIX + encode_resume_token(flow_id, before_id)


def _before_id(flow_id: str, page_token: str) -> int | None:
    if page_token == "":
        return None
    if not page_token.startswith(_PAGE_TOKEN_PREFIX):
        raise InvalidResumeTokenError(f"not a Stream page token: {page_token!r}")
    before = decode_resume_token(flow_id, page_token.removeprefix(_PAGE_TOKEN_PREFIX))
    if before <= 0:
        raise InvalidResumeTokenError(f"not a Stream page token: {page_token!r}")
    return before


def read_event_page(
    tx: StoreTransaction,
    flow_id: str,
    page_size: int,
    before_page_token: str,
    flow_type: str | None = None,
) -> tuple[list[EventRow], str]:
    """A page of a session's events, newest first, and the token of the older page (``""``: none).

    With ``flow_type``, a run of another type is not found (``stream_owners``).
    """
    if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size <= 0:
        raise ValueError(f"page_size must be a positive int, not {page_size!r}")
    before = _before_id(flow_id, before_page_token)
    if flow_type is not None:
        require_flow_type(tx, flow_type, flow_id)
    elif tx.get_flow(flow_id) is None:
        raise FlowNotFoundError(f"no session with ID {flow_id!r}")
    if before is None:
        before = tx.last_event_id(flow_id) + 1
    rows, older = newest_events_before(tx, flow_id, before, page_size)
    return rows, _page_token(flow_id, rows[-1].id) if older and rows else ""


def event_stream(registered: RegisteredFlow) -> StreamDef[Any]:
    """The Flow type's Stream; ``FlowDefinitionError`` when it declares none."""
    stream = registered.flow.stream
    if stream is None:
        raise FlowDefinitionError(f"Flow type {registered.flow.flow_type} has no Stream")
    return stream


def event_message(flow_id: str, row: EventRow, value: Any) -> StreamMessage[Any]:
    """The stored event ``row`` of session ``flow_id``, decoded to ``value``, as the port's message.

    Its resume token reads on after it (``encode_resume_token``).
    """
    return StreamMessage(
        value=value,
        resume_token=encode_resume_token(flow_id, row.id),
        created_at=row.created_at,
        source=row.source,
    )


def decode_event_page(
    stream: StreamDef[Any], flow_id: str, rows: Sequence[EventRow], next_page_token: str
) -> StreamMessagesPage[Any]:
    """Store rows as a page of Stream messages, each value decoded as the Stream's type;
    a row that no longer decodes is left out (``undecodable_events``)."""
    messages = []
    for row in rows:
        value = decode_or_skip(row, lambda text: from_json(text, stream.value_type))
        if value is not SKIPPED:
            messages.append(event_message(flow_id, row, value))
    return StreamMessagesPage(messages=messages, next_page_token=next_page_token)


class LocalStreamPageReader:
    """A ``StreamPageReader`` of the embedded engine; share the engine of a ``LocalFlowClient``."""

    def __init__(self, engine: LocalEngine) -> None:
        self._engine = engine

    async def list_stream_messages(
        self, flow: FlowDefinition, flow_id: str, page_size: int, before_page_token: str = ""
    ) -> StreamMessagesPage[Any]:
        """One page of the session's retained events, newest first; never waits."""
        stream = event_stream(self._engine.registered(flow))
        rows, next_token = await self._engine.read(
            lambda tx: read_event_page(tx, flow_id, page_size, before_page_token, flow.flow_type)
        )
        return decode_event_page(stream, flow_id, rows, next_token)
