"""A worker process for ``throughput.py``: ``python bench/turn_worker.py PATH [TIMES] [--profile OUT]``.

It serves the workload's Flow in the session database at ``PATH`` until
SIGTERM, with dex-agents' default worker settings. Given ``TIMES``, it also
writes there, as it exits, how long each of its write transactions held the
write lock (``transaction_timing.py``), one per line, in seconds. Given
``--profile OUT``, it runs under ``stack_sampler.py`` and writes there, as it
exits, the seconds each function spent on a busy thread's stack and on top of
it, as JSON (``{"elapsed", "busy", "inclusive", "self"}``).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import sys
from pathlib import Path

import workload
from stack_sampler import StackSampler
from transaction_timing import record_write_transactions

from dex_agents.local import run_workers


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path")
    parser.add_argument("times", nargs="?")
    parser.add_argument("--profile", metavar="OUT")
    args = parser.parse_args(argv)
    if args.times is not None:
        times = Path(args.times)
        timings = record_write_transactions()
        atexit.register(lambda: times.write_text("".join(f"{held!r}\n" for _, held in timings)))
    sampler = StackSampler() if args.profile else None
    with sampler or contextlib.nullcontext():
        run_workers(args.path, [workload.flow])
    if sampler is not None:
        profile = {
            "elapsed": sampler.elapsed,
            "busy": sampler.busy,
            "inclusive": sampler.inclusive,
            "self": sampler.self_time,
        }
        Path(args.profile).write_text(json.dumps(profile))


if __name__ == "__main__":
    main(sys.argv[1:])
