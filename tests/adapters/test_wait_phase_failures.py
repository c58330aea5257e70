"""A wait phase that keeps raising runs again less and less often, and its traceback is logged once.

A wait phase has no attempts and no failure route, so one that raises (its
``wait_for`` has a bug, or the state it loads is damaged in the file) runs again
for as long as its Step is active. Until 2026-12-07 it ran every second and
logged a traceback each time, for ever.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dex_agents.adapters.local import wait_phase_failures
from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.probes import wait_until
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.adapters.local.store_errors import UnreadableStateError
from dex_agents.adapters.local.wait_phase_failures import (
    MAX_WAIT_PHASE_RETRY_DELAY,
    WaitPhaseFailures,
    retry_delay,
)
from dex_agents.ports.engine import ENGINE_LOGGER, Rpc, Step, StepDecision, dead_end
from dex_agents.ports.step_contexts import StepContext, WaitContext
from dex_agents.ports.step_waits import Wait, timer
from tests.adapters.engine_flows import LOG, running_worker

FLOW_ID = "waiting"


class FailingWait(Step[None]):
    """A Step whose wait phase raises (``broken``) or reads the ``Log`` Attribute."""

    broken = False
    runs = 0

    async def wait_for(self, context: WaitContext, input: None) -> Wait:
        FailingWait.runs += 1
        if FailingWait.broken:
            raise RuntimeError("a bug in wait_for")
        context.state.get(LOG)
        return Wait.until(timer(timedelta(0)))

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        return dead_end()


class FailingWaitFlow:
    flow_type = "FailingWait"
    schema: Sequence[Any] = (LOG,)
    stream = None
    rpcs: Mapping[str, Rpc[Any, Any]] = {}

    def __init__(self) -> None:
        self.start_step: Step[Any] = FailingWait()
        self.steps: Sequence[Step[Any]] = (self.start_step,)


def _damage(path: Path) -> None:
    with contextlib.closing(sqlite3.connect(path)) as raw, raw:
        raw.execute(
            "INSERT INTO attribute_values VALUES (?, ?, '', CAST(x'ff22' AS TEXT))",
            (FLOW_ID, LOG.name),
        )


def _failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        record
        for record in caplog.records
        if record.name == ENGINE_LOGGER.name and "wait phase of FailingWait-1" in record.message
    ]


@pytest.mark.parametrize("cause", ["damaged state", "raising wait_for"])
async def test_a_wait_phase_that_keeps_failing_logs_its_traceback_once(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    cause: str,
) -> None:
    # Short, so that a few runs take well under a second: the rule, not the default, is tested.
    monkeypatch.setattr(
        wait_phase_failures, "FIRST_WAIT_PHASE_RETRY_DELAY", timedelta(milliseconds=10)
    )
    caplog.set_level(logging.DEBUG, logger=ENGINE_LOGGER.name)
    FailingWait.broken, FailingWait.runs = cause == "raising wait_for", 0
    path, flow = tmp_path / "flows.sqlite3", FailingWaitFlow()
    store = SqliteFlowStore(path)
    engine = LocalEngine(store, [flow], poll_interval=timedelta(milliseconds=20))
    try:
        await LocalFlowClient(engine).start_flow(flow, FLOW_ID, None)
        if not FailingWait.broken:
            _damage(path)
        async with running_worker(engine):
            ran: bool = await wait_until(
                "four failed wait phases", lambda: len(_failures(caplog)) >= 4
            )
            assert ran
    finally:
        engine.close()
        store.close()
    failures = _failures(caplog)
    loud = [record for record in failures if record.levelno >= logging.INFO]
    # Before, each run logged a traceback at ERROR: one a second, for ever.
    assert len(loud) == 1, [record.message for record in loud]
    (first,) = loud
    assert first.levelno == logging.ERROR
    assert first.exc_info is not None
    expected = RuntimeError if FailingWait.broken else UnreadableStateError
    assert isinstance(first.exc_info[1], expected)
    quiet = failures[1:]
    assert all(record.levelno == logging.DEBUG for record in quiet)
    # The cause stays in each later line.
    assert all(expected.__name__ in record.message for record in quiet)


def test_the_delay_doubles_up_to_its_cap() -> None:
    delays = [retry_delay(n) for n in range(1, 10)]
    assert delays[:4] == [timedelta(seconds=s) for s in (1, 2, 4, 8)]
    assert delays[-1] == MAX_WAIT_PHASE_RETRY_DELAY
    assert delays == sorted(delays)
    assert retry_delay(10_000) == MAX_WAIT_PHASE_RETRY_DELAY


def test_a_new_failure_is_logged_again_and_a_success_starts_over() -> None:
    failures = WaitPhaseFailures()
    first = failures.failed(7, RuntimeError("one"))
    assert (first.loud, first.failures, first.delay) == (True, 1, timedelta(seconds=1))
    again = failures.failed(7, RuntimeError("one"))
    assert (again.loud, again.failures, again.delay) == (False, 2, timedelta(seconds=2))
    other = failures.failed(7, ValueError("two"))
    assert (other.loud, other.failures) == (True, 3)
    assert failures.failed(8, RuntimeError("one")).loud  # each execution on its own
    failures.succeeded(7)
    assert failures.failed(7, ValueError("two")) == first


def test_the_executions_it_remembers_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wait_phase_failures, "MOST_TRACKED_EXECUTIONS", 2)
    failures = WaitPhaseFailures()
    for execution_id in (1, 2, 3):
        failures.failed(execution_id, RuntimeError("x"))
    # The oldest was forgotten: its next failure counts as its first.
    assert failures.failed(1, RuntimeError("x")).failures == 1
    assert failures.failed(3, RuntimeError("x")).failures == 2
