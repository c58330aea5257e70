"""A client process that times one write RPC over and over: ``python bench/rpc_probe.py PATH TIMES``.

It opens a session of its own in the session database at ``PATH`` (a client
only, ``workers=0``), prints ``ready`` once a worker has started it, then calls
``update_session_settings`` on it every ``INTERVAL`` until SIGTERM: a write
RPC that wakes no Step, so the probe adds no work for the workers. As it
exits it writes one line per call to ``TIMES``: when the call began
(``time.monotonic()``, the same clock in every process of the machine), how
long it took, and how long its transaction waited for the write lock
(``transaction_timing.py``), in seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from pathlib import Path

import workload
from transaction_timing import record_write_transactions

from dex_agents.local import LocalRuntime

INTERVAL = 0.02
"""Seconds between the end of one call and the start of the next."""

SESSION = "rpc-probe"


async def probe(path: Path) -> list[tuple[float, float, float]]:
    """Time ``update_session_settings`` on ``path`` until SIGTERM: (began, took, waited) per call."""
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    calls: list[tuple[float, float, float]] = []
    timings = record_write_transactions()
    async with LocalRuntime(path, [workload.flow], workers=0) as runtime:
        sessions = runtime.sessions(workload.flow)
        await sessions.open_session(SESSION)
        await sessions.wait_for_user(SESSION)  # settings are refused until the session has state
        print("ready", flush=True)
        number = 0
        while not stop.is_set():
            number += 1
            started = time.monotonic()
            if not await sessions.update_session_settings(SESSION, {"model": f"probe-{number}"}):
                raise RuntimeError(f"update_session_settings {number} was refused")
            took = time.monotonic() - started
            # The RPC is one write transaction (update_session_settings is transactional).
            waited = timings[-1][0] if timings else 0.0
            calls.append((started, took, waited))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), INTERVAL)
    return calls


if __name__ == "__main__":
    calls = asyncio.run(probe(Path(sys.argv[1])))
    Path(sys.argv[2]).write_text("".join(" ".join(map(repr, call)) + "\n" for call in calls))
