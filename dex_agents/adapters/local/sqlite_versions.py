"""Which schema an SQLite flow store file has, and how an older one is brought up to date.

A file records its schema version in ``PRAGMA user_version``. A new file gets
the whole schema; a file of an older version this module knows is upgraded in
place when it opens, its values and events read as they are; a newer file is
refused, since this dex-agents would write what the newer one does not expect.
Indexes are checked on every open, so a file made before one existed gets it
and loses the indexes it replaces.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from dex_agents.adapters.local.flow_changes import UPGRADE_TO_6
from dex_agents.adapters.local.sqlite_schema import (
    INDEXES,
    RETIRED_INDEXES,
    SCHEMA,
    UPGRADE_TO_3,
    UPGRADE_TO_4,
)
from dex_agents.adapters.local.store_errors import StoreCorruptError, StoreVersionError

SCHEMA_VERSION = 6
"""The schema version this module writes to ``PRAGMA user_version``; a newer file is refused.

Version 2 may store long values and Stream events compressed (``stored_text``),
which a dex-agents that reads version 1 would take for damage. Version 3 keeps
Attribute values in a rowid table (``ATTRIBUTE_TABLE``). Version 4 logs which
Flow runs each commit changed (``flow_changes``): a dex-agents that wrote to it
without logging would leave other processes serving rows they kept from before.
Version 5 logs Channel message writes too, since a connection keeps a run's
waiting messages: a dex-agents of version 4 queueing a user message would leave
another process's worker not seeing it. Version 6 logs, for each run, the newest
commit that wrote its row or an Attribute value (``flow_changes.state``), and a
connection keeps those of a run that other commits changed otherwise: a
dex-agents of version 5 writing a value would leave it kept as it was.
"""

NEW_FILE_PAGE_SIZE = 1024
"""The page size, in bytes, of a file this store creates; a file keeps the one it was made with.

A commit writes every page it changed to the WAL whole, and a turn changes
80 to 100 pages in 5 commits, most of them for a row or two: with SQLite's
default of 4 KiB a turn wrote and synced 327 KB, with 1 KiB pages 103 KB. Side
by side the in-process turn took 4.6% less time and a no-op Step 9% less, and
after 1,000 turns the file held 10% less: a long value's overflow pages are
full but its last, and a 1 KiB last page wastes less than a 4 KiB one. Any
page size reads alike, so files made before keep their 4 KiB pages.
"""

UPGRADED_VERSIONS = (1, 2, 3, 4, 5)
"""Versions upgraded when opened, by ``UPGRADE_TO_3`` (1 and 2), ``UPGRADE_TO_4`` (1 to 3)
and ``UPGRADE_TO_6`` (4 and 5): their values and events read as they are."""


def schema_version(connection: sqlite3.Connection, path: Path) -> int:
    """The file's schema version; ``StoreVersionError`` when it is newer than ``SCHEMA_VERSION``."""
    version = int(connection.execute("PRAGMA user_version").fetchall()[0][0])
    if version > SCHEMA_VERSION:
        raise StoreVersionError(
            f"the flow store {path} has schema version {version}, newer than "
            f"{SCHEMA_VERSION}, the newest this dex-agents reads; upgrade dex-agents"
        )
    return version


def create_or_upgrade(connection: sqlite3.Connection, path: Path) -> None:
    """Give the file the schema of ``SCHEMA_VERSION``, inside a write transaction.

    An empty file gets the whole schema and a file of ``UPGRADED_VERSIONS`` its
    upgrades; an SQLite file with tables and no version is not a flow store
    (``StoreCorruptError``).
    """
    # Checked again under the write lock: another process may have created it meanwhile.
    version = schema_version(connection, path)
    if version == SCHEMA_VERSION:
        return
    if version in UPGRADED_VERSIONS:
        upgrades = (
            *(UPGRADE_TO_3 if version < 3 else ()),
            *(UPGRADE_TO_4 if version < 4 else ()),
            # Version 4's log is made with the column already.
            *(UPGRADE_TO_6 if 4 <= version < 6 else ()),
        )
        for statement in upgrades:
            connection.execute(statement)
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        return
    if connection.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
        raise StoreCorruptError(
            f"{path} is an SQLite database but not a dex-agents flow store "
            "(it has tables and no schema version)"
        )
    for statement in SCHEMA:
        connection.execute(statement)
    connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def has_indexes(connection: sqlite3.Connection) -> bool:
    """Whether the file has every index of ``INDEXES`` and none of ``RETIRED_INDEXES``."""
    names = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    return all(statement.split()[5] in names for statement in INDEXES) and not any(
        name in names for name in RETIRED_INDEXES
    )


def create_indexes(connection: sqlite3.Connection) -> None:
    """Create the missing indexes of ``INDEXES`` and drop the retired ones, inside a write transaction."""
    for statement in INDEXES:
        connection.execute(statement)
    for name in RETIRED_INDEXES:
        connection.execute(f"DROP INDEX IF EXISTS {name}")
