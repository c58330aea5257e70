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
and forgets only those.

Only the tables ``KnownRows`` keeps are logged: Flow runs, Attribute values,
Step executions and the Stream (a trim logs the runs whose events it deleted).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Collection, Sequence

FLOW_CHANGES_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS flow_changes (
        flow_id TEXT PRIMARY KEY, change INTEGER NOT NULL) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS flow_changes_by_change ON flow_changes (change)",
)
"""The change log's table and the index a reader's range query runs on."""

Execute = Callable[[str, Sequence[object]], sqlite3.Cursor]

# One statement, so a commit pays one round trip: every run gets the same new number,
# one above the newest in the file (the writer holds the write lock, so none comes between).
_RECORD = """INSERT INTO flow_changes (flow_id, change)
    SELECT value, (SELECT coalesce(max(change), 0) + 1 FROM flow_changes) FROM json_each(?)
    WHERE true ON CONFLICT (flow_id) DO UPDATE SET change = excluded.change
    RETURNING change"""

_SINCE = "SELECT flow_id, change FROM flow_changes WHERE change > ?"

_NEWEST = "SELECT coalesce(max(change), 0) FROM flow_changes"


def record_changes(execute: Execute, flow_ids: Collection[str]) -> int:
    """Log that this transaction changed ``flow_ids`` (not empty); return the number it used."""
    # json_each takes any number of IDs as one parameter, where ``?`` marks would hit
    # SQLite's variable limit in a batch of many sessions.
    rows = execute(_RECORD, (json.dumps(sorted(flow_ids)),)).fetchall()
    return int(rows[0][0])


def changes_since(execute: Execute, change: int) -> tuple[set[str], int]:
    """The Flow runs changed after number ``change``, and the newest number (``change`` if none)."""
    changed: set[str] = set()
    newest = change
    for flow_id, number in execute(_SINCE, (change,)):
        changed.add(str(flow_id))
        newest = max(newest, int(number))
    return changed, newest


def newest_change(execute: Execute) -> int:
    """The newest change number in the file (0 when none was logged)."""
    return int(execute(_NEWEST, ()).fetchone()[0])
