"""The crash stack of the phase crash agent, as its kill tests open it.

Kept apart from ``phase_crash_agent`` since the Worker children import that
module, and need none of the test process's stack.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from tests.app.crash_stack import Crash, crash_stack
from tests.app.phase_crash_agent import STATE_DIR_ENV, build_phase_crash_flow, invocation_log

WORKER_MODULE = "tests.app.phase_crash_worker"


@contextlib.asynccontextmanager
async def phase_crash(tmp_path: Path) -> AsyncIterator[Crash]:
    """A crash stack running the phase crash agent's Worker children in ``tmp_path``."""
    log = invocation_log(tmp_path)
    flow = build_phase_crash_flow()
    async with crash_stack(tmp_path, flow, WORKER_MODULE, STATE_DIR_ENV, log) as crash:
        yield crash
