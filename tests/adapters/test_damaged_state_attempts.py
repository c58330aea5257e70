"""A Step whose stored state cannot be read fails its attempt, naming the value, and never spins.

A value damaged in the file (bytes that are no UTF-8, a compressed value that no
longer inflates) makes the claim lease the Step with no snapshot; the worker
reads the state again once, and when that fails too the attempt fails with
``UnreadableStateError``, naming the Attribute and the Flow run, under the
Step's retry policy. Until 2026-12-07 the worker took that read for a passing
store fault and tried it again for ever, holding a slot and renewing the lease.
Nothing stored is changed, so a person who repairs the value lets the Flow go on.
"""

from __future__ import annotations

import contextlib
import json
import random
import sqlite3
import string
from collections.abc import Iterator, Mapping, Sequence
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.probes import wait_until
from dex_agents.adapters.local.sqlite_store import StoreCorruptError
from dex_agents.ports.engine import RetryPolicy, Rpc, Step, StepDecision, StepOptions, dead_end
from dex_agents.ports.flow_client import EXECUTE_COMPLETED_EVENT, EXECUTE_FAILED_EVENT
from dex_agents.ports.flow_rows import FlowStatus
from dex_agents.ports.step_contexts import StepContext
from tests.adapters.engine_flows import LOG, running_worker
from tests.support.damaged_files import opened, started
from tests.support.flow_runs import wait_for_status

DAMAGES = {
    "not-utf8": "CAST(x'ff22' AS TEXT)",
    "not-inflating": "x'01ffffffff'",
}


class Reads(Step[None]):
    """Reads ``Log`` and completes; retried quickly, as often as a test needs."""

    attempts = 2

    def options(self) -> StepOptions:
        return StepOptions(
            retry=RetryPolicy(
                maximum_attempts=Reads.attempts,
                initial_interval=timedelta(milliseconds=50),
                backoff_coefficient=1,
            )
        )

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        context.state.get(LOG)
        return dead_end()


class ReadsFlow:
    flow_type = "Reads"
    schema: Sequence[Any] = (LOG,)
    stream = None
    rpcs: Mapping[str, Rpc[Any, Any]] = {}

    def __init__(self) -> None:
        self.start_step: Step[Any] = Reads()
        self.steps: Sequence[Step[Any]] = (self.start_step,)


def stored(path: Path, flow_id: str) -> list[tuple[str, bytes]]:
    """``flow_id``'s stored values as the file holds them, bytes for bytes."""
    with contextlib.closing(sqlite3.connect(path)) as raw:
        rows = raw.execute(
            "SELECT name, CAST(value AS BLOB) FROM attribute_values WHERE flow_id = ?",
            (flow_id,),
        ).fetchall()
    return sorted(rows)


def damage(path: Path, flow_id: str, value_sql: str) -> None:
    with contextlib.closing(sqlite3.connect(path)) as raw, raw:
        raw.execute(
            "INSERT INTO attribute_values VALUES (?, ?, '', " + value_sql + ")",
            (flow_id, LOG.name),
        )


def repair(path: Path, flow_id: str) -> None:
    with contextlib.closing(sqlite3.connect(path)) as raw, raw:
        raw.execute(
            "UPDATE attribute_values SET value = ? WHERE flow_id = ? AND name = ?",
            ('["repaired"]', flow_id, LOG.name),
        )


async def step_completed(client: LocalFlowClient, flow_id: str) -> bool:
    """Whether ``flow_id``'s one Step has completed."""
    history = await client.read_step_history(flow_id)
    return [e.event_type for e in history] == [EXECUTE_COMPLETED_EVENT]


async def attempted_again(engine: LocalEngine, flow_id: str) -> bool:
    """Whether ``flow_id``'s Step has had a second attempt (the first failed)."""
    (row,) = await engine.read(lambda tx: tx.flow_executions(flow_id))
    return row.attempt >= 2


@pytest.fixture
def engine_flow(tmp_path: Path) -> Iterator[tuple[LocalEngine, ReadsFlow]]:
    flow = ReadsFlow()
    with opened(tmp_path / "flows.sqlite3", flow) as (engine, _):
        yield engine, flow


@pytest.mark.parametrize("value_sql", DAMAGES.values(), ids=DAMAGES.keys())
async def test_an_attempt_that_cannot_read_its_state_fails_under_its_retry_policy(
    tmp_path: Path, engine_flow: tuple[LocalEngine, ReadsFlow], value_sql: str
) -> None:
    (engine, flow), path = engine_flow, tmp_path / "flows.sqlite3"
    client = LocalFlowClient(engine)
    Reads.attempts = 2
    await client.start_flow(flow, "damaged", None)
    damage(path, "damaged", value_sql)
    before = stored(path, "damaged")
    async with running_worker(engine):
        await client.start_flow(flow, "whole", None)
        # Before, the worker read the state again for ever and the Flow never ended.
        await wait_for_status(client, "damaged", FlowStatus.FAILED)
        history = await client.read_step_history("whole")
        assert [e.event_type for e in history] == [EXECUTE_COMPLETED_EVENT]
    history = await client.read_step_history("damaged")
    assert [(e.event_type, e.final_attempt) for e in history] == [(EXECUTE_FAILED_EVENT, 2)]
    (row,) = engine.store.read(lambda tx: [tx.get_flow("damaged")])
    assert row is not None
    assert row.failure_reason is not None
    assert "UnreadableStateError" in row.failure_reason
    assert "Attribute 'Log'" in row.failure_reason
    assert "Flow run 'damaged'" in row.failure_reason
    assert stored(path, "damaged") == before, "the damaged value was changed"


async def test_a_repaired_value_lets_the_step_go_on(
    tmp_path: Path, engine_flow: tuple[LocalEngine, ReadsFlow]
) -> None:
    (engine, flow), path = engine_flow, tmp_path / "flows.sqlite3"
    client = LocalFlowClient(engine)
    Reads.attempts = 1000
    await client.start_flow(flow, "f1", None)
    damage(path, "f1", DAMAGES["not-utf8"])
    async with running_worker(engine):
        again: bool = await wait_until("a failed attempt", partial(attempted_again, engine, "f1"))
        assert again
    # A person repairs the value while no worker runs.
    repair(path, "f1")
    async with running_worker(engine):
        done: bool = await wait_until("the Step's end", partial(step_completed, client, "f1"))
        assert done


async def test_a_damaged_flow_row_leaves_the_other_sessions_steps_claimed(
    tmp_path: Path,
) -> None:
    path, flow = tmp_path / "flows.sqlite3", ReadsFlow()
    await started(path, flow, "damaged", "whole")
    with contextlib.closing(sqlite3.connect(path)) as raw, raw:
        raw.execute("UPDATE flows SET input = CAST(x'ff' AS TEXT) WHERE flow_id = 'damaged'")
    # Opened after the damage, as a restarted program is: nothing kept hides it.
    with opened(path, flow) as (engine, client):
        async with running_worker(engine):
            # Before, each claim round failed on the damaged row and the worker retried
            # it for ever: the whole session's Step never ran.
            completed = partial(step_completed, client, "whole")
            done: bool = await wait_until("the whole session's Step", completed)
            assert done


def _damage_a_page_of(path: Path, flow_id: str) -> None:
    """Give ``flow_id`` a ``Log`` spread over overflow pages, then write garbage over one."""
    text = "".join(random.Random(7).choice(string.ascii_letters) for _ in range(20_000))
    with contextlib.closing(sqlite3.connect(path)) as raw:
        with raw:
            raw.execute(
                "INSERT INTO attribute_values VALUES (?, ?, '', ?)",
                (flow_id, LOG.name, json.dumps([text])),
            )
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = raw.execute("PRAGMA page_size").fetchone()[0]
        pages = raw.execute(
            "SELECT pageno FROM dbstat WHERE name = 'attribute_values' AND pagetype = 'overflow'"
        ).fetchall()
    assert len(pages) > 4
    (page,) = pages[len(pages) // 2]
    with path.open("r+b") as file:
        file.seek((page - 1) * page_size)
        file.write(b"\x07" * page_size)


async def test_a_session_whose_state_is_on_a_damaged_page_fails_alone(tmp_path: Path) -> None:
    path, flow = tmp_path / "flows.sqlite3", ReadsFlow()
    Reads.attempts = 2
    await started(path, flow, "damaged", "whole")
    _damage_a_page_of(path, "damaged")
    with opened(path, flow) as (engine, client):
        async with running_worker(engine):

            async def ended() -> bool:
                damaged = (await client.describe_flow("damaged")).status
                return await step_completed(client, "whole") and damaged == FlowStatus.FAILED

            # Before, SQLite's "database disk image is malformed" left the claim round's
            # transaction unable to write, and the worker retried the round for ever as a
            # passing fault: no Step of any session was claimed again.
            done: bool = await wait_until("both sessions' ends", ended)
            assert done
        (row,) = engine.store.read(lambda tx: [tx.get_flow("damaged")])
        assert row is not None
        assert row.failure_reason is not None
        assert "UnreadableStateError" in row.failure_reason
        assert "Flow run 'damaged' are on a damaged page" in row.failure_reason
        # A client's read of it says the file is damaged, and where, and breaks nothing.
        with pytest.raises(StoreCorruptError, match=r"is damaged: .*Flow run 'damaged'"):
            await client.read_attribute("damaged", LOG)
        assert await client.read_attribute("whole", LOG) is None


async def test_a_session_on_a_damaged_page_goes_on_once_the_file_is_repaired_in_place(
    tmp_path: Path,
) -> None:
    path, backup, flow = tmp_path / "flows.sqlite3", tmp_path / "backup.sqlite3", ReadsFlow()
    Reads.attempts = 1000
    await started(path, flow, "f1")
    with (
        contextlib.closing(sqlite3.connect(path)) as good,
        contextlib.closing(sqlite3.connect(backup)) as copy,
    ):
        good.backup(copy)
    _damage_a_page_of(path, "f1")
    with opened(path, flow) as (engine, client):
        async with running_worker(engine):
            refused = partial(attempted_again, engine, "f1")
            failing: bool = await wait_until("an attempt refused its damaged page", refused)
            assert failing
        # A person restores the backup over the file, in place, while the store stays open.
        with (
            contextlib.closing(sqlite3.connect(backup)) as copy,
            contextlib.closing(sqlite3.connect(path)) as damaged,
        ):
            copy.backup(damaged)
        # Before, the store refused the run's values for as long as it was open.
        async with running_worker(engine):
            completed = partial(step_completed, client, "f1")
            done: bool = await wait_until("the repaired session's Step", completed)
            assert done
