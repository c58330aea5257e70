"""Which Flow runs each commit changed, so a connection forgets only what another one changed.

``KnownRows`` keeps a connection's rows across its transactions while no other
connection commits: ``PRAGMA data_version`` says only *that* another committed,
not what. With many sessions served by more than one process (a client and a
worker, or two workers), some other connection commits between almost every
two transactions, and forgetting every kept session each time reads them all
again. So every write transaction that changed a kept row also records, in the
same commit, the Flow runs it changed under one new change number
(``flow_changes``: one row per Flow run, its newest number); a connection that
sees ``data_version`` move reads the runs changed since the last number it knew
and forgets only those. Of a run whose row and Attribute values no such commit
wrote (a client queued a message, a worker claimed a Step) it forgets only the
Step executions, Channel messages and Stream position, and keeps its state.

Only the tables ``KnownRows`` keeps are logged: Flow runs, Attribute values,
Step executions, unconsumed Channel messages and the Stream (a trim logs the
runs whose events it deleted).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Collection, Sequence
from typing import NamedTuple

from dex_agents.ports.store_capabilities import ChangedFlows, LoggedRuns

FLOW_CHANGES_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS flow_changes (
        flow_id TEXT PRIMARY KEY, change INTEGER NOT NULL, events INTEGER NOT NULL,
        state INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS flow_changes_by_change ON flow_changes (change)",
)
"""The change log's table and the index a reader's range query runs on.

``change`` is the number of the newest commit that changed the run, ``events``
that of the newest that appended to its Stream (0: none did), so a Stream reader
waits for the one and a connection's kept rows for the other; ``state`` that of
the newest that wrote its row or an Attribute value (schema version 6).
"""

UPGRADE_TO_6 = (
    "ALTER TABLE flow_changes ADD COLUMN state INTEGER NOT NULL DEFAULT 0",
    # What versions 4 and 5 logged does not say which part changed: any may have.
    "UPDATE flow_changes SET state = change",
)
"""How a change log of schema version 4 or 5 becomes version 6's."""

Execute = Callable[[str, Sequence[object]], sqlite3.Cursor]

# Every run of a commit gets the same new number, one above the newest in the file (the
# writer holds the write lock, so none comes between), read first and bound: a RETURNING
# clause (how the statement gave the number back until 2026-12-07) makes SQLite gather
# its rows in an ephemeral table, a B-tree opened and closed per statement, which cost
# more than the read (about 160 K instructions against 30 K for both statements).
# Each item of the JSON array is [flow ID, whether the commit appended to its Stream,
# whether it wrote the run's row or Attribute values]; ``?1`` is the number.
_RECORD = """INSERT INTO flow_changes (flow_id, change, events, state)
    SELECT json_extract(item.value, '$[0]'), ?1,
        CASE WHEN json_extract(item.value, '$[1]') THEN ?1 ELSE 0 END,
        CASE WHEN json_extract(item.value, '$[2]') THEN ?1 ELSE 0 END
    FROM json_each(?2) AS item
    WHERE true ON CONFLICT (flow_id) DO UPDATE SET change = excluded.change,
        events = max(events, excluded.events), state = max(state, excluded.state)"""

# The same for the one run most commits change, without the JSON.
_RECORD_ONE = """INSERT INTO flow_changes (flow_id, change, events, state) VALUES (?, ?, ?, ?)
    ON CONFLICT (flow_id) DO UPDATE SET change = excluded.change,
        events = max(events, excluded.events), state = max(state, excluded.state)"""

_SINCE = "SELECT flow_id, change, events, state FROM flow_changes WHERE change > ?"

_NEWEST = "SELECT coalesce(max(change), 0) FROM flow_changes"


class LoggedChanges(NamedTuple):
    """What the log says changed after a change number."""

    changed: dict[str, bool]
    """The Flow runs whose stored rows changed, each with whether its row or Attribute
    values did."""
    with_events: dict[str, int]
    """Those of them with new Stream events, each with its newest commit that appended some."""
    newest: int
    """The newest change number (the one asked after, when none is newer)."""


def record_changes(
    execute: Execute,
    flow_ids: Collection[str],
    with_events: Collection[str],
    with_state: Collection[str],
    newest: int | None = None,
) -> int:
    """Log that this transaction changed ``flow_ids`` (not empty), appending Stream events of
    ``with_events`` among them and writing the row or Attribute values of ``with_state``;
    return the number it used.

    ``newest`` is the newest number in the file, when the caller knows it (``KnownRows``);
    otherwise it is read.
    """
    number = (newest_change(execute) if newest is None else newest) + 1
    if len(flow_ids) == 1:
        (flow_id,) = flow_ids
        # Ints, not bools: Python's sqlite3 binds an exact int as it is, but looks up an
        # adapter for a bool first (about 1.3 K instructions each, two a commit).
        events = number if flow_id in with_events else 0
        state = number if flow_id in with_state else 0
        execute(_RECORD_ONE, (flow_id, number, events, state))
    else:
        # json_each takes any number of runs as one parameter, where ``?`` marks would hit
        # SQLite's variable limit in a batch of many sessions.
        items = [[flow_id, flow_id in with_events, flow_id in with_state] for flow_id in flow_ids]
        execute(_RECORD, (number, json.dumps(items)))
    return number


def changes_since(execute: Execute, change: int) -> LoggedChanges:
    """What changed after number ``change``."""
    changed: dict[str, bool] = {}
    with_events: dict[str, int] = {}
    newest = change
    # fetchall ends the statement, so outside a transaction no read snapshot stays open.
    for flow_id, number, events, state in execute(_SINCE, (change,)).fetchall():
        changed[str(flow_id)] = state > change
        if events > change:
            with_events[str(flow_id)] = int(events)
        newest = max(newest, int(number))
    return LoggedChanges(changed, with_events, newest)


def newest_change(execute: Execute) -> int:
    """The newest change number in the file (0 when none was logged)."""
    return int(execute(_NEWEST, ()).fetchall()[0][0])


def _logged_after(execute: Execute, change: int | None) -> tuple[LoggedChanges | None, int]:
    if change is None:  # asks for the newest number alone
        return None, newest_change(execute)
    logged = changes_since(execute, change)
    return logged, logged.newest


def runs_changed_after(execute: Execute, change: int | None) -> ChangedFlows:
    """The runs changed after ``change`` and the newest number; ``change=None`` asks for the
    newest number alone."""
    logged, newest = _logged_after(execute, change)
    return (None if logged is None else logged.changed), newest


def runs_logged_after(execute: Execute, change: int | None) -> LoggedRuns:
    """The runs that got Stream events after ``change`` (each with the number of its newest
    commit that did), every run changed after it, and the newest number; ``change=None``
    asks for the newest alone."""
    logged, newest = _logged_after(execute, change)
    if logged is None:
        return None, None, newest
    return logged.with_events, frozenset(logged.changed), newest
