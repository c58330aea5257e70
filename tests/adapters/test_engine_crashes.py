"""Crash tests of the embedded engine: real worker processes are killed with SIGKILL.

Each test runs workers as child processes (``tests.adapters.engine_worker``) on
one SQLite file, with a 1 s lease, and acts as their client from this process:
it starts Flows, sends messages and reads outcomes through RPCs and the store.
Steps stop at file gates, so a worker is killed at an exact point; every
invocation is recorded as ``<pid> <step_execution_id> <attempt>`` in
``invocations.log``, so the tests see what really ran, where, and how often.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

from dex_agents.adapters.local import claims, transitions
from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.adapters.local.worker import LocalWorker
from dex_agents.domain.wire import to_json
from dex_agents.ports.errors import FlowNotFoundError, RpcLockConflictError
from dex_agents.ports.flow_client import EXECUTE_COMPLETED_EVENT
from dex_agents.ports.flow_rows import ExecutionRow, ExecutionStatus
from dex_agents.ports.flow_store import BatchOutcome, FlowStore, StoreTransaction, run_each
from tests.adapters.engine_flows import EngineTestFlow, Probe
from tests.adapters.engine_worker import (
    LEASE_ENV,
    MAX_TASKS_ENV,
    POLL_ENV,
    WORKER_ID_ENV,
    ready_file,
)

R = TypeVar("R")

REPO_ROOT = Path(__file__).resolve().parents[2]
DEADLINE_SECONDS = 10.0


@dataclass(frozen=True)
class Invocation:
    """One line of ``invocations.log``."""

    pid: int
    step_execution_id: str
    attempt: int


@dataclass
class Crash:
    """A client of the database shared with worker processes that a test starts and kills."""

    db_path: Path
    state_dir: Path
    flow: EngineTestFlow
    engine: LocalEngine
    client: LocalFlowClient
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    worker_env: dict[str, str] = field(default_factory=dict)

    async def start_worker(self) -> subprocess.Popen[bytes]:
        """Start a worker process in its own process group and wait until its worker runs."""
        process = self._spawn()

        def ready() -> bool:
            if process.poll() is not None:
                pytest.fail(f"worker {process.pid} exited with {process.returncode}\n{self.logs()}")
            return ready_file(self.state_dir, process.pid).exists()

        await self.eventually(f"worker {process.pid} to run", ready)
        return process

    def _spawn(self) -> subprocess.Popen[bytes]:
        number = len(self.workers) + 1
        env = {**os.environ, LEASE_ENV: "1", POLL_ENV: "0.05", **self.worker_env}
        with (self.state_dir / f"worker-{number}.out").open("wb") as output:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.adapters.engine_worker",
                    str(self.db_path),
                    str(self.state_dir),
                ],
                cwd=REPO_ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.workers.append(process)
        return process

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        """SIGKILL a worker's process group and reap it."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    def kill_all(self) -> None:
        """SIGKILL every worker still running."""
        for process in self.workers:
            if process.poll() is None:
                self.kill(process)

    def logs(self) -> str:
        """The workers' output, for a failure message."""
        parts = []
        for path in sorted(self.state_dir.glob("worker-*.out")):
            text = path.read_text(encoding="utf-8", errors="replace")
            parts.append(f"--- {path.name}\n{text[-4000:]}")
        return "\n".join(parts)

    async def eventually(
        self, description: str, check: Callable[[], bool | Awaitable[bool]]
    ) -> None:
        """Poll ``check`` until it holds; fail with the workers' output after the deadline."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE_SECONDS
        while True:
            outcome = check()
            if inspect.isawaitable(outcome):
                outcome = await outcome
            if outcome:
                return
            if loop.time() > deadline:
                pytest.fail(f"timed out waiting for {description}\n{self.logs()}")
            await asyncio.sleep(0.02)

    def read(self, name: str) -> str | None:
        """A gate file's text, or ``None`` before it exists."""
        path = self.state_dir / name
        return path.read_text(encoding="utf-8") if path.exists() else None

    def release(self, name: str) -> None:
        """Create a gate's release file."""
        (self.state_dir / name).write_text("go", encoding="utf-8")

    def invocations(self, of: str = "") -> list[Invocation]:
        """The recorded invocations, in order: all, of one Step type (``"Work-"``) or of one
        Step execution (``"Work-3"``)."""
        path = self.state_dir / "invocations.log"
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        records = [Invocation(int(p), s, int(a)) for p, s, a in (line.split() for line in lines)]
        if of.endswith("-"):
            return [record for record in records if record.step_execution_id.startswith(of)]
        return [record for record in records if of in ("", record.step_execution_id)]

    async def log(self, flow_id: str) -> tuple[str, ...]:
        """The Flow run's ``Log`` Attribute."""
        result: tuple[str, ...] = await self.client.invoke_rpc(self.flow, flow_id, "read_log", None)
        return result

    async def logged(self, flow_id: str, entry: str) -> None:
        """Wait until the Flow run's log holds ``entry``."""

        async def holds() -> bool:
            return entry in await self.log(flow_id)

        await self.eventually(f"{entry!r} in the log of {flow_id}", holds)

    async def execution(self, flow_id: str, step_execution_id: str) -> ExecutionRow:
        """A Step execution's row as committed now."""

        def find(tx: StoreTransaction) -> ExecutionRow:
            rows = tx.flow_executions(flow_id)
            (row,) = [row for row in rows if row.step_execution_id == step_execution_id]
            return row

        return await self.engine.run(find)

    async def waiting(self, flow_id: str, step_execution_id: str) -> None:
        """Wait until a Step execution's wait is stored and nothing holds it."""

        async def stored() -> bool:
            with contextlib.suppress(ValueError):
                row = await self.execution(flow_id, step_execution_id)
                return row.status is ExecutionStatus.WAITING
            return False

        await self.eventually(f"{step_execution_id} of {flow_id} to wait", stored)

    async def history(self, flow_id: str) -> list[tuple[str, int, str]]:
        """``(step_execution_id, final_attempt, event_type)`` of each finished Step, oldest first."""
        entries = await self.client.read_step_history(flow_id)
        return [(e.step_execution_id, e.final_attempt, e.event_type) for e in entries]


@pytest.fixture
async def crash(tmp_path: Path) -> AsyncIterator[Crash]:
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    db_path = tmp_path / "engine.sqlite3"
    # The client opens (and so creates) the store first; it runs no worker.
    store = SqliteFlowStore(db_path)
    flow = EngineTestFlow(Probe(state_dir=state_dir))
    engine = LocalEngine(store, [flow], poll_interval=timedelta(milliseconds=20))
    crash = Crash(db_path, state_dir, flow, engine, LocalFlowClient(engine))
    try:
        yield crash
    finally:
        crash.kill_all()
        engine.close()
        store.close()


def _completed(*executions: tuple[str, int]) -> list[tuple[str, int, str]]:
    return [(sid, attempt, EXECUTE_COMPLETED_EVENT) for sid, attempt in executions]


async def test_a_started_attempt_killed_at_its_gate_fails_and_attempt_2_runs_elsewhere(
    crash: Crash,
) -> None:
    first = await crash.start_worker()
    await crash.client.start_flow(crash.flow, "s1", "gate")
    # Gated heartbeats before it writes the gate: attempt 1 has started.
    await crash.eventually("attempt 1 at the gate", lambda: crash.read("gate.reached") == "1")
    crash.kill(first)
    second = await crash.start_worker()
    await crash.eventually("attempt 2 at the gate", lambda: crash.read("gate.reached") == "2")
    crash.release("gate.release")
    await crash.logged("s1", "gated:2")

    assert await crash.log("s1") == ("start:gate", "gated:2")
    assert crash.invocations("Gated-") == [
        Invocation(first.pid, "Gated-1", 1),
        Invocation(second.pid, "Gated-1", 2),
    ]
    assert crash.invocations("Start-") == [Invocation(first.pid, "Start-1", 1)]
    assert await crash.history("s1") == _completed(("Start-1", 1), ("Gated-1", 2))


async def test_an_attempt_killed_before_it_started_runs_again_as_the_same_attempt(
    crash: Crash,
) -> None:
    first = await crash.start_worker()
    await crash.client.start_flow(crash.flow, "s1", "early-gate")
    # EarlyGated stops at its gate before any heartbeat or event.
    await crash.eventually(
        "attempt 1 at the early gate", lambda: crash.read("early.reached") == f"{first.pid} 1"
    )
    crash.kill(first)
    second = await crash.start_worker()
    await crash.eventually(
        "attempt 1 again on the new worker",
        lambda: crash.read("early.reached") == f"{second.pid} 1",
    )
    crash.release("early.release")
    await crash.logged("s1", "early-gated:1")

    assert await crash.log("s1") == ("start:early-gate", "early-gated:1")
    assert crash.invocations("EarlyGated-") == [
        Invocation(first.pid, "EarlyGated-1", 1),
        Invocation(second.pid, "EarlyGated-1", 1),
    ]
    assert await crash.history("s1") == _completed(("Start-1", 1), ("EarlyGated-1", 1))


async def test_an_rpc_takes_the_lock_of_a_killed_worker_once_its_lease_lapses(
    crash: Crash,
) -> None:
    first = await crash.start_worker()
    await crash.client.start_flow(crash.flow, "s1", "gated-lock")
    await crash.eventually("the lock holder at its gate", lambda: crash.read("lock.reached") == "1")
    crash.kill(first)

    # No worker runs, so no claim round recovers the dead attempt's lease: the RPC does
    # once it lapsed (1 s), as Dex frees the lock. Before, it was refused until a worker ran.
    async def written() -> bool:
        try:
            return bool(await crash.client.invoke_rpc(crash.flow, "s1", "guarded_write", "rpc"))
        except RpcLockConflictError:
            return False

    await crash.eventually("the RPC past the dead worker's lock", written)
    # Attempt 1 had started, so it failed; a worker runs attempt 2 later.
    row = await crash.execution("s1", "GatedLock-1")
    assert (row.status, row.attempt, row.lease_owner) == (ExecutionStatus.READY, 2, None)


async def test_a_durable_timer_fires_after_its_worker_was_killed(crash: Crash) -> None:
    first = await crash.start_worker()
    await crash.client.start_flow(crash.flow, "s1", "timer:1.5")
    await crash.waiting("s1", "Sleep-1")
    crash.kill(first)
    fire_at = (await crash.execution("s1", "Sleep-1")).timer_at
    assert fire_at is not None
    # The Timer comes due while no worker runs; a worker started later still fires it.
    await crash.eventually("the timer to come due", lambda: crash.engine.now() > fire_at)
    assert (await crash.execution("s1", "Sleep-1")).status is ExecutionStatus.WAITING
    await crash.start_worker()
    await crash.logged("s1", "woke:timer")

    assert await crash.log("s1") == ("start:timer:1.5", "woke:timer")
    assert crash.invocations() == [Invocation(first.pid, "Start-1", 1)]
    assert await crash.history("s1") == _completed(("Start-1", 1), ("Sleep-1", 1))


async def test_messages_sent_while_no_worker_runs_are_consumed_once_in_order(
    crash: Crash,
) -> None:
    await crash.start_worker()
    await crash.client.start_flow(crash.flow, "s1", "inbox")
    await crash.client.invoke_rpc(crash.flow, "s1", "send", "a")
    await crash.logged("s1", "message:a")
    await crash.waiting("s1", "AwaitMessage-2")
    crash.kill_all()  # the worker is idle: nothing but a stored wait remains
    for text in ("b", "c", "d"):
        assert await crash.client.invoke_rpc(crash.flow, "s1", "send", text) is True
    assert await crash.log("s1") == ("start:inbox", "message:a")
    await crash.start_worker()
    await crash.logged("s1", "message:d")
    await crash.waiting("s1", "AwaitMessage-5")

    assert await crash.log("s1") == (
        "start:inbox",
        "message:a",
        "message:b",
        "message:c",
        "message:d",
    )
    assert await crash.client.invoke_rpc(crash.flow, "s1", "pending", None) == ()
    assert await crash.history("s1") == _completed(
        ("Start-1", 1), *((f"AwaitMessage-{n}", 1) for n in range(1, 5))
    )


async def test_a_worker_killed_holding_no_lease_leaves_no_mark_behind(crash: Crash) -> None:
    # As a session waiting for its user: the worker holds no lease when it is killed, so no
    # recovery of its leases removes its mark; it stayed beside the database for ever.
    crash.worker_env[LEASE_ENV] = "3600"
    first = await crash.start_worker()
    await crash.client.start_flow(crash.flow, "s1", "inbox")
    await crash.waiting("s1", "AwaitMessage-1")
    marks = crash.db_path.parent / "engine.sqlite3-workers"
    (killed,) = marks.iterdir()
    crash.kill(first)
    await crash.start_worker()
    await crash.eventually("the killed worker's mark removed", lambda: not killed.exists())
    assert len(list(marks.iterdir())) == 1  # the live worker's stays
    await crash.client.invoke_rpc(crash.flow, "s1", "send", "a")
    await crash.logged("s1", "message:a")


async def test_two_worker_processes_share_one_database_and_run_each_step_once(
    crash: Crash,
) -> None:
    crash.worker_env[MAX_TASKS_ENV] = "2"
    one = await crash.start_worker()
    two = await crash.start_worker()
    # Four gated Steps fill both workers' two slots: each process must run two.
    await crash.client.start_flow(crash.flow, "gated", "gated-fan-out:4")
    reached = [f"work-w{i}.reached" for i in range(4)]
    await crash.eventually(
        "four gated Steps running", lambda: all(crash.read(name) for name in reached)
    )
    runners = Counter(int(crash.read(name) or 0) for name in reached)
    assert runners == {one.pid: 2, two.pid: 2}
    crash.release("work.release")
    await crash.logged("gated", "joined:w0,w1,w2,w3")
    # Then many quick parallel Steps, claimed by both processes as they come.
    count = 20
    await crash.client.start_flow(crash.flow, "quick", f"fan-out:{count}")
    inputs = [f"w{i}" for i in range(count)]
    await crash.logged("quick", "joined:" + ",".join(sorted(inputs)))

    for flow_id, step_type, n in (("gated", "GatedWork", 4), ("quick", "Work", count)):
        results: dict[str, Any] = await crash.client.invoke_rpc(
            crash.flow, flow_id, "read_results", None
        )
        assert sorted(results) == sorted(inputs[:n])
        invoked = Counter(i.step_execution_id for i in crash.invocations(f"{step_type}-"))
        assert invoked == {f"{step_type}-{k}": 1 for k in range(1, n + 1)}
        assert {i.pid for i in crash.invocations(f"{step_type}-")} <= {one.pid, two.pid}
        history = await crash.history(flow_id)
        works = sorted(entry for entry in history if entry[0].startswith(f"{step_type}-"))
        assert works == sorted(_completed(*((f"{step_type}-{k}", 1) for k in range(1, n + 1))))
    assert [i.attempt for i in crash.invocations()] == [1] * (2 + 4 + count)


# With a 1 s lease the survivor finds the killed worker's leases lapsed; with an hour's, it
# sees the killed worker's mark free (``worker_marks.py``) within a second.
@pytest.mark.parametrize("lease", ["1", "3600"])
async def test_a_surviving_worker_takes_over_the_steps_of_a_killed_one(
    crash: Crash, lease: str
) -> None:
    crash.worker_env[LEASE_ENV] = lease
    crash.worker_env[MAX_TASKS_ENV] = "2"
    doomed = await crash.start_worker()
    survivor = await crash.start_worker()
    await crash.client.start_flow(crash.flow, "s1", "gated-fan-out:4")
    reached = {f"w{i}": f"work-w{i}.reached" for i in range(4)}
    await crash.eventually(
        "four gated Steps running", lambda: all(crash.read(name) for name in reached.values())
    )
    # Both live: neither took the other's Steps while they ran.
    lost = sorted(key for key, name in reached.items() if crash.read(name) == str(doomed.pid))
    assert len(lost) == 2
    crash.kill(doomed)
    crash.release("work.release")
    await crash.logged("s1", "joined:w0,w1,w2,w3")

    # The doomed worker's two Steps had not started (no heartbeat): each ran again as
    # attempt 1 on the survivor, and only the survivor's runs committed.
    invoked = Counter(i.step_execution_id for i in crash.invocations("GatedWork-"))
    assert sorted(invoked.values()) == [1, 1, 2, 2]
    for step_execution_id, count in invoked.items():
        pids = [i.pid for i in crash.invocations(step_execution_id)]
        assert pids == ([doomed.pid, survivor.pid] if count == 2 else [survivor.pid])
    assert {i.attempt for i in crash.invocations()} == {1}
    results = await crash.client.invoke_rpc(crash.flow, "s1", "read_results", None)
    assert sorted(results) == ["w0", "w1", "w2", "w3"]
    works = sorted(entry for entry in await crash.history("s1") if entry[0] != "Start-1")
    assert works == _completed(*((f"GatedWork-{k}", 1) for k in range(1, 5)), ("Join-1", 1))


class _CommitsAfterTheFirstClaim:
    """A worker's ``FlowStore`` after whose first claim another connection commits at once,
    as another process may: between the claim and the worker's next wait."""

    def __init__(self, inner: FlowStore, commit: Callable[[], None]) -> None:
        self._inner = inner
        self._commit: Callable[[], None] | None = commit

    def run(self, work: Callable[[StoreTransaction], R], *, durable: bool = True) -> R:
        result = self._inner.run(work, durable=durable)
        if self._commit is not None and getattr(work, "func", None) is claims.claim_round:
            commit, self._commit = self._commit, None
            commit()
        return result

    def run_batch(
        self, works: Sequence[Callable[[StoreTransaction], Any]], *, durable: bool = True
    ) -> Sequence[BatchOutcome]:
        # One by one, so the claim round is still seen on its own.
        return run_each(lambda work: self.run(work, durable=durable), works)

    def read(self, work: Callable[[StoreTransaction], R]) -> R:
        return self._inner.read(work)

    def change_counter(self) -> int:
        return self._inner.change_counter()

    def close(self) -> None:
        self._inner.close()


async def test_a_commit_landing_just_after_a_claim_still_wakes_the_worker(crash: Crash) -> None:
    registered = crash.engine.registered(crash.flow)

    def start_elsewhere() -> None:
        now = crash.engine.now()
        crash.engine.store.run(
            lambda tx: transitions.start_flow(tx, registered, "late", to_json("x"), [], now)
        )

    store = _CommitsAfterTheFirstClaim(SqliteFlowStore(crash.db_path), start_elsewhere)
    # With an hour's lease the worker's own periodic look comes only after half an hour:
    # only the change of the store's counter can make it claim the new Flow's Step.
    engine = LocalEngine(
        store,
        [crash.flow],
        poll_interval=timedelta(milliseconds=20),
        lease_duration=timedelta(hours=1),
    )
    worker = LocalWorker(engine)
    task = asyncio.create_task(worker.run())

    async def started() -> bool:
        try:
            return "start:x" in await crash.log("late")
        except FlowNotFoundError:
            return False

    try:
        await crash.eventually("the worker to run the new Flow's start Step", started)
    finally:
        await worker.stop()
        await task
        engine.close()
        store.close()


async def test_a_worker_process_that_polls_hourly_sees_this_process_s_commits_as_they_land(
    crash: Crash,
) -> None:
    # Neither its polls nor its lease's rounds come within the test: only the write signal of
    # the file (wal_writes.py) tells the worker process of a new run and of a message.
    crash.worker_env.update({POLL_ENV: "3600", LEASE_ENV: "7200"})
    await crash.start_worker()
    await crash.client.start_flow(crash.flow, "signalled", "s")
    await crash.logged("signalled", "start:s")
    await crash.client.invoke_rpc(crash.flow, "signalled", "send", "hello")
    await crash.logged("signalled", "message:hello")


async def test_an_rpc_in_this_process_cancels_a_step_running_in_a_worker_process(
    crash: Crash,
) -> None:
    worker = await crash.start_worker()
    await crash.client.start_flow(crash.flow, "s1", "gate")
    await crash.eventually("attempt 1 at the gate", lambda: crash.read("gate.reached") == "1")
    assert await crash.client.invoke_rpc(crash.flow, "s1", "cancel_gated", None) is True
    await crash.logged("s1", "after-cancel")

    async def cancelled() -> bool:
        return ("Gated-1", 1, "STEP_CANCELLED") in await crash.history("s1")

    await crash.eventually("the cancelled Gated-1 in the history", cancelled)
    # The gate was never released: the Step ended by cancellation, not by finishing.
    assert "gated:1" not in await crash.log("s1")
    assert crash.invocations("Gated-") == [Invocation(worker.pid, "Gated-1", 1)]
    assert worker.poll() is None


# A killed worker's mark (``worker_marks.py``) is free once its process ends: its leases
# are recovered then, not when they lapse. These workers' leases last an hour, past every
# deadline here.


@pytest.mark.parametrize("worker_ids", ["own", "same"])
@pytest.mark.parametrize("end", ["sigkill", "sigterm"])
async def test_a_new_worker_process_takes_a_started_attempt_over_before_its_lease_lapses(
    crash: Crash, end: str, worker_ids: str
) -> None:
    # "same": the new process has the ended one's worker ID (a fixed worker_id_prefix), so
    # the leases to recover bear its own ID.
    crash.worker_env[LEASE_ENV] = "3600"
    if worker_ids == "same":
        crash.worker_env[WORKER_ID_ENV] = "svc"
    first = await crash.start_worker()
    await crash.client.start_flow(crash.flow, "s1", "gate")
    await crash.eventually("attempt 1 at the gate", lambda: crash.read("gate.reached") == "1")
    if end == "sigkill":
        crash.kill(first)
    else:
        # A clean stop cancels the attempt, which had started: its lease stays, and so
        # does the worker's mark, until its process ends.
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=DEADLINE_SECONDS) == 0
    second = await crash.start_worker()
    # Its first claim round looks at the marks of the leases' owners.
    await crash.eventually("attempt 2 at the gate", lambda: crash.read("gate.reached") == "2")
    crash.release("gate.release")
    await crash.logged("s1", "gated:2")

    # What a lapsed lease means, only sooner: attempt 1 had started, so it failed and
    # attempt 2 ran, once.
    assert crash.invocations("Gated-") == [
        Invocation(first.pid, "Gated-1", 1),
        Invocation(second.pid, "Gated-1", 2),
    ]
    assert await crash.history("s1") == _completed(("Start-1", 1), ("Gated-1", 2))
    # The first worker's mark went with its leases; the live worker's stays.
    marks = list((crash.db_path.parent / "engine.sqlite3-workers").iterdir())
    assert len(marks) == 1
