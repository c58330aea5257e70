"""Stream events sealed into blocks: how a session's older events are stored together.

An event alone, even compressed, took about 185 bytes of the file after 1,000
bench turns: its row (flow type, session ID, time, source, size) and two index
entries around a value of about 64 compressed bytes. A session's events repeat
each other, so the SQLite store seals each ``BLOCK_EVENTS`` of a session's
events into one row of ``event_blocks``, compressed together (about 16 bytes
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
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta

from dex_agents.adapters.local.store_errors import StoredValueError
from dex_agents.adapters.local.stored_text import pack_event_block, unpack
from dex_agents.ports.flow_store import EventRow

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


def decode_block(
    first_id: int, trimmed_to: int, flow_type: str, flow_id: str, stored: bytes
) -> list[EventRow]:
    """The events a stored block still holds (IDs above ``trimmed_to``), in ID order.

    Raises ``StoredValueError`` when the block's text is not what ``encode_block``
    writes: the file was damaged, or written by another program.
    """
    text = unpack(stored)
    header, _, values = text.partition("\n")
    try:
        meta = json.loads(header)
        events: list[EventRow] = []
        at = event_id = micros = 0
        for id_step, source, time_step, chars in meta:
            event_id, micros = event_id + id_step, micros + time_step
            value = values[at : at + chars]
            at += chars
            if event_id > trimmed_to:
                when = _EPOCH + timedelta(microseconds=micros)
                events.append(EventRow(event_id, flow_type, flow_id, value, source, when))
    except (ValueError, TypeError) as error:
        raise StoredValueError(f"the Stream block {first_id} is damaged: {error}") from None
    if at != len(values) or not meta or meta[0][0] != first_id:
        raise StoredValueError(f"the Stream block {first_id} is damaged: its lengths disagree")
    return events


def sizes_in_id_order(
    blocks: Iterable[tuple[int, Sequence[EventRow]]],
    singles: Iterable[tuple[int, int]],
) -> Iterator[tuple[int, int]]:
    """``(event ID, UTF-8 size)`` of a Flow type's events, oldest first.

    ``blocks`` are ``(first ID, events)`` in first-ID order, and ``singles`` the
    unsealed events' ``(ID, size)`` in ID order. A block's events interleave
    with other sessions' blocks and events, so each block is opened only when
    no event older than its first is left to yield: a trim that frees a few
    events reads the oldest blocks only.
    """
    pending: list[tuple[int, int]] = []
    block_iter, single_iter = iter(blocks), iter(singles)
    block = next(block_iter, None)
    single = next(single_iter, None)
    while True:
        next_pending = pending[0][0] if pending else None
        next_single = single[0] if single is not None else None
        known = [event_id for event_id in (next_pending, next_single) if event_id is not None]
        if block is not None and (not known or block[0] <= min(known)):
            for event in block[1]:
                heapq.heappush(pending, (event.id, len(event.value.encode("utf-8"))))
            block = next(block_iter, None)
        elif single is not None and (next_pending is None or single[0] < next_pending):
            yield single
            single = next(single_iter, None)
        elif pending:
            yield heapq.heappop(pending)
        else:
            return
