"""The Channel and lock primitives of a SQLite store transaction, each read made once.

A session's Steps, its RPCs and its worker's hand-offs check the same Channels
commit after commit: each Step's snapshot counts the session's waiting messages,
each wait looks for its message, each snapshot RPC lists the queued ones. So
the connection keeps what it read of a Flow run's unconsumed messages across
its transactions, with the run's other rows (``KnownFlow.pending``,
``KnownFlow.pending_counts``). Every write of ``channel_messages`` goes through
here: it updates what is kept and logs the run as changed, so that another
connection's next transaction forgets what it kept of that run. A rollback
forgets everything kept (``KnownRows``).

Locks are kept for one transaction: nothing but the transaction itself changes
them while it holds its snapshot, until a savepoint undoes its writes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from dex_agents.adapters.local.known_rows import KnownFlow, KnownRows
from dex_agents.adapters.local.sqlite_row_reads import decode_message
from dex_agents.adapters.local.sqlite_rows import (
    stored_time,
)
from dex_agents.adapters.local.sqlite_schema import (
    MESSAGE_SELECT,
)
from dex_agents.ports.flow_rows import MessageRow

_CONSUME = """UPDATE channel_messages SET consumed = 1 WHERE seq = ? AND consumed = 0
    RETURNING flow_id, channel, key"""
# Without RETURNING, for a message whose run, Channel and key are known: SQLite gathers a
# RETURNING statement's rows in an ephemeral B-tree opened per statement.
_CONSUME_KNOWN = "UPDATE channel_messages SET consumed = 1 WHERE seq = ? AND consumed = 0"
_RESTORE = """UPDATE channel_messages SET consumed = 0 WHERE seq = ? AND consumed = 1
    RETURNING flow_id, channel, key"""
_DELETE_PENDING = """DELETE FROM channel_messages
    WHERE flow_id = ? AND message_id = ? AND consumed = 0 RETURNING seq, channel, key"""


class SqliteChannels:
    """Mixed into ``SqliteTransaction``, which provides ``_execute``, ``_known`` (what the
    connection keeps) and ``_changed`` (the runs its commit logs), and calls
    ``_forget_channel_reads`` once before any other method and when a savepoint undoes."""

    _known: KnownRows
    _changed: set[str]

    def _execute(
        self, sql: str, params: Sequence[object] | dict[str, object] = (), *, apart: bool = False
    ) -> sqlite3.Cursor:
        raise NotImplementedError

    def _forget_channel_reads(self) -> None:
        """Forget every lock read and the last pending read (the first call starts with none)."""
        self._lock_holders: dict[tuple[str, str], int | None] = {}
        # The rows the last ``pending_messages`` returned: a wait consumes those it just read.
        self._last_pending: Sequence[MessageRow] = ()

    def append_message(
        self,
        flow_id: str,
        channel: str,
        key: str,
        message_id: str,
        value: str,
        created_at: datetime,
    ) -> int:
        when = stored_time(created_at, "created_at")
        sql = """INSERT INTO channel_messages (flow_id, channel, key, message_id, value, created_at)
            VALUES (?, ?, ?, ?, ?, ?)"""
        try:
            cursor = self._execute(sql, (flow_id, channel, key, message_id, value, when))
        except sqlite3.IntegrityError:
            raise ValueError(
                f"a Channel message with ID {message_id!r} is already stored"
            ) from None
        seq = int(cursor.lastrowid or 0)
        known = self._channel_written(flow_id)
        if known is not None:
            # The row as a read of it decodes it.
            known.message_added(
                decode_message((seq, flow_id, channel, key, message_id, value, when))
            )
        return seq

    def pending_messages(self, flow_id: str, channel: str, key: str) -> Sequence[MessageRow]:
        known = self._known.flow(flow_id)
        rows = known.pending.get((channel, key))
        if rows is None:
            sql = f"""SELECT {MESSAGE_SELECT} FROM channel_messages
                WHERE flow_id = ? AND channel = ? AND key = ? AND consumed = 0 ORDER BY seq"""
            read = self._execute(sql, (flow_id, channel, key))
            rows = [decode_message(values) for values in read]
            known.keep_pending(channel, key, rows)
        self._last_pending = rows
        return list(rows)  # the rows are frozen; the list is the caller's

    def pending_counts(self, flow_id: str, channels: Sequence[str]) -> dict[str, int]:
        if not channels:
            return {}
        known = self._known.flow(flow_id)
        counts: dict[str, int] = {}
        unknown: list[str] = []
        for channel in channels:
            count = known.pending_counts.get(channel)
            if count is None:
                unknown.append(channel)
            elif count:
                counts[channel] = count
        if unknown:
            marks = ", ".join("?" for _ in unknown)
            sql = f"""SELECT channel, count(*) FROM channel_messages
                WHERE flow_id = ? AND channel IN ({marks}) AND key = '' AND consumed = 0
                GROUP BY channel"""
            read = {
                str(name): int(count) for name, count in self._execute(sql, (flow_id, *unknown))
            }
            for channel in unknown:
                known.pending_counts[channel] = read.get(channel, 0)
            counts.update(read)
        return counts

    def pending_channel_keys(self, flow_id: str, channel: str) -> Sequence[str]:
        sql = """SELECT key FROM channel_messages WHERE flow_id = ? AND channel = ? AND consumed = 0
            GROUP BY key ORDER BY MIN(seq)"""
        return [str(values[0]) for values in self._execute(sql, (flow_id, channel))]

    def consume_messages(self, seqs: Sequence[int]) -> None:
        for seq in seqs:
            # A message's run, Channel and key never change and its ``seq`` is never
            # reused (AUTOINCREMENT), so a row read of it names them, whenever it was
            # read; ``rowcount`` says whether it was still pending.
            row = next((row for row in self._last_pending if row.seq == seq), None)
            if row is not None:
                if self._execute(_CONSUME_KNOWN, (seq,)).rowcount:
                    known = self._channel_written(row.flow_id)
                    if known is not None:
                        known.message_taken(row.channel, row.key, seq)
                continue
            for flow_id, channel, key in self._execute(_CONSUME, (seq,)).fetchall():
                known = self._channel_written(flow_id)
                if known is not None:
                    known.message_taken(channel, key, seq)

    def restore_messages(self, seqs: Sequence[int]) -> None:
        for seq in seqs:
            for flow_id, channel, key in self._execute(_RESTORE, (seq,)).fetchall():
                known = self._channel_written(flow_id)
                if known is not None:
                    known.message_back(channel, key)

    def delete_consumed_messages(self, seqs: Sequence[int]) -> None:
        # A consumed message is in nothing kept: the pending ones stay as they are.
        for seq in seqs:
            self._execute("DELETE FROM channel_messages WHERE seq = ? AND consumed = 1", (seq,))

    def delete_message(self, flow_id: str, message_id: str) -> bool:
        deleted = self._execute(_DELETE_PENDING, (flow_id, message_id)).fetchall()
        for seq, channel, key in deleted:
            known = self._channel_written(flow_id)
            if known is not None:
                known.message_taken(channel, key, seq)
        return bool(deleted)

    def _channel_written(self, flow_id: str) -> KnownFlow | None:
        """Log ``flow_id`` as changed by this Channel write (other connections then forget
        what they keep of it); return what this connection keeps of it, to update."""
        self._changed.add(flow_id)
        return self._known.peek(flow_id)

    def lock_holder(self, flow_id: str, lock_name: str) -> int | None:
        lock = (flow_id, lock_name)
        if lock in self._lock_holders:
            return self._lock_holders[lock]
        sql = "SELECT execution_id FROM locks WHERE flow_id = ? AND lock_name = ?"
        values = self._execute(sql, lock).fetchone()
        holder = None if values is None else int(values[0])
        self._lock_holders[lock] = holder
        return holder

    def acquire_lock(self, flow_id: str, lock_name: str, execution_id: int) -> None:
        holder = self.lock_holder(flow_id, lock_name)
        if holder is None:
            sql = "INSERT INTO locks (flow_id, lock_name, execution_id) VALUES (?, ?, ?)"
            self._execute(sql, (flow_id, lock_name, execution_id))
            self._lock_holders[(flow_id, lock_name)] = execution_id
        elif holder != execution_id:
            raise ValueError(
                f"lock {lock_name!r} of Flow run {flow_id!r} is held by Step execution {holder}"
            )

    def release_locks(self, execution_id: int) -> None:
        self._execute("DELETE FROM locks WHERE execution_id = ?", (execution_id,))
        for lock, holder in self._lock_holders.items():
            if holder == execution_id:
                self._lock_holders[lock] = None
