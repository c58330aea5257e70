"""A Flow run's row and its Attribute values as SQL, in a SQLite store transaction.

A run's state is what ``flow_changes`` logs as its row or Attribute values
changed (``_with_state``): its ``flows`` row and its ``attribute_values``. Reads
are served from what the connection keeps of the run (``KnownRows``) and, for
write-once AttributeMaps, from the values the store keeps (``WriteOnceValues``);
a write the file is known to hold already is not made again.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Mapping, Sequence

from dex_agents.adapters.local.damaged_pages import (
    DamagedRuns,
    damaged_page_error,
    is_damaged_page,
)
from dex_agents.adapters.local.damaged_values import (
    damaged_value,
    is_undecodable,
    scrub_undecodable_text,
)
from dex_agents.adapters.local.known_rows import KnownRows
from dex_agents.adapters.local.sqlite_row_reads import decode_flow
from dex_agents.adapters.local.sqlite_rows import (
    row_params,
)
from dex_agents.adapters.local.sqlite_schema import (
    ATTRIBUTE_KEYS_SELECT,
    FLOW_COLUMNS,
)
from dex_agents.adapters.local.store_rows import normalized_flow
from dex_agents.adapters.local.stored_text import pack_value, unpack
from dex_agents.adapters.local.write_once_values import WriteOnceValues
from dex_agents.ports.flow_rows import FlowRow

_KEYS_PER_READ = 500
"""Instance keys one ``IN`` list names, well under SQLite's variable limit."""

_ROWS_PER_UPSERT = 32
"""Values one upsert of ``write_values`` sets at most: each count is a statement of its own
text, which the connection keeps prepared (128 of them)."""

_UPSERT = "INSERT INTO attribute_values (flow_id, name, key, value) VALUES "


@functools.lru_cache(maxsize=_ROWS_PER_UPSERT)
def _upsert_sql(count: int) -> str:
    """An upsert of ``count`` values. An upsert, not INSERT OR REPLACE, so a value written
    again keeps its rowid and page."""
    rows = ", ".join(["(?, ?, ?, ?)"] * count)
    return f"{_UPSERT}{rows} ON CONFLICT (flow_id, name, key) DO UPDATE SET value = excluded.value"


@functools.lru_cache(maxsize=64)
def _delete_sql(count: int) -> str:
    """A deletion of ``count`` keys of one Attribute."""
    marks = ", ".join(["?"] * count)
    return f"DELETE FROM attribute_values WHERE flow_id = ? AND name = ? AND key IN ({marks})"


class SqliteFlowState:
    """Mixed into ``SqliteTransaction``, which provides ``_execute``, ``_known`` (what the
    connection keeps), ``_write_once`` (the write-once values the store keeps), and the
    sets and list its commit logs and keeps: ``_changed``, ``_with_state``, ``_written``
    and ``written_once``; ``_texts_written``, what it wrote that no savepoint undid;
    ``_damaged_runs`` are the runs whose values are on a damaged
    page, which no read touches again (``damaged_pages.py``)."""

    _known: KnownRows
    _write_once: WriteOnceValues
    _damaged_runs: DamagedRuns
    _changed: set[str]
    _with_state: set[str]
    _written: set[tuple[str, str, str]]
    _texts_written: dict[tuple[str, str, str], str | None]
    written_once: list[tuple[str, str, str, str | None]]

    def _execute(
        self, sql: str, params: Sequence[object] | dict[str, object] = (), *, apart: bool = False
    ) -> sqlite3.Cursor:
        raise NotImplementedError

    # Flow runs
    def get_flow(self, flow_id: str) -> FlowRow | None:
        known = self._known.flow(flow_id)
        if not known.row_known:
            sql = f"SELECT {', '.join(FLOW_COLUMNS)} FROM flows WHERE flow_id = ?"
            values = self._execute(sql, (flow_id,)).fetchone()
            known.row = None if values is None else tuple(values)
            known.row_known = True
        return known.flow_row()

    def insert_flow(self, row: FlowRow) -> None:
        params = row_params(normalized_flow(row), FLOW_COLUMNS)
        names = ", ".join(FLOW_COLUMNS)
        placeholders = ", ".join(f":{name}" for name in FLOW_COLUMNS)
        try:
            self._execute(f"INSERT INTO flows ({names}) VALUES ({placeholders})", params)
        except sqlite3.IntegrityError:
            raise ValueError(f"a Flow run with ID {row.flow_id!r} is already stored") from None
        self._changed.add(row.flow_id)
        self._with_state.add(row.flow_id)
        self._keep_flow(params)

    def update_flow(self, row: FlowRow) -> None:
        params = row_params(normalized_flow(row), FLOW_COLUMNS)
        assignments = ", ".join(f"{name} = :{name}" for name in FLOW_COLUMNS)
        sql = f"UPDATE flows SET {assignments} WHERE flow_id = :flow_id"
        if self._execute(sql, params).rowcount == 0:
            raise LookupError(f"no Flow run with ID {row.flow_id!r} is stored")
        self._changed.add(row.flow_id)
        self._with_state.add(row.flow_id)
        self._keep_flow(params)

    def _keep_flow(self, params: dict[str, object]) -> None:
        known = self._known.flow(str(params["flow_id"]))
        known.row = tuple(params[name] for name in FLOW_COLUMNS)
        known.row_known = True

    def list_flows(self) -> Sequence[FlowRow]:
        sql = f"SELECT {', '.join(FLOW_COLUMNS)} FROM flows ORDER BY created_at, rowid"
        return [decode_flow(values) for values in self._execute(sql)]

    # Attribute values
    def get_value(self, flow_id: str, name: str, key: str) -> str | None:
        # Only write-once instances are kept, and a write through this store forgets its key:
        # a snapshot's read of one message chunk by key reads no page of it again.
        kept = self._write_once.known(flow_id, name, (key,))
        if kept:
            return kept[key] if key in self._map_keys(flow_id, name) else None
        known = self._known.peek(flow_id)
        if known is not None:
            if key == "" and name in known.singletons:
                return known.singletons[name]
            whole = known.maps.get(name)
            if whole is not None:
                return whole.get(key)
        sql = "SELECT value FROM attribute_values WHERE flow_id = ? AND name = ? AND key = ?"
        cursor = self._value_cursor(flow_id, sql, (flow_id, name, key))
        try:
            values = cursor.fetchone()
            text = None if values is None else unpack(values[0])
        except Exception as error:
            self._name_damaged(cursor, error, flow_id, (name,), (key,))
            raise
        if key == "":
            self._known.flow(flow_id).singletons[name] = text
        return text

    def get_values(self, flow_id: str, name: str) -> dict[str, str]:
        known = self._known.flow(flow_id)
        whole = known.maps.get(name)
        if whole is None:
            sql = (
                "SELECT key, value FROM attribute_values WHERE flow_id = ? AND name = ? "
                "ORDER BY key"
            )
            cursor = self._value_cursor(flow_id, sql, (flow_id, name))
            try:
                whole = {key: unpack(value) for key, value in cursor}
            except Exception as error:
                self._name_damaged(cursor, error, flow_id, (name,))
                raise
            known.keep_map(name, whole)
            return dict(whole)
        return dict(sorted(whole.items()))

    def get_write_once_values(
        self, flow_id: str, name: str, keys: Sequence[str] | None = None
    ) -> dict[str, str]:
        # Only the keys are read (the value column, with its overflow pages, is
        # not), then the values this store has not kept.
        if keys is None:
            kept_keys = self._map_keys(flow_id, name)
            # A long session's chunks are all kept, and sorting and picking them one by one
            # was a walk over every chunk at every model call.
            whole = self._write_once.known_all(flow_id, name, kept_keys)
            if whole is not None:
                return whole
            keys = sorted(kept_keys)
            found = self._write_once.known(flow_id, name, keys)
        else:
            keys = sorted(set(keys))
            found = self._write_once.known(flow_id, name, keys)
            if found:
                present = self._map_keys(flow_id, name)
                keys = [key for key in keys if key in present]
                found = {key: text for key, text in found.items() if key in present}
        if len(found) == len(keys):
            return found  # every value kept: already in key order
        missing = [key for key in keys if key not in found]
        if missing and self._texts_written:
            # A value this transaction wrote is read back as the text it wrote, with no read:
            # a Step claimed in a commit loads the message the Step before it wrote there.
            texts = self._texts_written
            mine = [key for key in missing if (flow_id, name, key) in texts]
            for key in mine:
                text = texts[(flow_id, name, key)]
                if text is not None:
                    found[key] = text
            if mine:
                missing = [key for key in missing if (flow_id, name, key) not in texts]
        for start in range(0, len(missing), _KEYS_PER_READ):
            part = missing[start : start + _KEYS_PER_READ]
            marks = ", ".join("?" for _ in part)
            sql = f"""SELECT key, value FROM attribute_values
                WHERE flow_id = ? AND name = ? AND key IN ({marks})"""
            cursor = self._value_cursor(flow_id, sql, (flow_id, name, *part))
            try:
                read = {key: unpack(value) for key, value in cursor}
            except Exception as error:
                self._name_damaged(cursor, error, flow_id, (name,), part)
                raise
            committed = {
                key: text for key, text in read.items() if (flow_id, name, key) not in self._written
            }
            self._write_once.keep(flow_id, name, committed)
            found.update(read)
        return {key: found[key] for key in keys if key in found}

    def _map_keys(self, flow_id: str, name: str) -> set[str]:
        """Every key of an AttributeMap, kept with the run's rows: the text of a write-once
        instance this process keeps outlives its key when another connection deletes it
        (``WriteOnceValues`` hears only this store's writes), and this says whether it is."""
        known = self._known.flow(flow_id)
        keys = known.map_keys.get(name)
        if keys is None:
            rows = self._execute(ATTRIBUTE_KEYS_SELECT, (flow_id, name)).fetchall()
            keys = known.map_keys[name] = {key for (key,) in rows}
        return keys

    def get_singletons(self, flow_id: str, names: Sequence[str]) -> dict[str, str]:
        if not names:
            return {}
        singletons = self._known.flow(flow_id).singletons
        missing = [name for name in names if name not in singletons]
        if missing:
            marks = ", ".join("?" for _ in missing)
            sql = f"""SELECT name, value FROM attribute_values
                WHERE flow_id = ? AND name IN ({marks}) AND key = ''"""
            cursor = self._value_cursor(flow_id, sql, (flow_id, *missing))
            try:
                read = {name: unpack(value) for name, value in cursor}
            except Exception as error:
                self._name_damaged(cursor, error, flow_id, missing, ("",))
                raise
            for name in missing:
                singletons[name] = read.get(name)
        found = {}
        for name in names:
            text = singletons[name]
            if text is not None:
                found[name] = text
        return found

    def _value_cursor(self, flow_id: str, sql: str, params: Sequence[object]) -> sqlite3.Cursor:
        """``sql``, a read of ``flow_id``'s Attribute values, run; refused before it reads a
        page when a read found them on a damaged page (``damaged_pages.py``)."""
        self._damaged_runs.check(flow_id)
        try:
            # Its own cursor: a value that does not decode stops the read, which then closes it.
            return self._execute(sql, params, apart=True)
        except sqlite3.DatabaseError as error:  # SQLite steps to the first row here
            self._note_damaged_page(flow_id, error)
            raise

    def _note_damaged_page(self, flow_id: str, error: Exception) -> None:
        """Raise the error naming ``flow_id`` when ``error`` is SQLite's damaged page under its values."""
        # The transaction can write nothing now; the next one reads none of these pages.
        # Damage that is not under the run's values is the file's, raised as it is.
        if is_damaged_page(error) and self._damaged_runs.note(flow_id, error):
            raise damaged_page_error(flow_id, error) from error

    def _name_damaged(
        self,
        cursor: sqlite3.Cursor,
        error: Exception,
        flow_id: str,
        names: Sequence[str],
        keys: Sequence[str] | None = None,
    ) -> None:
        """Close ``cursor``, the read's, that ``error`` stopped; when ``error`` says a value did
        not decode, raise the error that names which one (``damaged_values.py``).

        Stopped mid-way and kept alive by the error's traceback, the statement held its
        read snapshot after the transaction ended: once another connection wrote, each
        write of this connection waited out the busy timeout and failed.
        """
        cursor.close()
        self._note_damaged_page(flow_id, error)
        scrub_undecodable_text(error)  # the named error chains it: a traceback prints it
        if is_undecodable(error):
            named = damaged_value(self._execute, flow_id, names, keys)
            if named is not None:
                raise named from error

    def put_value(self, flow_id: str, name: str, key: str, value: str) -> None:
        if self._holds(flow_id, name, key, value):
            return
        self._execute(_upsert_sql(1), (flow_id, name, key, pack_value(value)))
        self._wrote(flow_id, name, key, value)

    def delete_value(self, flow_id: str, name: str, key: str) -> None:
        if self._holds(flow_id, name, key, None):
            return
        sql = "DELETE FROM attribute_values WHERE flow_id = ? AND name = ? AND key = ?"
        self._execute(sql, (flow_id, name, key))
        self._wrote(flow_id, name, key, None)

    def write_values(self, flow_id: str, writes: Mapping[tuple[str, str], str | None]) -> None:
        # A Step writes back what it staged in one call (1 to 7 values, 39 when messages
        # roll into a chunk; 22 a turn): its values set are one upsert, and those it unsets
        # one DELETE per Attribute, where a statement each cost about 5 K instructions more.
        rows: list[object] = []
        unset: dict[str, list[str]] = {}
        written: list[tuple[str, str, str | None]] = []
        for (name, key), value in writes.items():
            if self._holds(flow_id, name, key, value):
                continue
            if value is None:
                unset.setdefault(name, []).append(key)
            else:
                rows += (flow_id, name, key, pack_value(value))
            written.append((name, key, value))
        step = _ROWS_PER_UPSERT * 4
        for start in range(0, len(rows), step):
            part = rows[start : start + step]
            self._execute(_upsert_sql(len(part) // 4), part)
        for name, keys in unset.items():
            for start in range(0, len(keys), _KEYS_PER_READ):
                some = keys[start : start + _KEYS_PER_READ]
                self._execute(_delete_sql(len(some)), (flow_id, name, *some))
        for name, key, value in written:
            self._wrote(flow_id, name, key, value)

    def _holds(self, flow_id: str, name: str, key: str, value: str | None) -> bool:
        # A Step writes back what it staged whether or not it changed (its turn's state, the
        # interrupts it locked), and deletes what may be unset: when the file is known to hold
        # that already, the statement would change nothing.
        known = self._known.peek(flow_id)
        return known is not None and known.holds(name, key, value)

    def _wrote(self, flow_id: str, name: str, key: str, value: str | None) -> None:
        self._written.add((flow_id, name, key))
        self._texts_written[(flow_id, name, key)] = value
        self._changed.add(flow_id)
        self._with_state.add(flow_id)
        if self._write_once.tracks(flow_id, name):
            self.written_once.append((flow_id, name, key, value))
        self._write_once.forget(flow_id, name, key)
        known = self._known.peek(flow_id)
        if known is not None:
            known.put_value(name, key, value)
