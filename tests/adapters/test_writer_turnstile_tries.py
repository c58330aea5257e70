"""A write's try (``try_run_batch``, how a worker's commits begin) passes the turnstile as a wait does."""

from __future__ import annotations

from pathlib import Path

import pytest

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.ports.flow_store import StoreWouldWaitError
from tests.adapters.flow_store_rows import add_flows, flow, held_flock
from tests.adapters.test_writer_turnstile import take_rank


@pytest.mark.parametrize("client", [True, False])
def test_a_try_never_goes_ahead_of_a_writer_at_the_turnstile_and_lets_it_go(
    tmp_path: Path, client: bool
) -> None:
    # A worker's commits begin by try_begin's own path: the turnstile's rules hold there too.
    path = tmp_path / "flows.sqlite3"
    store = SqliteFlowStore(path, client=client)
    add_flows(store, flow("f1"))
    writers = tmp_path / "flows.sqlite3-writers"
    try:
        # As a writer waiting for the lock holds it; the write lock itself is free.
        with held_flock(writers) as let_go:
            with pytest.raises(StoreWouldWaitError):
                store.try_run_batch([take_rank("ahead")])
            let_go()
            store.try_run_batch([take_rank("after")])
        # Each try let go of the turnstile once BEGIN returned: another writer passes it.
        with held_flock(writers):
            pass
        assert store.read(lambda tx: tx.get_value("f1", "ahead", "")) is None
        assert store.read(lambda tx: tx.get_value("f1", "after", "")) == "1"
    finally:
        store.close()
