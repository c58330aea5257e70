"""The Stream's ``StoreTransaction`` primitives as SQL: single events and sealed blocks.

A session's newest events are rows of ``stream_events``, one each; when it has
``BLOCK_EVENTS`` of them, the commit that appends the last one seals them into
one compressed row of ``event_blocks`` (``event_blocks.py``). A session's
blocks hold its older events and its single rows the newer ones, so a read
from an ID reads the blocks that end after it, then the rows. Event IDs come
from ``stream_events``' AUTOINCREMENT whichever table holds the event, so they
keep increasing across the store, as the port promises.
"""

from __future__ import annotations

import bisect
import functools
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime

from dex_agents.adapters.local.event_blocks import (
    BLOCK_EVENTS,
    BLOCK_SELECT,
    BlockSizes,
    decode_block,
    encode_block,
    sizes_in_id_order,
)
from dex_agents.adapters.local.known_rows import KnownRows
from dex_agents.adapters.local.sqlite_row_reads import decode_event
from dex_agents.adapters.local.sqlite_rows import (
    stored_time,
)
from dex_agents.adapters.local.sqlite_schema import (
    EVENT_SELECT,
)
from dex_agents.adapters.local.store_rows import check_limit
from dex_agents.adapters.local.stored_text import pack_event, unpack
from dex_agents.ports.flow_rows import EventRow

Execute = Callable[[str, Sequence[object]], sqlite3.Cursor]


def _ended(sql: str, params: Sequence[object] = ()) -> sqlite3.Cursor:
    raise RuntimeError("the Stream of an ended store transaction was used")


class SqliteStream:
    """The Stream part of one ``SqliteTransaction``: its SQL, on the transaction's connection."""

    def __init__(
        self,
        execute: Execute,
        execute_apart: Execute,
        known: KnownRows,
        appended: list[tuple[int, EventRow]],
        sizes: BlockSizes,
        changed: set[str],
        with_events: set[str],
    ) -> None:
        # ``execute`` runs on the transaction's one cursor, which the next statement resets;
        # ``execute_apart`` on a cursor of its own, for reads iterated across other
        # statements or stopped before their last row (``SqliteTransaction._execute``).
        self._execute = execute
        self._execute_apart = execute_apart
        self._sizes = sizes
        self.known = known
        """What the connection keeps (``KnownRows``); the transaction swaps a stand-in for it."""
        self._appended = appended
        # The transaction's changed Flow runs (``flow_changes``): each whose events it wrote.
        self._changed = changed
        self._with_events = with_events
        # Bytes appended per Flow type and not yet added to ``stream_sizes``: one upsert for
        # the events of one commit, or before a trim frees some (``trim``).
        self._unsaved_bytes: dict[str, int] = {}

    def append(
        self, flow_type: str, flow_id: str, value: str, source: str, created_at: datetime
    ) -> int:
        when = stored_time(created_at, "created_at")
        size = len(value.encode("utf-8"))
        self._changed.add(flow_id)
        self._with_events.add(flow_id)
        sql = """INSERT INTO stream_events (flow_type, flow_id, value, size, source, created_at)
            VALUES (?, ?, ?, ?, ?, ?)"""
        cursor = self._execute(sql, (flow_type, flow_id, pack_event(value), size, source, when))
        event_id = int(cursor.lastrowid or 0)
        self._unsaved_bytes[flow_type] = self._unsaved_bytes.get(flow_type, 0) + size
        sizes = self.known.stream_bytes
        if flow_type in sizes:
            sizes[flow_type] += size
        # This transaction holds the write lock: the event is its run's newest.
        known = self.known.flow(flow_id)
        if known.last_event_id is not None:
            row = EventRow(
                event_id, flow_type, flow_id, value, source, datetime.fromisoformat(when)
            )
            self._appended.append((known.last_event_id, row))
        known.last_event_id = event_id
        singles = known.single_events
        if singles is None:
            sql = "SELECT count(*) FROM stream_events WHERE flow_id = ?"
            singles = int(self._execute(sql, (flow_id,)).fetchone()[0])
        else:
            singles += 1
        if singles >= BLOCK_EVENTS:
            singles = self._seal(flow_type, flow_id)
        known.single_events = singles
        return event_id

    def end(self) -> None:
        """Let go of the transaction's ``execute`` once it has ended: the stream is the
        transaction's, and the bound method back to it kept both, and their dicts, sets and
        lists, alive until a garbage collection, several transactions a turn."""
        self._execute = self._execute_apart = _ended

    def save_sizes(self) -> None:
        """Add the bytes appended since the last call to ``stream_sizes``."""
        sql = """INSERT INTO stream_sizes (flow_type, bytes) VALUES (?, ?)
            ON CONFLICT (flow_type) DO UPDATE SET bytes = bytes + excluded.bytes"""
        for flow_type, size in self._unsaved_bytes.items():
            self._execute(sql, (flow_type, size))
        self._unsaved_bytes.clear()

    def unsaved_sizes(self) -> dict[str, int]:
        """The bytes appended per Flow type and not yet saved, as a copy: what a savepoint's
        rollback brings back (``restore_unsaved_sizes``)."""
        return dict(self._unsaved_bytes)

    def restore_unsaved_sizes(self, unsaved: dict[str, int]) -> None:
        """Make the unsaved bytes what ``unsaved_sizes`` gave when a rolled-back savepoint began.

        Bytes a trim inside it saved were taken back with its statements, so they are
        unsaved again; the bytes of its own events are gone. So may be a block it
        sealed, whose event IDs later events get: the blocks' sizes are forgotten.
        """
        self._unsaved_bytes = dict(unsaved)
        self._sizes.forget()

    def _seal(self, flow_type: str, flow_id: str) -> int:
        """Move the oldest single events of ``flow_id`` into blocks of ``BLOCK_EVENTS``.

        Returns how many stay single: fewer than ``BLOCK_EVENTS``. A session of a
        file written before blocks existed may have thousands, which become as
        many blocks as they fill, not one block too large to read in part.
        """
        sql = (
            "SELECT id, source, created_at, value FROM stream_events WHERE flow_id = ? ORDER BY id"
        )
        events = [
            (int(event_id), str(source), str(when), unpack(value))
            for event_id, source, when, value in self._execute(sql, (flow_id,))
        ]
        sealed = len(events) - len(events) % BLOCK_EVENTS
        sql = """INSERT INTO event_blocks (first_id, last_id, trimmed_to, flow_type, flow_id, events)
            VALUES (?, ?, 0, ?, ?, ?)"""
        for start in range(0, sealed, BLOCK_EVENTS):
            block = events[start : start + BLOCK_EVENTS]
            self._execute(sql, (block[0][0], block[-1][0], flow_type, flow_id, encode_block(block)))
        if sealed:
            last = events[sealed - 1][0]
            self._execute(
                "DELETE FROM stream_events WHERE flow_id = ? AND id <= ?", (flow_id, last)
            )
        return len(events) - sealed

    def _block_sizes(
        self, blocks: sqlite3.Cursor
    ) -> Iterator[tuple[int, Sequence[tuple[int, int]]]]:
        """Each block's untrimmed events' ``(ID, size)``, read from the file once per store."""
        for first_id, last_id, trimmed_to in blocks:
            first = int(first_id)
            sizes = self._sizes.get(
                first, int(last_id), functools.partial(self._stored_block, first)
            )
            yield first, sizes[bisect.bisect_right(sizes, trimmed_to, key=_event_id) :]

    def _stored_block(self, first_id: int) -> bytes:
        sql = "SELECT events FROM event_blocks WHERE first_id = ?"
        return bytes(self._execute(sql, (first_id,)).fetchone()[0])

    def events_after(self, flow_id: str, after_id: int, limit: int) -> Sequence[EventRow]:
        check_limit(limit)
        # A seal moves all of a run's single events into blocks, and event IDs only grow, so
        # every event in its blocks is older than each of its single events. The singles are
        # read from the newest one at or before ``after_id``: when that row comes back first,
        # no block holds a later event, and a reader following its session (from the newest
        # event it saw) reads one statement, not the blocks too.
        sql = f"""SELECT {EVENT_SELECT} FROM stream_events
            WHERE flow_id = ?1 AND id >= coalesce(
                (SELECT max(id) FROM stream_events WHERE flow_id = ?1 AND id <= ?2), ?2 + 1)
            ORDER BY id LIMIT ?3"""
        singles = self._execute(sql, (flow_id, after_id, limit + 1)).fetchall()
        if singles and singles[0][0] <= after_id:
            rows = [decode_event(values) for values in singles[1:]]
        else:
            rows = self._block_events(flow_id, after_id, limit)
            rows.extend(decode_event(values) for values in singles[: limit - len(rows)])
        if rows and len(rows) < limit:  # the read reached the run's newest event
            self.known.flow(flow_id).last_event_id = rows[-1].id
        return rows

    def _block_events(self, flow_id: str, after_id: int, limit: int) -> list[EventRow]:
        """The events after ``after_id`` that ``flow_id``'s blocks hold, up to ``limit``."""
        rows: list[EventRow] = []
        if limit == 0:
            return rows
        sql = f"""SELECT {BLOCK_SELECT} FROM event_blocks
            WHERE flow_id = ? AND last_id > ? ORDER BY last_id"""
        cursor = self._execute_apart(sql, (flow_id, after_id))
        try:
            for block in cursor:
                rows.extend(event for event in decode_block(*block) if event.id > after_id)
                if len(rows) >= limit:
                    return rows[:limit]
        finally:
            # Also when a damaged block stops it: the error's traceback keeps the cursor,
            # and its open statement the read snapshot, after the transaction ended.
            cursor.close()
        return rows

    def last_event_id(self, flow_id: str) -> int:
        sql = """SELECT COALESCE(
            (SELECT MAX(id) FROM stream_events WHERE flow_id = ?),
            (SELECT MAX(last_id) FROM event_blocks WHERE flow_id = ?), 0)"""
        last = int(self._execute(sql, (flow_id, flow_id)).fetchone()[0])
        self.known.flow(flow_id).last_event_id = last
        return last

    def get_event(self, event_id: int) -> EventRow | None:
        sql = f"SELECT {EVENT_SELECT} FROM stream_events WHERE id = ?"
        values = self._execute(sql, (event_id,)).fetchone()
        if values is not None:
            return decode_event(values)
        # Blocks of other sessions overlap its ID range, so the nearest first IDs go first.
        sql = f"""SELECT {BLOCK_SELECT} FROM event_blocks
            WHERE first_id <= ? AND last_id >= ? AND trimmed_to < ? ORDER BY first_id DESC"""
        cursor = self._execute_apart(sql, (event_id, event_id, event_id))
        try:
            for block in cursor:
                for event in decode_block(*block):
                    if event.id == event_id:
                        return event
        finally:
            cursor.close()  # as in ``_block_events``
        return None

    def trim(self, flow_type: str, capacity_bytes: int) -> int:
        if capacity_bytes < 0:
            raise ValueError(f"capacity_bytes must be 0 or more, not {capacity_bytes}")
        sizes = self.known.stream_bytes
        total = sizes.get(flow_type)
        if total is None:
            sql = "SELECT bytes FROM stream_sizes WHERE flow_type = ?"
            total_row = self._execute(sql, (flow_type,)).fetchone()
            saved = 0 if total_row is None else int(total_row[0])
            total = sizes[flow_type] = saved + self._unsaved_bytes.get(flow_type, 0)
        excess = total - capacity_bytes
        if excess <= 0:
            return 0
        # The size goes down by what is freed, from a row that must then hold every byte.
        self.save_sizes()
        freed = deleted = last_id = 0
        # Both are read together, and a block's sizes not known yet are read in between.
        blocks = self._execute_apart(
            "SELECT first_id, last_id, trimmed_to FROM event_blocks"
            " WHERE flow_type = ? ORDER BY first_id",
            (flow_type,),
        )
        singles = self._execute_apart(
            "SELECT id, size FROM stream_events WHERE flow_type = ? ORDER BY id", (flow_type,)
        )
        singles_freed = blocks_freed = False
        try:
            for event_id, size, in_block in sizes_in_id_order(
                self._block_sizes(blocks), _pairs(singles)
            ):
                freed, deleted, last_id = freed + size, deleted + 1, event_id
                blocks_freed = blocks_freed or in_block
                singles_freed = singles_freed or not in_block
                if freed >= excess:
                    break
        finally:
            blocks.close()  # as in ``_block_events``
            singles.close()
        # The runs whose events went are logged, so other connections forget what they knew
        # of them (how many single events each has).
        if singles_freed:
            sql = "DELETE FROM stream_events WHERE flow_type = ? AND id <= ? RETURNING flow_id"
            self._changed.update(str(row[0]) for row in self._execute(sql, (flow_type, last_id)))
            self.known.forget_single_events()
        if blocks_freed:
            # A block that ends by last_id began by it too: the bound keeps this to the oldest.
            sql = """DELETE FROM event_blocks
                WHERE flow_type = ? AND first_id <= ? AND last_id <= ? RETURNING flow_id"""
            self._changed.update(
                str(row[0]) for row in self._execute(sql, (flow_type, last_id, last_id))
            )
            # A block trimmed in part keeps its bytes; its row says which events are gone.
            sql = """UPDATE event_blocks SET trimmed_to = ?
                WHERE flow_type = ? AND first_id <= ? AND trimmed_to < ? RETURNING flow_id"""
            self._changed.update(
                str(row[0]) for row in self._execute(sql, (last_id, flow_type, last_id, last_id))
            )
        sql = "UPDATE stream_sizes SET bytes = bytes - ? WHERE flow_type = ?"
        self._execute(sql, (freed, flow_type))
        sizes[flow_type] = total - freed
        return deleted


def _event_id(pair: tuple[int, int]) -> int:
    return pair[0]


def _pairs(singles: sqlite3.Cursor) -> Iterator[tuple[int, int]]:
    for event_id, size in singles:
        yield int(event_id), int(size)
