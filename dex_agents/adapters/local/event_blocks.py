"""Stream events sealed into blocks: how a session's older events are stored together.

An event alone, even compressed, took about 185 bytes of the file after 1,000
bench turns: its row (flow type, session ID, time, source, size) and two index
entries around a value of about 64 compressed bytes. A session's events repeat
each other, so the SQLite store seals each ``BLOCK_EVENTS`` of a session's
events into one row of ``event_blocks``, compressed together (about 22 bytes
an event), and keeps only the newest, not yet sealed events as rows of their
own.

A block's text is one line of JSON, ``[[id, source, time, chars], ...]``
with each event's ID and time (microseconds since 1970, UTC) as steps from the
event before it, its source, and its length in characters, then every event's
value one after the other. Which of a block's events are trimmed is a
column of its row (``trimmed_to``), so trimming a few events from a block
rewrites no compressed bytes.
"""

from __future__ import annotations

import heapq
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta

from dex_agents.adapters.local.store_errors import StoredValueError
from dex_agents.adapters.local.stored_text import pack_event_block, unpack
from dex_agents.ports.flow_rows import EventRow

BLOCK_EVENTS = 64
"""How many of a session's events are sealed into one block."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)

BLOCK_SELECT = "first_id, trimmed_to, flow_type, flow_id, events"
"""The columns of an ``event_blocks`` row that ``decode_block`` reads, in its argument order."""


def encode_block(events: Sequence[tuple[int, str, str, str]]) -> bytes:
    """The stored bytes of a block of one session's events, in ID order.

    Each event is ``(id, source, created_at, value)``, its time as the store
    writes it (UTC ISO text).
    """
    meta: list[list[object]] = []
    previous_id = previous_time = 0
    for event_id, source, when, value in events:
        micros = (datetime.fromisoformat(when) - _EPOCH) // _MICROSECOND
        meta.append([event_id - previous_id, source, micros - previous_time, len(value)])
        previous_id, previous_time = event_id, micros
    header = json.dumps(meta, ensure_ascii=False, separators=(",", ":"))
    return pack_event_block(header + "\n" + "".join(event[3] for event in events))


def _parsed(first_id: int, stored: bytes) -> list[tuple[int, str, int, str]]:
    """Each event of a stored block as ``(id, source, microseconds, value)``, in ID order."""
    text = unpack(stored)
    header, _, values = text.partition("\n")
    try:
        meta = json.loads(header)
        events: list[tuple[int, str, int, str]] = []
        at = event_id = micros = 0
        for id_step, source, time_step, chars in meta:
            event_id, micros = event_id + id_step, micros + time_step
            events.append((event_id, source, micros, values[at : at + chars]))
            at += chars
    except (ValueError, TypeError) as error:
        raise StoredValueError(f"the Stream block {first_id} is damaged: {error}") from None
    if at != len(values) or not events or events[0][0] != first_id:
        raise StoredValueError(f"the Stream block {first_id} is damaged: its lengths disagree")
    return events


def decode_block(
    first_id: int, trimmed_to: int, flow_type: str, flow_id: str, stored: bytes
) -> list[EventRow]:
    """The events a stored block still holds (IDs above ``trimmed_to``), in ID order.

    Raises ``StoredValueError`` when the block's text is not what ``encode_block``
    writes: the file was damaged, or written by another program.
    """
    return [
        EventRow(
            event_id, flow_type, flow_id, value, source, _EPOCH + timedelta(microseconds=micros)
        )
        for event_id, source, micros, value in _parsed(first_id, stored)
        if event_id > trimmed_to
    ]


def block_sizes(first_id: int, stored: bytes) -> tuple[tuple[int, int], ...]:
    """``(event ID, UTF-8 size)`` of every event of a stored block, trimmed or not, in ID order."""
    return tuple(
        (event_id, len(value.encode("utf-8")))
        for event_id, _, _, value in _parsed(first_id, stored)
    )


def sizes_in_id_order(
    blocks: Iterable[tuple[int, Sequence[tuple[int, int]]]],
    singles: Iterable[tuple[int, int]],
) -> Iterator[tuple[int, int, bool]]:
    """``(event ID, UTF-8 size, in a block)`` of a Flow type's events, oldest first.

    ``blocks`` are ``(first ID, [(ID, size), ...])`` in first-ID order, and
    ``singles`` the unsealed events' ``(ID, size)`` in ID order. A block's
    events interleave with other sessions' blocks and events, so each block is
    opened only when no event older than its first is left to yield, and only
    its next event waits in the heap: a trim that frees a few events reads the
    oldest block only, and as few of its events as it frees.
    """
    # (ID, size, position in its block, the block's events); IDs are unique, so the
    # heap never compares further than the ID.
    pending: list[tuple[int, int, int, Sequence[tuple[int, int]]]] = []
    block_iter, single_iter = iter(blocks), iter(singles)
    block = next(block_iter, None)
    single = next(single_iter, None)
    while True:
        next_pending = pending[0][0] if pending else None
        next_single = single[0] if single is not None else None
        known = [event_id for event_id in (next_pending, next_single) if event_id is not None]
        if block is not None and (not known or block[0] <= min(known)):
            events = block[1]
            if events:
                heapq.heappush(pending, (events[0][0], events[0][1], 0, events))
            block = next(block_iter, None)
        elif single is not None and (next_pending is None or single[0] < next_pending):
            yield single[0], single[1], False
            single = next(single_iter, None)
        elif pending:
            event_id, size, at, events = heapq.heappop(pending)
            yield event_id, size, True
            if at + 1 < len(events):
                following = events[at + 1]
                heapq.heappush(pending, (following[0], following[1], at + 1, events))
        else:
            return


class BlockSizes:
    """The event sizes of the blocks one store walked, the least recently used dropped.

    A trim at a Stream's capacity walks the oldest block again in every commit; a
    block's events never change (a trim only raises its ``trimmed_to``) and, once
    committed, its first and last IDs name them within one file, so what was read
    of it stays true in any process. Event IDs restart in every file, so each store
    keeps its own. A rollback (of a transaction, or of a batch's work to its
    savepoint) hands the IDs of the events it undid out again, and a block it
    sealed is gone: a later block may then have the same IDs and other events, so
    the store forgets every size at a rollback (``forget``).
    """

    def __init__(self, most: int = 256) -> None:
        self._most = most
        self._sizes: OrderedDict[tuple[int, int], tuple[tuple[int, int], ...]] = OrderedDict()
        self._lock = threading.Lock()

    def get(
        self, first_id: int, last_id: int, read: Callable[[], bytes]
    ) -> tuple[tuple[int, int], ...]:
        """The sizes of block ``first_id``..``last_id``; ``read`` gives its stored bytes when not kept."""
        key = (first_id, last_id)
        with self._lock:
            sizes = self._sizes.get(key)
            if sizes is not None:
                self._sizes.move_to_end(key)
                return sizes
        sizes = block_sizes(first_id, read())
        with self._lock:
            self._sizes[key] = sizes
            if len(self._sizes) > self._most:
                self._sizes.popitem(last=False)
        return sizes

    def forget(self) -> None:
        """Forget every block's sizes: a rollback undid what some of them were read from."""
        with self._lock:
            self._sizes.clear()
