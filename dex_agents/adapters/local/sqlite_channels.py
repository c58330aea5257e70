"""The Channel and lock primitives of a SQLite store transaction, each read made once.

One commit checks the same wait and the same locks several times: a claim reads
its locks and then acquires them, and the snapshot of each Step it claims counts
the session's waiting messages again. Nothing but the transaction itself
changes these tables while it holds its snapshot, so it keeps what it read
until it writes the table (a Channel write forgets every Channel read) or a
savepoint undoes its writes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from dex_agents.adapters.local.sqlite_schema import MESSAGE_SELECT, decode_message, encode_time
from dex_agents.adapters.local.store_rows import utc_time
from dex_agents.ports.flow_store import MessageRow


class SqliteChannels:
    """Mixed into ``SqliteTransaction``, which provides ``_execute`` and calls
    ``_forget_channel_reads`` once before any other method and when a savepoint undoes."""

    def _execute(
        self, sql: str, params: Sequence[object] | dict[str, object] = ()
    ) -> sqlite3.Cursor:
        raise NotImplementedError

    def _forget_channel_reads(self) -> None:
        """Forget every Channel and lock read (the first call starts with none)."""
        self._pending_reads: dict[tuple[str, str, str], list[MessageRow]] = {}
        self._count_reads: dict[tuple[str, ...], dict[str, int]] = {}
        self._lock_holders: dict[tuple[str, str], int | None] = {}

    def _forget_message_reads(self) -> None:
        self._pending_reads.clear()
        self._count_reads.clear()

    def append_message(
        self,
        flow_id: str,
        channel: str,
        key: str,
        message_id: str,
        value: str,
        created_at: datetime,
    ) -> int:
        when = encode_time(utc_time(created_at, "created_at"))
        sql = """INSERT INTO channel_messages (flow_id, channel, key, message_id, value, created_at)
            VALUES (?, ?, ?, ?, ?, ?)"""
        self._forget_message_reads()
        try:
            cursor = self._execute(sql, (flow_id, channel, key, message_id, value, when))
        except sqlite3.IntegrityError:
            raise ValueError(
                f"a Channel message with ID {message_id!r} is already stored"
            ) from None
        return int(cursor.lastrowid or 0)

    def pending_messages(self, flow_id: str, channel: str, key: str) -> Sequence[MessageRow]:
        read = (flow_id, channel, key)
        rows = self._pending_reads.get(read)
        if rows is None:
            sql = f"""SELECT {MESSAGE_SELECT} FROM channel_messages
                WHERE flow_id = ? AND channel = ? AND key = ? AND consumed = 0 ORDER BY seq"""
            rows = [decode_message(values) for values in self._execute(sql, read)]
            self._pending_reads[read] = rows
        return list(rows)  # the rows are frozen; the list is the caller's

    def pending_counts(self, flow_id: str, channels: Sequence[str]) -> dict[str, int]:
        if not channels:
            return {}
        read = (flow_id, *channels)
        counts = self._count_reads.get(read)
        if counts is None:
            marks = ", ".join("?" for _ in channels)
            sql = f"""SELECT channel, count(*) FROM channel_messages
                WHERE flow_id = ? AND channel IN ({marks}) AND key = '' AND consumed = 0
                GROUP BY channel"""
            rows = self._execute(sql, read)
            counts = {str(name): int(count) for name, count in rows}
            self._count_reads[read] = counts
        return dict(counts)

    def pending_channel_keys(self, flow_id: str, channel: str) -> Sequence[str]:
        sql = """SELECT key FROM channel_messages WHERE flow_id = ? AND channel = ? AND consumed = 0
            GROUP BY key ORDER BY MIN(seq)"""
        return [str(values[0]) for values in self._execute(sql, (flow_id, channel))]

    def consume_messages(self, seqs: Sequence[int]) -> None:
        self._forget_message_reads()
        for seq in seqs:
            self._execute("UPDATE channel_messages SET consumed = 1 WHERE seq = ?", (seq,))

    def restore_messages(self, seqs: Sequence[int]) -> None:
        self._forget_message_reads()
        for seq in seqs:
            self._execute("UPDATE channel_messages SET consumed = 0 WHERE seq = ?", (seq,))

    def delete_consumed_messages(self, seqs: Sequence[int]) -> None:
        self._forget_message_reads()
        for seq in seqs:
            self._execute("DELETE FROM channel_messages WHERE seq = ? AND consumed = 1", (seq,))

    def delete_message(self, flow_id: str, message_id: str) -> bool:
        sql = "DELETE FROM channel_messages WHERE flow_id = ? AND message_id = ? AND consumed = 0"
        self._forget_message_reads()
        return self._execute(sql, (flow_id, message_id)).rowcount > 0

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
