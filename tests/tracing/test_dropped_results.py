"""A span whose attempt's result the engine dropped says so, beside the retry's span.

The embedded engine exports a span once its attempt's result is committed. When
the commit finds that another worker took the attempt over (this one stalled
past its lease), the result is dropped and the Step runs again: the span of the
call that did run, and was paid for, is exported with ``dex.step.result_dropped``
and status ``ERROR``, so it does not read as the call whose result the session
kept. Before, it was exported as a success before the commit, and the trace
showed two successful calls of one attempt.

A state-only Step the engine runs inside another commit (``AwaitUserMessage`` in
the commit of the message that wakes it) waits for that commit the same way: a
commit that fails, and runs the Step again when it is tried again, left the
failed try's ``invoke_agent`` root as a trace of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from dex_agents import AgentSessionClient, AgentSessionFlow, AgentTracingOptions
from dex_agents.adapters.local import claims, lease_recovery
from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.adapters.local.store_errors import StoreBusyError
from dex_agents.app.options import AgentSessionOptions
from dex_agents.domain.runner_outcomes import AgentTurnOutcome
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from dex_agents.ports.flow_rows import ExecutionStatus
from dex_agents.ports.flow_store import StoreTransaction, run_each
from dex_agents.ports.runner import AgentTurnContext, DeferredToolExecution
from tests.adapters.engine_flows import running_worker
from tests.app.scripted_runner import ScriptedRunner

LEASE = timedelta(minutes=1)  # renewed every 20 s: not within the test

R = TypeVar("R")


class Clock:
    """The engine's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = datetime(2000, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


class HeldRunner(ScriptedRunner):
    """Holds its first model call until the test releases it."""

    def __init__(self) -> None:
        super().__init__()
        self.reached = asyncio.Event()
        self.release = asyncio.Event()

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        if not self.reached.is_set():
            self.reached.set()
            await self.release.wait()
        return await super().run_model_step(turn)


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_a_model_call_whose_lease_was_lost_before_its_commit_is_marked_dropped() -> None:
    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    runner = HeldRunner()
    flow = AgentSessionFlow(
        runner,
        flow_type="Held",
        options=AgentSessionOptions(tracing=AgentTracingOptions(tracer_provider=provider)),
    )
    clock, store = Clock(), MemoryFlowStore()
    engine = LocalEngine(
        store, [flow], lease_duration=LEASE, clock=clock, poll_interval=timedelta(milliseconds=20)
    )
    try:
        async with running_worker(engine):
            sessions = AgentSessionClient(LocalFlowClient(engine), flow)
            await sessions.start_session("s1", "hello")
            await runner.reached.wait()
            # This worker stalled past its lease mid-call, and another worker's round took
            # the attempt over (it had not started: as the same attempt).
            later = clock.now + 2 * LEASE
            taken = await engine.run(
                lambda tx: claims.claim(tx, engine.flows, "other", later, LEASE, 1)
            )
            assert [(c.row.step_execution_id, c.row.attempt) for c in taken] == [("RunModel-1", 1)]
            runner.release.set()  # the call returns; its commit finds the lease gone
            dropped = await _chat_spans(exporter, 1)
            # The other worker is gone in turn: its lease lapses and this worker runs it again.
            clock.now = later + 2 * LEASE
            await engine.run(
                lambda tx: lease_recovery.recover_lapsed_leases(tx, engine.flows, clock.now)
            )
            snapshot = await sessions.wait_for_user("s1")
            chats = await _chat_spans(exporter, 2)
    finally:
        engine.close()
        store.close()
    assert snapshot.messages[-1].text == "echo: hello"
    assert len(runner.model_calls) == 2
    (first, retried) = chats
    assert first is dropped[0]
    # Both are spans of one attempt of one Step execution, the first marked as dropped,
    # with what the call that ran used, and why the engine dropped its result.
    for span in chats:
        assert attributes(span)["dex.step.execution_id"] == "RunModel-1"
        assert attributes(span)["dex.step.attempt"] == 1
        assert attributes(span)["gen_ai.usage.input_tokens"] == 10
    assert attributes(first)["dex.step.result_dropped"] == "lease_lost"
    assert attributes(first)["error.type"] == "LeaseLostError"
    assert first.status.status_code is StatusCode.ERROR
    assert "lease" in (first.status.description or "")
    assert "dex.step.result_dropped" not in attributes(retried)
    assert "error.type" not in attributes(retried)
    assert retried.status.status_code is StatusCode.UNSET
    # The dropped span still covers the call, not the wait for the commit: it ended first.
    assert first.end_time is not None
    assert retried.start_time is not None
    assert first.end_time <= retried.start_time


async def _chat_spans(exporter: InMemorySpanExporter, count: int) -> list[ReadableSpan]:
    return await _spans(exporter, "chat", count)


async def _spans(exporter: InMemorySpanExporter, prefix: str, count: int) -> list[ReadableSpan]:
    while True:
        spans = [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]
        if len(spans) >= count:
            return spans
        await asyncio.sleep(0.02)


async def _first_attempts_span(exporter: InMemorySpanExporter, prefix: str) -> ReadableSpan:
    while True:
        for span in await _spans(exporter, prefix, 1):
            if attributes(span)["dex.step.attempt"] == 1:
                return span
        await asyncio.sleep(0.02)


async def test_a_tool_call_whose_lease_was_lost_before_its_commit_is_marked_dropped() -> None:
    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reached, release = asyncio.Event(), asyncio.Event()

    async def lookup(call: DeferredToolExecution) -> str:
        reached.set()
        await release.wait()
        return "found"

    flow = AgentSessionFlow(
        ScriptedRunner(tools={"lookup": lookup}),
        flow_type="HeldTool",
        options=AgentSessionOptions(
            tool_policies={"lookup": ToolPolicy(ToolEffect.READ)},
            tracing=AgentTracingOptions(tracer_provider=provider),
        ),
    )
    clock, store = Clock(), MemoryFlowStore()
    engine = LocalEngine(store, [flow], lease_duration=LEASE, clock=clock)
    try:
        async with running_worker(engine):
            sessions = AgentSessionClient(LocalFlowClient(engine), flow)
            await sessions.start_session("s1", "call lookup {}")
            await reached.wait()
            # Another worker's round finds this worker's lease lapsed: the attempt had
            # started (its heartbeat came before the tool), so it failed, for a retry.
            later = clock.now + 2 * LEASE
            await engine.run(lambda tx: claims.claim(tx, engine.flows, "other", later, LEASE, 0))
            (row,) = await engine.read(
                lambda tx: [r for r in tx.flow_executions("s1") if r.step_type == "CallTool"]
            )
            assert row.lease_owner is None
            release.set()  # the tool returns; its commit finds the lease gone
            tool = await _first_attempts_span(exporter, "execute_tool")
    finally:
        engine.close()
        store.close()
    assert attributes(tool)["dex.step.execution_id"] == "CallTool-1"
    assert attributes(tool)["dex.step.attempt"] == 1
    assert attributes(tool)["dex.step.result_dropped"] == "lease_lost"
    assert attributes(tool)["error.type"] == "LeaseLostError"
    assert tool.status.status_code is StatusCode.ERROR
    # The status the attempt staged, which the engine did not keep.
    assert attributes(tool)["dex.agent.tool_call.status"] == "succeeded"


class CommitFailsOnce(MemoryFlowStore):
    """A memory store whose first transaction that completes ``AwaitUserMessage-1`` runs its
    work and then fails, as a commit that meets a busy disk does: nothing it wrote stays."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    def run(self, work: Callable[[StoreTransaction], R], *, durable: bool = True) -> R:
        def failing(tx: StoreTransaction) -> R:
            result = work(tx)
            if not self.failed and _completes_the_first_wait(tx):
                self.failed = True
                raise StoreBusyError("the store was busy at the commit")
            return result

        return super().run(failing, durable=durable)

    def run_batch(
        self, works: Sequence[Callable[[StoreTransaction], Any]], *, durable: bool = True
    ) -> Sequence[Any]:
        return run_each(self.run, works)


async def test_a_root_run_in_a_commit_that_failed_is_not_exported() -> None:
    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    flow = AgentSessionFlow(
        ScriptedRunner(),
        flow_type="InCommit",
        options=AgentSessionOptions(tracing=AgentTracingOptions(tracer_provider=provider)),
    )
    store = CommitFailsOnce()
    engine = LocalEngine(store, [flow], poll_interval=timedelta(milliseconds=20))
    try:
        async with running_worker(engine):
            sessions = AgentSessionClient(LocalFlowClient(engine), flow)
            await sessions.open_session("s1")
            # The commit that runs AwaitUserMessage (the message's own, in this process)
            # starts the activation and its root, then fails; the message is sent again.
            try:
                await sessions.send_user_message("s1", "hello")
            except StoreBusyError:
                await sessions.send_user_message("s1", "hello")
            snapshot = await sessions.wait_for_user("s1")
    finally:
        engine.close()
        store.close()
    assert store.failed
    assert snapshot.messages[-1].text == "echo: hello"
    (root,) = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
    (chat,) = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    assert attributes(root)["dex.step.execution_id"] == "AwaitUserMessage-1"
    # The activation's one trace: the root the committed message started, and its call.
    assert chat.context.trace_id == root.context.trace_id


def _completes_the_first_wait(tx: StoreTransaction) -> bool:
    return any(
        row.step_execution_id == "AwaitUserMessage-1" and row.status is ExecutionStatus.COMPLETED
        for row in tx.flow_executions("s1")
    )


async def test_a_root_a_claim_round_runs_in_its_commit_is_exported(tmp_path: Path) -> None:
    # A message from another process (its own engine, without a worker) is taken up by
    # the worker's claim round, which runs AwaitUserMessage in its commit: the round
    # settles it after that commit, or its root would never end.
    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    flow = AgentSessionFlow(
        ScriptedRunner(),
        flow_type="Rounds",
        options=AgentSessionOptions(tracing=AgentTracingOptions(tracer_provider=provider)),
    )
    path = tmp_path / "engine.db"
    worker_store, client_store = SqliteFlowStore(path), SqliteFlowStore(path)
    interval = timedelta(milliseconds=20)
    served = LocalEngine(worker_store, [flow], poll_interval=interval)
    client = LocalEngine(client_store, [flow], poll_interval=interval)
    try:
        async with running_worker(served):
            sessions = AgentSessionClient(LocalFlowClient(client), flow)
            await sessions.open_session("s1")
            await sessions.wait_for_user("s1")
            await sessions.send_user_message("s1", "hello")
            (chat,) = await _spans(exporter, "chat", 1)
            (root,) = await _spans(exporter, "invoke_agent", 1)
    finally:
        served.close()
        client.close()
        worker_store.close()
        client_store.close()
    assert attributes(root)["dex.step.execution_id"] == "AwaitUserMessage-1"
    assert chat.context.trace_id == root.context.trace_id
