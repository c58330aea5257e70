"""Opening the SQLite flow store's file: its connections, their settings, and its errors.

What every connection of ``SqliteFlowStore`` shares: how it is opened, how the
file is set up for the store (WAL, sync level, the schema and its indexes), how
one transaction runs on it, and how SQLite's errors become the store's
(``store_errors``), each naming the file.
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

from dex_agents.adapters.local.damaged_values import scrub_undecodable_text
from dex_agents.adapters.local.sqlite_versions import (
    NEW_FILE_PAGE_SIZE,
    SCHEMA_VERSION,
    create_indexes,
    create_or_upgrade,
    has_indexes,
    schema_version,
)
from dex_agents.adapters.local.store_errors import StoreBusyError, StoreCorruptError, StoreError
from dex_agents.adapters.local.wal_mode import enter_wal
from dex_agents.adapters.local.wal_sync import WalSync

R = TypeVar("R")


def connect(path: Path, busy_timeout: timedelta) -> sqlite3.Connection:
    """A connection to the file at ``path`` that any thread may use, in autocommit mode:
    the store begins and ends every transaction itself."""
    return sqlite3.connect(
        path,
        timeout=busy_timeout.total_seconds(),
        isolation_level=None,
        check_same_thread=False,
    )


def configure(
    connection: sqlite3.Connection, path: Path, busy_timeout: timedelta, wal: WalSync
) -> None:
    """Set the file up for the store on its first connection: WAL mode, the sync level,
    and the schema and its indexes, created or upgraded (each synced through ``wal``)."""
    # Before anything writes the file's header: a file that has one keeps its size.
    connection.execute(f"PRAGMA page_size = {NEW_FILE_PAGE_SIZE}")
    mode = enter_wal(connection, busy_timeout.total_seconds())
    if mode.lower() != "wal":
        raise StoreError(
            f"the flow store {path} needs write-ahead logging, but SQLite kept "
            f"journal_mode {mode!r}; keep the file on a local file system"
        )
    # A durable commit is synced by WalSync once COMMIT has let the write lock go.
    connection.execute("PRAGMA synchronous=NORMAL")
    # A savepoint (each work of a batch runs in one) keeps the pages it changes in a
    # journal of its own: by default a temporary file, made and deleted three times a
    # tool turn. That journal only undoes a savepoint within its live transaction, so
    # keeping it in memory loses nothing a crash could need.
    connection.execute("PRAGMA temp_store=MEMORY")
    if schema_version(connection, path) != SCHEMA_VERSION:
        transact(connection, functools.partial(create_or_upgrade, path=path))
        wal.sync()
    if not has_indexes(connection):
        transact(connection, create_indexes)
        wal.sync()


def transact(
    connection: sqlite3.Connection,
    work: Callable[[sqlite3.Connection], R],
    begin: str | Callable[[sqlite3.Connection], None] = "BEGIN IMMEDIATE",
) -> R:
    """Run ``work`` in one transaction that ``begin`` opens (a statement, or a function
    that runs it) and commit it; roll back if anything raises."""
    if isinstance(begin, str):
        connection.execute(begin)
    else:
        begin(connection)
    try:
        result = work(connection)
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                connection.execute("ROLLBACK")
        raise
    return result


def still_in_transaction(connection: sqlite3.Connection) -> sqlite3.Connection:
    """``connection``, whose transaction still runs; ``sqlite3.OperationalError`` when SQLite
    rolled it back after an error.

    On some errors (an I/O error, a full disk, an interrupted write) SQLite rolls the
    whole transaction back, and the connection is in autocommit mode again: a statement
    then would commit on its own, outside the transaction whose other writes were
    undone. Until 2026-12-07 one did whenever a work took such an error for another.
    """
    if not connection.in_transaction:
        raise sqlite3.OperationalError(
            "SQLite rolled the transaction back after an error; nothing of it was stored"
        )
    return connection


def repair_advice(path: Path) -> str:
    """What a person does about a damaged page of the file at ``path``.

    Said in the error itself: the store cannot repair the file, waiting does not
    either, and the person who reads the error (a worker's log, a client's
    traceback, ``dex-agents sessions``) needs the next step, not only the fault.
    """
    return (
        f"Restore a backup over it in place (sqlite3 '{path}' \".restore BACKUP\"): the"
        " programs that have it open go on. With no backup, stop them and copy what"
        f" still reads into a new file (sqlite3 '{path}' .recover, or .dump)"
    )


def translate_error(error: sqlite3.Error, path: Path, busy_timeout: timedelta) -> StoreError:
    """The store's error for a failure of SQLite on the file at ``path``."""
    code = getattr(error, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return StoreBusyError(
            f"the flow store {path} stayed locked by another connection for longer than "
            f"the busy timeout ({busy_timeout.total_seconds():g} s); retry later"
        )
    if primary == sqlite3.SQLITE_CANTOPEN:
        return StoreError(f"cannot open the flow store {path}: {error}")
    if "Could not decode to UTF-8" in str(error):
        # SQLite stores text as it was given: a value that is no longer UTF-8 was damaged.
        # Its text may be a secret: the message, and the chain that keeps the error, say
        # which column it is, not what it holds.
        scrub_undecodable_text(error)
        return StoreCorruptError(f"{path} is damaged: a stored value {error}")
    if primary == sqlite3.SQLITE_CORRUPT:
        # A damaged page of a dex-agents file, not some other file: said as what it is.
        return StoreCorruptError(
            f"{path} is damaged: SQLite found a damaged page ({error}). {repair_advice(path)}"
        )
    if primary == sqlite3.SQLITE_NOTADB:
        return StoreCorruptError(f"{path} is not a usable dex-agents flow store database: {error}")
    return StoreError(f"the flow store {path} failed: {error}")
