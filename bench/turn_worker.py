"""A worker process for ``throughput.py``: ``python bench/turn_worker.py PATH [TIMES]``.

It serves the workload's Flow in the session database at ``PATH`` until
SIGTERM, with dex-agents' default worker settings. Given ``TIMES``, it also
writes there, as it exits, how long each of its write transactions held the
write lock (``transaction_timing.py``), one per line, in seconds.
"""

from __future__ import annotations

import atexit
import sys
from pathlib import Path

import workload
from transaction_timing import record_write_transactions

from dex_agents.local import run_workers

if __name__ == "__main__":
    if len(sys.argv) > 2:
        times = Path(sys.argv[2])
        timings = record_write_transactions()
        atexit.register(lambda: times.write_text("".join(f"{held!r}\n" for _, held in timings)))
    run_workers(sys.argv[1], [workload.flow])
