"""How the embedded engine's client reads a session's Stream: long polls and the tail.

``read_stream`` returns the next event after a resume token, waiting up to its
poll timeout; the tail (``stream_tail_token``, ``stream_tail_marked``) is where a
reader that needs only what happens from now on starts. Both are served, where
they can be, without a read: from the events read ahead (``EventReadAhead``),
from those this process's store committed (``CommittedEvents``), and from the
change log, which says when a run got no events and a read would find none.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from dex_agents.adapters.local.codec import decode_resume_token, encode_resume_token
from dex_agents.adapters.local.decoded_values import DECODED
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.event_read_ahead import READ_AHEAD_EVENTS, EventReadAhead
from dex_agents.adapters.local.stream_owners import (
    CheckedStreamOwners,
    flow_of_another_type,
    require_flow_type,
)
from dex_agents.adapters.local.stream_pages import event_message, event_stream
from dex_agents.adapters.local.undecodable_events import SKIPPED, decode_or_skip
from dex_agents.ports.engine import FlowDefinition
from dex_agents.ports.errors import StreamReadTimeoutError
from dex_agents.ports.flow_client import StreamMessage, check_poll_timeout
from dex_agents.ports.flow_rows import EventRow
from dex_agents.ports.flow_store import StoreTransaction
from dex_agents.ports.store_capabilities import CommittedEvents

DEFAULT_STREAM_POLL_TIMEOUT = timedelta(seconds=30)
"""How long ``read_stream`` long-polls by default."""


def poll_seconds(poll_timeout: timedelta | None) -> float:
    """The seconds ``read_stream`` waits for an event: 30 for ``None``; zero reads once, at once."""
    checked = check_poll_timeout(poll_timeout)
    return (DEFAULT_STREAM_POLL_TIMEOUT if checked is None else checked).total_seconds()


class LocalStreamReads:
    """Mixed into ``LocalFlowClient``, which sets ``_engine``, ``_read_ahead``, ``_committed``
    (its store, when it knows the events it committed) and ``_stream_owners``."""

    _engine: LocalEngine
    _read_ahead: EventReadAhead
    _committed: CommittedEvents | None
    _stream_owners: CheckedStreamOwners

    async def read_stream(
        self,
        flow: FlowDefinition,
        flow_id: str,
        resume_token: str = "",
        poll_timeout: timedelta | None = None,
    ) -> StreamMessage[Any]:
        """The next event after ``resume_token``; long-polls up to ``poll_timeout``."""
        stream = event_stream(self._engine.registered(flow))
        after = decode_resume_token(flow_id, resume_token)
        engine = self._engine
        loop = asyncio.get_running_loop()
        deadline = loop.time() + poll_seconds(poll_timeout)
        kept = self._read_ahead.take(flow_id, after)
        committed = self._committed
        if kept is None and committed is not None:
            kept = committed.event_after(flow_id, after)
        mark = 0
        # A read that found ``after`` the run's newest event need not be made again while no
        # look since saw the run get events: the wait below looks again before it sleeps.
        unread = False
        if kept is None:
            newest_at = self._read_ahead.newest_at(flow_id, after)
            if newest_at is not None and not engine.flow_changed_after(flow_id, newest_at):
                mark, unread = newest_at, True
            else:
                mark = await engine.flow_change_mark()
                own = self._own_newest_event(flow_id)
                unread = own is not None and own.id == after  # a read would find nothing
        while True:

            def read(tx: StoreTransaction, after: int = after) -> Any:
                events = tx.events_after(flow_id, after, READ_AHEAD_EVENTS)
                # A run is never deleted, so its events show it exists and, by their type,
                # whose they are: only a read that found none looks the run up (a statement
                # when its row is not kept).
                if not events:
                    require_flow_type(tx, flow.flow_type, flow_id)
                return events

            if kept is not None:
                events = [kept]
            elif unread:
                await self._require_stream_owner(flow, flow_id)
                events, unread = [], False
            else:
                events = list(await engine.read(read))
                if events and len(events) < READ_AHEAD_EVENTS:  # it reached the newest
                    self._read_ahead.keep_newest(flow_id, events[-1].id, mark)
            if events:
                self._read_ahead.keep(flow_id, events)
                event = events[0]
                if event.flow_type != flow.flow_type:
                    raise flow_of_another_type(flow.flow_type, flow_id)
                value = decode_or_skip(
                    event, lambda text: DECODED.decode(text, stream.value_type, engine.store)
                )
                if value is SKIPPED:  # read on past it, without waiting
                    after, unread = event.id, False
                    kept = self._read_ahead.take(flow_id, after)
                    if kept is None and committed is not None:
                        kept = committed.event_after(flow_id, after)
                    continue
                return event_message(flow_id, event, value)
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise StreamReadTimeoutError(f"no new event of session {flow_id!r} arrived")
            waited_from = mark
            mark = await engine.wait_for_flow_change(flow_id, mark, timedelta(seconds=remaining))
            # A wait that ran out saw no events of the run: no read can find one either.
            unread = not engine.flow_changed_after(flow_id, waited_from)
            if committed is not None:
                kept = committed.event_after(flow_id, after)

    async def _require_stream_owner(self, flow: FlowDefinition, flow_id: str) -> None:
        # For a read that reads no event: read through another type's Flow, a run's events
        # were decoded as that type's Stream (``stream_owners``).
        if not self._stream_owners.checked(flow.flow_type, flow_id):
            await self._engine.read(lambda tx: require_flow_type(tx, flow.flow_type, flow_id))
            self._stream_owners.remember(flow.flow_type, flow_id)

    def _own_newest_event(self, flow_id: str) -> EventRow | None:
        """The run's newest event when this process's store committed it, and the change log,
        as the latest look read it, names no later commit that appended to the run; ``None``
        when only a read can tell. Call it right after a look (``flow_change_mark``)."""
        newest = self._committed.newest_committed_event(flow_id) if self._committed else None
        if newest is not None and newest[1] == self._engine.last_events_change(flow_id):
            return newest[0]
        return None

    async def stream_tail_token(self, flow: FlowDefinition, flow_id: str) -> str:
        """The resume token of the session's newest event (``""`` when it has none).

        Reading from it waits for the next event, so a reader that only needs
        what happens from now on skips the retained ones in one query.
        """
        token, _, _ = await self._tail(flow, flow_id, with_event=False)
        return token

    async def stream_tail_marked(
        self, flow: FlowDefinition, flow_id: str
    ) -> tuple[str, Any | None, int]:
        """``stream_tail_token``, the value of that newest event (``None`` when it has none),
        and a mark (``session_change_mark``) taken before the tail was read.

        A wait for a person looks at the event: after one of a turn in progress, the
        session's snapshot would say it is busy, so the wait need not read it yet; and
        ``session_changed_since`` with the mark then says whether any commit changed
        the session after the state that event tells of.
        """
        return await self._tail(flow, flow_id, with_event=True)

    async def _tail(
        self, flow: FlowDefinition, flow_id: str, *, with_event: bool
    ) -> tuple[str, Any | None, int]:
        engine = self._engine
        stream = engine.registered(flow).flow.stream
        await self._require_stream_owner(flow, flow_id)

        def tail(tx: StoreTransaction) -> tuple[int, EventRow | None]:
            last = tx.last_event_id(flow_id)
            if not (with_event and last):
                return last, None
            rows = tx.events_after(flow_id, last - 1, 1)
            return last, rows[0] if rows and rows[0].id == last else None

        mark = await engine.flow_change_mark()
        own = self._own_newest_event(flow_id)
        last, row = (own.id, own) if own is not None else await engine.read(tail)
        # The reader that starts from it waits for the next event without reading first.
        self._read_ahead.keep_newest(flow_id, last, mark)
        if not last:
            return "", None, mark
        value = None
        if with_event and row is not None and stream is not None:
            decoded = decode_or_skip(
                row, lambda text: DECODED.decode(text, stream.value_type, engine.store)
            )
            value = None if decoded is SKIPPED else decoded
        return encode_resume_token(flow_id, last), value, mark
