"""Count the fsyncs of a system's turns, syscall by syscall, with strace.

SQLite calls ``fsync``/``fdatasync`` from C, so wrapping ``os.fsync`` would see
none of them, and ``/proc/<pid>/io`` counts bytes, not syncs. This module runs
one ``turn_child.py`` process under ``strace -f -y`` (every thread, file
descriptors shown with their paths), tracing the sync calls, the writes
(``pwrite64``) and a marker ``access`` call that the child makes just before
its first counted turn and just after its last, and counts the sync calls
between the two markers. The strace run is not timed: strace slows every
traced syscall down.

Each sync call is classified, per thread, by what that thread wrote since its
previous sync call:

- ``commit``: a sync of the ``-wal`` file after WAL frames were written. In WAL
  mode with ``synchronous=FULL``, or with dex-agents' own sync after a durable
  ``COMMIT`` (``wal_sync.py``), that is the one fsync of one durable write
  transaction;
- ``wal header``: a sync of the ``-wal`` file after only its 32-byte header was
  written, which SQLite does once each time it starts the WAL over;
- ``checkpoint``: a sync of the ``-wal`` file with nothing written since (the
  sync that opens a checkpoint) and a sync of the database file itself (the
  one that ends it);
- ``other``: anything else (a directory, another file).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

SYNC_CALLS = ("fsync", "fdatasync", "sync_file_range", "syncfs", "msync")
TRACED = (*SYNC_CALLS, "pwrite64", "access", "faccessat", "faccessat2")
WAL_HEADER_BYTES = 32

_LINE = re.compile(r"^(?P<tid>\d+)\s+(?P<call>\w+)\((?P<args>.*)$")
_FD_PATH = re.compile(r"^-?\d+<(?P<path>[^>]*)>")
_PWRITE = re.compile(r",\s*(?P<size>\d+),\s*(?P<offset>\d+)\)\s*=")


@dataclass
class FsyncCount:
    """The sync calls between the markers, by kind and by file."""

    turns: int
    kinds: Counter[str] = field(default_factory=Counter)
    files: Counter[str] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return sum(self.kinds.values())

    def per_turn(self, kind: str | None = None) -> float:
        return (self.total if kind is None else self.kinds[kind]) / self.turns


def strace_path() -> str | None:
    """The strace binary, or ``None`` when it is not installed."""
    return shutil.which("strace")


def parse(log: str, begin: str, end: str, database: Path | None, turns: int) -> FsyncCount:
    """Count and classify the sync calls of ``log`` between the ``begin`` and ``end`` markers."""
    count = FsyncCount(turns)
    counting = False
    wrote: dict[str, set[str]] = defaultdict(set)  # tid -> {"frames", "header"} since its last sync
    wal = None if database is None else f"{database}-wal"
    for line in log.splitlines():
        match = _LINE.match(line)
        if match is None:  # "<... resumed>" halves, exits, signals
            continue
        tid, call, args = match["tid"], match["call"], match["args"]
        if call in ("access", "faccessat", "faccessat2"):
            if begin in args:
                counting = True
            elif end in args:
                counting = False
            continue
        fd = _FD_PATH.match(args)
        path = fd["path"] if fd else ""
        if call == "pwrite64":
            if path == wal:
                sizes = _PWRITE.search(args)
                header = sizes is not None and (
                    int(sizes["size"]),
                    int(sizes["offset"]),
                ) == (WAL_HEADER_BYTES, 0)
                wrote[tid].add("header" if header else "frames")
            continue
        if call not in SYNC_CALLS:
            continue
        since, wrote[tid] = wrote[tid], set()
        if not counting:
            continue
        if wal is not None and path == wal:
            kind = "commit" if "frames" in since else "wal header" if since else "checkpoint"
        elif database is not None and path == str(database):
            kind = "checkpoint"
        else:
            kind = "other"
        count.kinds[kind] += 1
        count.files[Path(path).name or path or "?"] += 1
    return count


def count_fsyncs(
    child: list[str], database: Path | None, marker_dir: Path, warm_up: int, turns: int
) -> FsyncCount:
    """Run ``child`` (a ``turn_child.py`` command line) under strace and count its turns' syncs."""
    strace = strace_path()
    if strace is None:
        raise RuntimeError("strace is not installed")
    log = marker_dir / "strace.log"
    command = [strace, "-f", "-y", "-qq", "-s", "0", "-e", f"trace={','.join(TRACED)}"]
    command += ["-o", str(log), *child, "--marker-dir", str(marker_dir)]
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
    )
    stdin, stdout = process.stdin, process.stdout
    assert stdin is not None
    assert stdout is not None

    def ask(line: str) -> str:
        stdin.write(line + "\n")
        stdin.flush()
        reply = stdout.readline()
        if not reply:
            raise RuntimeError(f"the strace'd child stopped on {line!r}")
        return reply

    try:
        if not stdout.readline():
            raise RuntimeError("the strace'd child stopped before it was ready")
        if warm_up:
            ask(f"run 1 {warm_up}")
        ask("mark fsync-begin")
        ask(f"run {warm_up + 1} {warm_up + turns}")
        ask("mark fsync-end")
        ask("finish")
    finally:
        stdin.close()
        if process.wait(timeout=120) != 0:
            print(f"fsync_count: the child exited with {process.returncode}", file=sys.stderr)
    try:
        text = log.read_text()
    finally:
        log.unlink(missing_ok=True)
    begin, end = str(marker_dir / "fsync-begin"), str(marker_dir / "fsync-end")
    return parse(text, begin, end, database, turns)
