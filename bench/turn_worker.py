"""A worker process for ``throughput.py``: ``python bench/turn_worker.py PATH``.

It serves the workload's Flow in the session database at ``PATH`` until
SIGTERM, with dex-agents' default worker settings.
"""

from __future__ import annotations

import sys

import workload

from dex_agents.local import run_workers

if __name__ == "__main__":
    run_workers(sys.argv[1], [workload.flow])
