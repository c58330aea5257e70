"""Spend limits across a Worker crash: a real Worker child is SIGKILLed inside a usage report."""

from __future__ import annotations

from pathlib import Path

from dex_agents.testing import EXECUTE_COMPLETED_EVENT
from tests.app.crash_stack import crash_stack
from tests.app.spend_crash_agent import (
    STATE_DIR_ENV,
    build_spend_crash_flow,
    invocation_log,
    record_gate,
)


async def test_a_model_call_run_again_after_a_kill_is_reported_as_another_attempt(
    tmp_path: Path,
) -> None:
    # The kill comes after the call returned and was reported, before RunModel committed,
    # so the replacement calls the model again. Both calls cost: their reports must not
    # share the (flow_id, step_execution_id, attempt) key an application counts by.
    flow, log = build_spend_crash_flow(), invocation_log(tmp_path)
    worker = "tests.app.spend_crash_worker"
    async with crash_stack(tmp_path, flow, worker, STATE_DIR_ENV, log) as crash:
        first = await crash.stack.start_worker()
        await crash.sessions.start_session("s1", "hello")
        gate = record_gate(tmp_path, "RunModel-1")
        await gate.wait_until_reached()
        first.kill()
        gate.release()
        replacement = await crash.stack.start_worker()
        await crash.idle()
        history = await crash.history("RunModel")

    entries = log.entries()
    assert [(entry.pid, entry.name) for entry in entries] == [
        (first.pid, "check RunModel-1 1"),
        (first.pid, "model"),
        (first.pid, "record RunModel-1 1"),
        (replacement.pid, "check RunModel-1 2"),
        (replacement.pid, "model"),
        (replacement.pid, "record RunModel-1 2"),
    ]
    assert history == [("RunModel", 2, EXECUTE_COMPLETED_EVENT)]
