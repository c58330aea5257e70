"""One benchmark run once per count, each count in a process and file of its own,
and its figures printed beside the first count's.

A script that sweeps a count (sessions, Stream followers) runs itself with
``--one COUNT`` in a child process, which prints its figures as one JSON object
on its last line; a fresh process per count keeps one count's heap, caches and
threads off the next.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence


def run_counts(
    script: str, counts: Sequence[int], args: Sequence[str]
) -> dict[int, dict[str, float]]:
    """The figures of ``script --one COUNT *args`` for each of ``counts``, one after the other."""
    results = {}
    for count in counts:
        command = [sys.executable, script, "--one", str(count), *args]
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        results[count] = json.loads(out.splitlines()[-1])
    return results


def print_counts(
    label: str,
    counts: Sequence[int],
    results: dict[int, dict[str, float]],
    columns: Sequence[tuple[str, str, float, int]],
    ratios: Sequence[tuple[str, str]],
) -> None:
    """A row per count: ``label``, each of ``columns`` (heading, figure, factor, decimals),
    then each of ``ratios`` (heading, figure) over the first count's."""
    base = results[counts[0]]
    header = [label, *(column[0] for column in columns), *(ratio[0] for ratio in ratios)]
    rows = []
    for count in counts:
        row = results[count]
        cells = [str(count)]
        for _, key, factor, digits in columns:
            cells.append(f"{row[key] * factor:.{digits}f}")
        cells += [f"{row[key] / base[key]:.2f}x" for _, key in ratios]
        rows.append(cells)
    widths = [max(len(cells[n]) for cells in [header, *rows]) for n in range(len(header))]
    for cells in [header, ["-" * width for width in widths], *rows]:
        print("  ".join(cell.rjust(widths[n]) for n, cell in enumerate(cells)))
