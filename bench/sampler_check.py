"""How far ``stack_sampler.py`` can be trusted: its shares beside known costs.

    python bench/sampler_check.py [--rounds N]

Three functions whose costs are timed alone first: ``gil_free``, a hash of 1 MiB
(C code that lets the GIL go, as SQLite's calls do), ``query``, an SQLite query
over 200,000 rows, and ``python_work``, a Python loop that builds small
dataclasses (it holds the GIL throughout, as most of a turn does). Then
``--rounds`` rounds of each, run under the sampler; it prints each function's
share of the time as timed and as sampled. A sampler that can only run when
the GIL is let go (the thread sampler ``turns.py --profile`` had until
2026-12-06) sees none of the Python work. It asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from stack_sampler import StackSampler

_DATA = b"x" * (1 << 20)


@dataclass
class _Row:
    a: int
    b: int
    c: int
    d: int


def _connection() -> sqlite3.Connection:
    connection = sqlite3.connect(":memory:")
    connection.execute("CREATE TABLE t (x INTEGER)")
    connection.executemany("INSERT INTO t VALUES (?)", [(n,) for n in range(200_000)])
    return connection


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=300, help="rounds under the sampler (300)")
    args = parser.parse_args(argv)
    connection = _connection()

    def gil_free() -> None:
        hashlib.sha256(_DATA).digest()

    def query() -> None:
        connection.execute("SELECT sum(x) FROM t").fetchall()

    def python_work() -> None:
        for n in range(1500):
            _Row(n, n, n, n)

    work: list[Callable[[], None]] = [gil_free, query, python_work]
    timed = {}
    for each in work:
        started = time.perf_counter()
        for _ in range(20):
            each()
        timed[each.__name__] = (time.perf_counter() - started) / 20
    with StackSampler() as sampler:
        for _ in range(args.rounds):
            for each in work:
                each()
    round_seconds = sum(timed.values())
    sampled = {
        each.__name__: sum(
            spent
            for label, spent in sampler.inclusive.items()
            if label.endswith(f"({each.__name__})")
        )
        for each in work
    }
    sampled_total = max(sum(sampled.values()), 1e-9)
    print(f"{'function':12}  {'one call, ms':>12}  {'timed share':>11}  {'sampled share':>13}")
    for name, seconds in timed.items():
        print(
            f"{name:12}  {seconds * 1000:12.3f}  {seconds / round_seconds:11.1%}"
            f"  {sampled[name] / sampled_total:13.1%}"
        )
    print(
        f"{sampler.samples} samples over {sampler.elapsed:.2f} s; "
        f"the sampler's handler took {sampler.overhead / sampler.elapsed:.1%} of it"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
