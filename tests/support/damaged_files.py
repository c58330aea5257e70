"""SQLite files damaged page by page, restored in place, and engines opened on them."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.ports.engine import FlowDefinition

POLL = timedelta(milliseconds=20)
"""How often the engines opened here look for work."""


def damage_pages_of(path: Path, btree: str) -> None:
    """Write garbage over every page of ``btree`` (a table or an index) in the file."""
    with contextlib.closing(sqlite3.connect(path)) as raw:
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = raw.execute("PRAGMA page_size").fetchone()[0]
        pages = [p for (p,) in raw.execute("SELECT pageno FROM dbstat WHERE name = ?", (btree,))]
    assert pages
    with path.open("r+b") as file:
        for page in pages:
            file.seek((page - 1) * page_size)
            file.write(b"\x07" * page_size)


def copy_file(source: Path, target: Path) -> None:
    """Copy the database at ``source`` over ``target`` through SQLite's backup, as
    ``sqlite3 TARGET ".restore SOURCE"`` does: in place, while others have it open."""
    with (
        contextlib.closing(sqlite3.connect(source)) as good,
        contextlib.closing(sqlite3.connect(target)) as damaged,
    ):
        good.backup(damaged)


@contextlib.contextmanager
def opened(path: Path, flow: FlowDefinition) -> Iterator[tuple[LocalEngine, LocalFlowClient]]:
    """An engine on the file at ``path`` and a client of it; both closed on the way out,
    as a program that ends is."""
    store = SqliteFlowStore(path)
    engine = LocalEngine(store, [flow], poll_interval=POLL)
    try:
        yield engine, LocalFlowClient(engine)
    finally:
        engine.close()
        store.close()


async def started(path: Path, flow: FlowDefinition, *flow_ids: str) -> None:
    """Start a run of ``flow`` for each of ``flow_ids`` in the file at ``path``, then close it."""
    with opened(path, flow) as (_, client):
        for flow_id in flow_ids:
            await client.start_flow(flow, flow_id, None)
