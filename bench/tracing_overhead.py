"""What tracing costs per turn: the same scripted tool turn with and without spans, in one run.

Run it from the repository root (``opentelemetry-sdk`` is a dev dependency):

    uv run --frozen python bench/tracing_overhead.py [--turns N] [--warmup N] [--store S]

The workload is ``workload.py``'s: a ~200-character user message, the scripted
model calls the read tool ``lookup_order``, then answers; four spans a turn
(``invoke_agent``, two ``chat``, one ``execute_tool``). One ``LocalRuntime``
serves two Flow types of that agent, one with ``AgentTracingOptions(is_enabled=
False)`` and one traced through an ``opentelemetry-sdk`` ``TracerProvider`` with
a ``SimpleSpanProcessor`` into an ``InMemorySpanExporter`` (cleared after every
turn, so memory stays flat). Each has one session; their turns alternate, the
order swapped every pair, so drift and session growth fall on both alike. Per
store (``--store``: ``sqlite``, a file in a temporary directory, ``memory``, or
``both``) it prints the median turn of each, the difference, the median of the
paired differences and the ratio; the median CPU time of the process per turn
of each (client and worker share the process, and one turn runs at a time, so
that is the turn's CPU) and its ratio; and the spans exported per turn. The
wall-clock turn on the embedded engine is mostly polls and event flushes, so
the CPU columns show tracing's cost more plainly. It asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path

import workload
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from dex_agents import AgentSessionClient, AgentSessionFlow, AgentTracingOptions
from dex_agents.app.builtin_loop.flow import builtin_agent_session_options
from dex_agents.builtin_loop import BuiltinLoopAgentRunner
from dex_agents.local import LocalRuntime


def workload_flow(flow_type: str, tracing: AgentTracingOptions) -> AgentSessionFlow:
    """``workload.agent`` as a session Flow of its own type, with ``tracing``."""
    options = dataclasses.replace(builtin_agent_session_options(workload.agent), tracing=tracing)
    return AgentSessionFlow(
        BuiltinLoopAgentRunner(workload.agent), flow_type=flow_type, options=options
    )


async def turn(sessions: AgentSessionClient, session_id: str, number: int) -> tuple[float, float]:
    """One turn: the seconds from sending the message until the session waits again, and the
    CPU seconds this process (client and worker both) spent meanwhile."""
    began, cpu = time.perf_counter(), time.process_time()
    if not await sessions.send_user_message(session_id, workload.user_message(number)):
        raise RuntimeError(f"the message of turn {number} was refused")
    snapshot = await sessions.wait_for_user(session_id)
    elapsed = (time.perf_counter() - began, time.process_time() - cpu)
    if snapshot.messages[-1].text != workload.answer(workload.order_status(workload.ORDER_ID)):
        raise RuntimeError(f"turn {number} ended with {snapshot.messages[-1].text!r}")
    return elapsed


async def measure(path: Path | None, turns: int, warmup: int) -> dict[str, object]:
    """Run ``warmup`` + ``turns`` interleaved turn pairs on the store at ``path`` (memory: None)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    plain = workload_flow("BenchPlain", AgentTracingOptions(is_enabled=False))
    traced = workload_flow("BenchTraced", AgentTracingOptions(tracer_provider=provider))
    times: dict[str, list[float]] = {"plain": [], "traced": []}
    cpu: dict[str, list[float]] = {"plain": [], "traced": []}
    spans = 0
    async with LocalRuntime(path, [plain, traced], workers=1) as runtime:
        clients = {"plain": runtime.sessions(plain), "traced": runtime.sessions(traced)}
        # Session IDs are unique across Flow types in one database: one per system.
        for name, sessions in clients.items():
            await sessions.open_session(name)
        for number in range(1, warmup + turns + 1):
            order = ("plain", "traced") if number % 2 else ("traced", "plain")
            for name in order:
                elapsed, used = await turn(clients[name], name, number)
                if number > warmup:
                    times[name].append(elapsed)
                    cpu[name].append(used)
            if number > warmup:
                spans += len(exporter.get_finished_spans())
            exporter.clear()
    provider.shutdown()
    plain_median = statistics.median(times["plain"])
    traced_median = statistics.median(times["traced"])
    paired = statistics.median(t - p for t, p in zip(times["traced"], times["plain"], strict=True))
    # Only one session runs at a time, so the process's CPU during a turn is that turn's.
    plain_cpu = statistics.median(cpu["plain"])
    traced_cpu = statistics.median(cpu["traced"])
    return {
        "plain": plain_median,
        "traced": traced_median,
        "difference": traced_median - plain_median,
        "paired": paired,
        "ratio": traced_median / plain_median,
        "plain_cpu": plain_cpu,
        "traced_cpu": traced_cpu,
        "cpu_ratio": traced_cpu / plain_cpu,
        "spans_per_turn": spans / turns,
    }


def ms(seconds: object) -> str:
    assert isinstance(seconds, float)
    return f"{seconds * 1000:.2f}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="timed turns per system (200)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed turns first (20)")
    parser.add_argument("--store", choices=("sqlite", "memory", "both"), default="both")
    args = parser.parse_args()
    stores = ("sqlite", "memory") if args.store == "both" else (args.store,)
    rows = []
    for store in stores:
        with tempfile.TemporaryDirectory(prefix="bench-tracing-") as directory:
            path = Path(directory) / "sessions.sqlite3" if store == "sqlite" else None
            rows.append((store, await measure(path, args.turns, args.warmup)))
    print(f"{args.turns} timed turns per system after {args.warmup} warm-up turns, interleaved")
    print()
    print(
        "| store | no tracing ms | tracing ms | difference ms | paired ms | ratio"
        " | CPU no tracing ms | CPU tracing ms | CPU ratio | spans/turn |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for store, row in rows:
        ratio, cpu_ratio = row["ratio"], row["cpu_ratio"]
        assert isinstance(ratio, float)
        assert isinstance(cpu_ratio, float)
        print(
            f"| {store} | {ms(row['plain'])} | {ms(row['traced'])} | {ms(row['difference'])}"
            f" | {ms(row['paired'])} | {ratio:.3f}x | {ms(row['plain_cpu'])}"
            f" | {ms(row['traced_cpu'])} | {cpu_ratio:.3f}x | {row['spans_per_turn']:.1f} |"
        )


if __name__ == "__main__":
    asyncio.run(main())
