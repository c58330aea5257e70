"""Damaged pages of the file that hold no session's values alone: an index, a table's root.

SQLite reports them as it does a damaged page under one session's values
("database disk image is malformed"), but every session's read meets them.
Until 2026-12-07 the store took a damaged page met while reading a run's values
for that run's own (``damaged_pages.py``), so a damaged index page of the
values, or the values table's root, failed the session of every Step that ran,
for good, though a repair of the file would have brought all of them back.
Now such a read fails as the file's fault, naming the file and what to do; the
worker retries it, no session fails, and a backup restored in place while the
store is open lets every session go on.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.probes import wait_until
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore, StoreCorruptError
from dex_agents.adapters.local.stalled_workers import STALLED_AFTER_TRIES, StalledWorkers
from dex_agents.adapters.local.store_errors import StoreError
from dex_agents.adapters.local.store_faults import StoreFaultLog, until_stored
from dex_agents.ports.engine import (
    ENGINE_LOGGER,
    RetryPolicy,
    Rpc,
    Step,
    StepDecision,
    StepOptions,
    dead_end,
)
from dex_agents.ports.flow_client import EXECUTE_COMPLETED_EVENT
from dex_agents.ports.step_contexts import StepContext
from tests.adapters.engine_flows import LOG, running_worker
from tests.support.damaged_files import copy_file, damage_pages_of, opened, started

SHARED_PAGES = {
    "the values' index": "sqlite_autoindex_attribute_values_1",
    "the values table's root": "attribute_values",
}


class ReadsOnce(Step[None]):
    """Reads ``Log`` and completes; one failed attempt fails its Flow run for good."""

    def options(self) -> StepOptions:
        return StepOptions(retry=RetryPolicy(maximum_attempts=1))

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        context.state.get(LOG)
        return dead_end()


class ReadsFlow:
    flow_type = "ReadsOnce"
    schema: Sequence[Any] = (LOG,)
    stream = None
    rpcs: Mapping[str, Rpc[Any, Any]] = {}

    def __init__(self) -> None:
        self.start_step: Step[Any] = ReadsOnce()
        self.steps: Sequence[Step[Any]] = (self.start_step,)


def give_values(path: Path, *flow_ids: str) -> None:
    """Store a ``Log`` for each of ``flow_ids``, so their reads go through the values table."""
    with contextlib.closing(sqlite3.connect(path)) as raw, raw:
        for flow_id in flow_ids:
            raw.execute(
                "INSERT INTO attribute_values VALUES (?, ?, '', ?)",
                (flow_id, LOG.name, f'["{flow_id}"]'),
            )


async def step_completed(client: LocalFlowClient, flow_id: str) -> bool:
    history = await client.read_step_history(flow_id)
    return [(e.event_type, e.final_attempt) for e in history] == [(EXECUTE_COMPLETED_EVENT, 1)]


@pytest.mark.parametrize("btree", SHARED_PAGES.values(), ids=SHARED_PAGES.keys())
async def test_a_damaged_page_every_session_reads_fails_none_and_a_restore_lets_them_go_on(
    tmp_path: Path, btree: str, caplog: pytest.LogCaptureFixture
) -> None:
    path, backup, flow = tmp_path / "flows.sqlite3", tmp_path / "backup.sqlite3", ReadsFlow()
    await started(path, flow, "f1", "f2")
    give_values(path, "f1", "f2")
    copy_file(path, backup)
    damage_pages_of(path, btree)
    caplog.set_level("ERROR", ENGINE_LOGGER.name)
    with opened(path, flow) as (engine, client):
        with pytest.raises(StoreCorruptError) as read:
            await client.read_attribute("f1", LOG)
        # Before, the read blamed f1's own values, and the Step that read them failed.
        assert "is damaged: SQLite found a damaged page" in str(read.value)
        async with running_worker(engine):

            def logged() -> bool:
                return "SQLite found a damaged page" in caplog.text

            assert await wait_until("the worker's report of the damage", logged)
            # Restored over the file while the store and its worker have it open.
            copy_file(backup, path)
            for flow_id in ("f1", "f2"):
                done: bool = await wait_until(
                    f"{flow_id}'s Step", partial(step_completed, client, flow_id)
                )
                assert done


FILE_PAGES = ("step_executions", "claimable_executions", "flow_changes")
"""B-trees a claim round or a commit reads: the Step executions, the index of claimable
ones, the log of which runs each commit changed."""


@pytest.mark.parametrize("btree", FILE_PAGES)
async def test_a_damaged_page_says_what_to_do_and_a_restore_lets_the_worker_go_on(
    tmp_path: Path, btree: str, caplog: pytest.LogCaptureFixture
) -> None:
    path, backup, flow = tmp_path / "flows.sqlite3", tmp_path / "backup.sqlite3", ReadsFlow()
    await started(path, flow, "f1")
    copy_file(path, backup)
    damage_pages_of(path, btree)
    caplog.set_level("ERROR", ENGINE_LOGGER.name)
    advice = f"Restore a backup over it in place (sqlite3 '{path}' \".restore BACKUP\")"
    with opened(path, flow) as (engine, client):
        with pytest.raises(StoreCorruptError) as refused:
            await client.start_flow(flow, "f2", None)
        # Before, the error named the file and the fault, and left the person there.
        assert str(refused.value).startswith(f"{path} is damaged: SQLite found a damaged page")
        assert advice in str(refused.value)
        async with running_worker(engine):

            def logged() -> bool:
                return advice in caplog.text

            assert await wait_until("the worker's report of the damage", logged)
            copy_file(backup, path)
            done: bool = await wait_until("f1's Step", partial(step_completed, client, "f1"))
            assert done
        await client.start_flow(flow, "f2", None)


def damage_values_of(path: Path, *flow_ids: str) -> None:
    """Give each of ``flow_ids`` a ``Log`` spread over overflow pages, then write garbage over
    a page in the middle of each: damage under that run's values alone."""
    texts = {flow_id: "".join(f"<{flow_id} {n:05d}>" for n in range(2000)) for flow_id in flow_ids}
    with contextlib.closing(sqlite3.connect(path)) as raw:
        with raw:
            for flow_id, text in texts.items():
                raw.execute(
                    "INSERT INTO attribute_values VALUES (?, ?, '', ?)",
                    (flow_id, LOG.name, f'["{text}"]'),
                )
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = raw.execute("PRAGMA page_size").fetchone()[0]
    data = path.read_bytes()
    with path.open("r+b") as file:
        for flow_id in flow_ids:
            page = data.index(f"<{flow_id} 01000>".encode()) // page_size
            file.seek(page * page_size)
            file.write(b"\x07" * page_size)


def read_error(store: SqliteFlowStore, flow_id: str) -> StoreError:
    """The error a read of ``flow_id``'s values raises."""
    with pytest.raises(StoreError) as failed:
        store.read(lambda tx: tx.get_singletons(flow_id, [LOG.name]))
    return failed.value


async def test_claim_rounds_that_meet_one_sessions_damaged_page_after_another_stall_nothing(
    tmp_path: Path,
) -> None:
    path, flow = tmp_path / "flows.sqlite3", ReadsFlow()
    await started(path, flow, "f1", "f2", "f3")
    damage_values_of(path, "f1", "f2", "f3")
    store = SqliteFlowStore(path)
    try:
        # As a claim round meets them: each round notes one run, the next leases its Step
        # with no state and meets the next run's page.
        errors = [read_error(store, flow_id) for flow_id in ("f1", "f2", "f3")]
    finally:
        store.close()
    assert all("Flow run" in str(error) for error in errors), errors
    stalls = StalledWorkers()
    seen: list[bool] = []

    async def claim_round() -> str:
        seen.append(stalls.stalled)
        if errors:
            raise errors.pop(0)
        return "claimed"

    faults = StoreFaultLog(ENGINE_LOGGER, "w1")
    assert await until_stored(claim_round, faults, stalled=partial(stalls.note, "w1")) == "claimed"
    # Before, three failed rounds in a row stalled the worker, whichever the page, and every
    # wait of the process raised that no Step could run, until the fourth round.
    assert seen == [False, False, False, False]


async def test_claim_rounds_that_meet_a_damaged_page_of_the_file_stall_the_worker(
    tmp_path: Path,
) -> None:
    path, flow = tmp_path / "flows.sqlite3", ReadsFlow()
    await started(path, flow, "f1")
    give_values(path, "f1")
    damage_pages_of(path, "attribute_values")
    store = SqliteFlowStore(path)
    try:
        errors = [read_error(store, "f1") for _ in range(STALLED_AFTER_TRIES)]
    finally:
        store.close()
    stalls = StalledWorkers()
    seen: list[bool] = []

    async def claim_round() -> str:
        seen.append(stalls.stalled)
        if errors:
            raise errors.pop(0)
        return "claimed"

    faults = StoreFaultLog(ENGINE_LOGGER, "w1")
    assert await until_stored(claim_round, faults, stalled=partial(stalls.note, "w1")) == "claimed"
    assert seen == [False, False, False, True]
    assert not stalls.stalled
