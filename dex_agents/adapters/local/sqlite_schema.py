"""The SQLite store's schema: its tables, indexes and the SQL of its common reads (``sqlite_rows`` writes and reads the rows)."""

from __future__ import annotations

from dataclasses import fields

from dex_agents.adapters.local.flow_changes import FLOW_CHANGES_SCHEMA
from dex_agents.ports.flow_rows import (
    ExecutionRow,
    FlowRow,
)

ATTRIBUTE_TABLE = """CREATE TABLE IF NOT EXISTS {name} (
        flow_id TEXT NOT NULL, name TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
        PRIMARY KEY (flow_id, name, key))"""
"""The table of Attribute values, with its name left open for the upgrade that rebuilds it.

A rowid table, so a value up to nearly a page long sits in its row's page, and
of a longer one SQLite keeps in the row's page what leaves its overflow pages
full. Schema version 2 kept them in a WITHOUT ROWID table, whose rows keep only
about a quarter of a page in the page and the rest on overflow pages: a 1.4 KiB
chunk took two 4 KiB pages. Files made now have 1 KiB pages (``NEW_FILE_PAGE_SIZE``).
"""

EVENT_BLOCKS_TABLE = """CREATE TABLE IF NOT EXISTS event_blocks (
        first_id INTEGER PRIMARY KEY, last_id INTEGER NOT NULL, trimmed_to INTEGER NOT NULL,
        flow_type TEXT NOT NULL, flow_id TEXT NOT NULL, events BLOB NOT NULL)"""
"""A session's sealed Stream events, IDs ``first_id`` to ``last_id`` (``event_blocks.py``).

Its events with IDs up to ``trimmed_to`` were trimmed from the Stream.
"""

EVENT_BLOCKS_SCHEMA = (
    EVENT_BLOCKS_TABLE,
    "CREATE INDEX IF NOT EXISTS event_blocks_by_flow ON event_blocks (flow_id, last_id)",
    "CREATE INDEX IF NOT EXISTS event_blocks_by_type ON event_blocks (flow_type, first_id)",
)
"""The table of sealed blocks and its indexes, made with a new file and by the upgrade to 3."""

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS flows (
        flow_id TEXT PRIMARY KEY, flow_type TEXT NOT NULL, run_id TEXT NOT NULL,
        status TEXT NOT NULL, input TEXT NOT NULL, created_at TEXT NOT NULL,
        closed_at TEXT, output TEXT, failure_reason TEXT)""",
    "CREATE INDEX IF NOT EXISTS flows_by_created_at ON flows (created_at)",
    ATTRIBUTE_TABLE.format(name="attribute_values"),
    """CREATE TABLE IF NOT EXISTS channel_messages (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, flow_id TEXT NOT NULL, channel TEXT NOT NULL,
        key TEXT NOT NULL, message_id TEXT NOT NULL UNIQUE, value TEXT NOT NULL,
        created_at TEXT NOT NULL, consumed INTEGER NOT NULL DEFAULT 0)""",
    """CREATE INDEX IF NOT EXISTS channel_messages_pending
        ON channel_messages (flow_id, channel, key, consumed, seq)""",
    """CREATE TABLE IF NOT EXISTS step_executions (
        id INTEGER PRIMARY KEY AUTOINCREMENT, flow_id TEXT NOT NULL, step_type TEXT NOT NULL,
        step_execution_id TEXT NOT NULL, input TEXT NOT NULL, status TEXT NOT NULL,
        created_at TEXT NOT NULL, options TEXT, from_step_execution_id TEXT NOT NULL,
        wait TEXT, wait_started_at TEXT, timer_at TEXT, wait_result TEXT,
        attempt INTEGER NOT NULL, attempt_started INTEGER NOT NULL, first_attempt_at TEXT,
        not_before TEXT, lease_owner TEXT, lease_expires_at TEXT, heartbeat_at TEXT,
        checkpoint TEXT, cancel_requested INTEGER NOT NULL, recovery TEXT,
        finished_at TEXT, final_event TEXT)""",
    """CREATE TABLE IF NOT EXISTS step_counters (
        flow_id TEXT NOT NULL, step_type TEXT NOT NULL, n INTEGER NOT NULL,
        PRIMARY KEY (flow_id, step_type)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS locks (
        flow_id TEXT NOT NULL, lock_name TEXT NOT NULL, execution_id INTEGER NOT NULL,
        PRIMARY KEY (flow_id, lock_name)) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS locks_by_execution ON locks (execution_id)",
    """CREATE TABLE IF NOT EXISTS stream_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT, flow_type TEXT NOT NULL, flow_id TEXT NOT NULL,
        value TEXT NOT NULL, size INTEGER NOT NULL, source TEXT NOT NULL,
        created_at TEXT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS stream_events_by_flow ON stream_events (flow_id, id)",
    "CREATE INDEX IF NOT EXISTS stream_events_by_type ON stream_events (flow_type, id)",
    *EVENT_BLOCKS_SCHEMA,
    # The running total of each Flow type's event bytes, so trimming never sums the Stream.
    """CREATE TABLE IF NOT EXISTS stream_sizes (
        flow_type TEXT PRIMARY KEY, bytes INTEGER NOT NULL) WITHOUT ROWID""",
    *FLOW_CHANGES_SCHEMA,
)

INDEXES = (
    # Each commit offers a session's waiting executions its new messages, and RPCs list
    # the executions whose wait took a message: both look a session's executions up by
    # status, which the flow_id index alone makes a scan of its whole Step history.
    # It also serves every lookup by flow_id alone, so it replaces executions_by_flow.
    """CREATE INDEX IF NOT EXISTS executions_by_flow_status
        ON step_executions (flow_id, status, id)""",
    # A worker looks up the few executions in one status: claimable, waiting with a
    # timer, running with a lease. Indexes of those rows only keep the Step history's
    # finished executions (a thousand a session) out of them. The status leads each, or
    # SQLite's planner, finding no term of the query on the index's first column, scans
    # the table in ID order instead.
    """CREATE INDEX IF NOT EXISTS claimable_executions
        ON step_executions (status, not_before) WHERE status IN ('pending_wait', 'ready')""",
    # Only executions waiting with a timer: most waits (a user's message, a tool's
    # result) have none, and a row that enters or leaves an index dirties one of its pages
    # in the commit, which is a page more in the WAL.
    """CREATE INDEX IF NOT EXISTS timed_waits
        ON step_executions (status, timer_at) WHERE status = 'waiting' AND timer_at IS NOT NULL""",
    # One index for both lookups of running executions: by owner, and the expired among
    # them. A few rows at most run at once, so the expired ones are found by reading them
    # all, and each lease that starts or ends changes one index instead of two.
    """CREATE INDEX IF NOT EXISTS running_executions
        ON step_executions (status, lease_owner) WHERE status = 'running'""",
)
"""Indexes created on every open, so a file made before they existed gets them too."""

RETIRED_INDEXES = (
    "executions_by_flow",
    "executions_claimable",
    "executions_timers",
    "executions_leases",
    "executions_by_owner",
    "waiting_timers",
    "running_leases",
    "running_by_owner",
)
"""Indexes that an index of ``INDEXES`` replaces; dropped when a file opens."""

ATTRIBUTE_KEYS_SELECT = (
    "SELECT key FROM attribute_values WHERE flow_id = ? AND name = ? ORDER BY key"
)
"""The keys of one AttributeMap's instances, in key order: read from the primary key's index."""

UPGRADE_TO_3 = (
    "ALTER TABLE attribute_values RENAME TO attribute_values_2",
    ATTRIBUTE_TABLE.format(name="attribute_values"),
    """INSERT INTO attribute_values (flow_id, name, key, value)
        SELECT flow_id, name, key, value FROM attribute_values_2 ORDER BY flow_id, name, key""",
    "DROP TABLE attribute_values_2",
    *EVENT_BLOCKS_SCHEMA,
)
"""How a file of schema version 1 or 2 becomes version 3.

Its Attribute values move to a rowid table, and the table of sealed Stream
blocks is made; its Stream events stay single rows until their session seals them.
"""

UPGRADE_TO_4 = FLOW_CHANGES_SCHEMA
"""How a file of schema version 3 becomes version 4: the change log (``flow_changes.py``)."""

FLOW_COLUMNS = tuple(f.name for f in fields(FlowRow))
EXECUTION_COLUMNS = tuple(f.name for f in fields(ExecutionRow))
EXECUTION_DATA = tuple(name for name in EXECUTION_COLUMNS if name != "id")
EXECUTION_SELECT = ", ".join(f"e.{name}" for name in EXECUTION_COLUMNS)
MESSAGE_SELECT = "seq, flow_id, channel, key, message_id, value, created_at"
EVENT_SELECT = "id, flow_type, flow_id, value, source, created_at"
CLAIMABLE = "('pending_wait', 'ready')"

CLAIMABLE_WHERE = f"""JOIN flows f ON f.flow_id = e.flow_id
    WHERE e.status IN {CLAIMABLE} AND f.status = 'running'
    AND (e.not_before IS NULL OR e.not_before <= ?) ORDER BY e.id LIMIT ?"""
"""Which executions a worker may claim (``step_executions e``): on ``claimable_executions``."""

DUE_TIMERS_WHERE = "WHERE e.status = 'waiting' AND e.timer_at <= ? ORDER BY e.id"
"""Waiting executions whose timer is due: on ``timed_waits``."""

EXPIRED_LEASES_WHERE = "WHERE e.status = 'running' AND e.lease_expires_at < ? ORDER BY e.id"
"""Running executions whose lease expired: on ``running_executions``."""

NEXT_TIMER_SELECT = f"""SELECT MIN(t) FROM (
    SELECT MIN(timer_at) AS t FROM step_executions
    WHERE status = 'waiting' AND timer_at IS NOT NULL
    UNION ALL
    SELECT MIN(e.not_before) FROM step_executions e JOIN flows f ON f.flow_id = e.flow_id
    WHERE e.status IN {CLAIMABLE} AND f.status = 'running')"""
"""When a worker next has something to do: a timer's time, or a claimable execution's."""

LEASED_WHERE = "WHERE e.lease_owner = ? AND e.status = 'running' ORDER BY e.id"
"""Running executions of one lease owner: on ``running_executions``."""
