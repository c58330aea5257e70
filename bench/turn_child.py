"""One system of ``bench/turns.py`` in a process of its own, driven over a pipe.

    python bench/turn_child.py SYSTEM [PATH] [--marker-dir DIR]

``SYSTEM`` is one of ``SYSTEMS``; ``PATH`` is its SQLite file (none for the
in-memory systems). Each system gets its own process so that no system's
heap, background threads or CPU time lands on another's figures.

The process opens the system and one session, then reads commands on stdin and
answers each with one JSON line on stdout (anything a library prints goes to
stderr instead):

- ``run FIRST LAST``: run turns ``FIRST`` to ``LAST`` one after the other and
  answer each turn's latency (seconds, from the user's message until the
  answer is back) and this process's CPU time over them (``time.process_time``,
  every thread);
- ``mark NAME``: call ``access("<marker dir>/NAME")``, a syscall that
  ``fsync_count.py`` finds in an strace log to know where the turns begin and end;
- ``finish``: close the system and answer the storage it left (``sqlite_storage``).

A turn whose answer is not the workload's answer stops the process with an error.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol, TextIO

import workload

SESSION_ID = "bench-session"
EXPECTED_ANSWER = workload.answer(workload.order_status(workload.ORDER_ID))


class TurnSystem(Protocol):
    """A system that runs the workload's turns of one session."""

    async def turn(self, number: int) -> str:
        """Run turn ``number`` and return the model's answer."""
        ...

    async def close(self) -> None:
        """Close the system; its file stays."""
        ...


class DexAgents:
    """dex-agents through its public API: a ``LocalRuntime`` with one worker in this process."""

    def __init__(self, path: Path | None) -> None:
        from dex_agents.local import LocalRuntime

        self.runtime = LocalRuntime(path, [workload.flow], workers=1)

    async def open(self) -> None:
        await self.runtime.open()
        self.sessions = self.runtime.sessions(workload.flow)
        await self.sessions.open_session(SESSION_ID)
        await self.sessions.wait_for_user(SESSION_ID)

    async def turn(self, number: int) -> str:
        if not await self.sessions.send_user_message(SESSION_ID, workload.user_message(number)):
            raise RuntimeError(f"dex-agents refused the message of turn {number}")
        snapshot = await self.sessions.wait_for_user(SESSION_ID)
        return snapshot.messages[-1].text or ""

    async def close(self) -> None:
        await self.runtime.close()


class SyncPeer:
    """A peer whose turns are plain blocking calls, run on this thread as its users run them."""

    def __init__(self, run: Callable[[str, int], str], close: Callable[[], None]) -> None:
        self._run = run
        self._close = close

    async def turn(self, number: int) -> str:
        return self._run(SESSION_ID, number)

    async def close(self) -> None:
        self._close()


async def _dex(path: Path | None) -> TurnSystem:
    system = DexAgents(path)
    await system.open()
    return system


async def _langgraph(path: Path | None, durability: Any) -> TurnSystem:
    from peers.langgraph_turns import LangGraphTurns

    peer = LangGraphTurns(path, durability)
    return SyncPeer(peer.turn, peer.close)


async def _dbos(path: Path | None) -> TurnSystem:
    from peers.dbos_turns import DbosTurns

    assert path is not None
    peer = DbosTurns(path)
    return SyncPeer(peer.turn, peer.close)


# name -> (opens it, needs a file)
SYSTEMS: dict[str, tuple[Callable[[Path | None], Awaitable[TurnSystem]], bool]] = {
    "dex-sqlite": (_dex, True),
    "dex-memory": (_dex, False),
    "langgraph-sqlite": (lambda path: _langgraph(path, "async"), True),
    "langgraph-sqlite-sync": (lambda path: _langgraph(path, "sync"), True),
    "langgraph-memory": (lambda path: _langgraph(None, "async"), False),
    "dbos-sqlite": (_dbos, True),
}


def sqlite_storage(path: Path) -> dict[str, Any]:
    """The file sizes, and the pages and payload bytes of each table with its indexes (``dbstat``)."""
    files = {
        suffix or "db": os.path.getsize(f"{path}{suffix}")
        for suffix in ("", "-wal", "-shm")
        if os.path.exists(f"{path}{suffix}")
    }
    with open(path, "rb") as file:
        header = file.read(20)
    # Bytes 18 and 19 of the header: 1 for a rollback journal, 2 for write-ahead logging.
    journal = {1: "rollback journal", 2: "WAL"}.get(header[18], "?")
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        try:
            rows = connection.execute(
                """SELECT coalesce(m.tbl_name, d.name), sum(d.pgsize), sum(d.payload)
                   FROM dbstat AS d LEFT JOIN sqlite_schema AS m ON m.name = d.name
                   GROUP BY 1 ORDER BY 2 DESC"""
            ).fetchall()
        except sqlite3.OperationalError:  # SQLite built without SQLITE_ENABLE_DBSTAT_VTAB
            rows = []
        page_size = connection.execute("PRAGMA page_size").fetchone()[0]
        page_count = connection.execute("PRAGMA page_count").fetchone()[0]
        freelist = connection.execute("PRAGMA freelist_count").fetchone()[0]
    finally:
        connection.close()
    return {
        "files": files,
        "tables": [[name, pages, payload] for name, pages, payload in rows],
        "used_bytes": (page_count - freelist) * page_size,
        "dbstat": bool(rows),
        "journal": journal,
    }


async def serve(system_name: str, path: Path | None, marker_dir: Path, out: TextIO) -> None:
    opener, _ = SYSTEMS[system_name]
    system = await opener(path)

    def answer(value: dict[str, Any]) -> None:
        out.write(json.dumps(value) + "\n")
        out.flush()

    answer({"ready": True})
    while True:
        line = await asyncio.to_thread(sys.stdin.readline)
        command = line.split()
        if not command:
            raise RuntimeError("turn_child: stdin closed before 'finish'")
        if command[0] == "run":
            first, last = int(command[1]), int(command[2])
            latencies = []
            cpu = time.process_time()
            for number in range(first, last + 1):
                started = time.perf_counter()
                text = await system.turn(number)
                latencies.append(time.perf_counter() - started)
                if text != EXPECTED_ANSWER:
                    raise RuntimeError(f"{system_name} turn {number} answered {text!r}")
            answer({"latencies": latencies, "cpu": time.process_time() - cpu})
        elif command[0] == "mark":
            os.access(marker_dir / command[1], os.F_OK)
            answer({"marked": command[1]})
        elif command[0] == "finish":
            await system.close()
            answer({"storage": None if path is None else sqlite_storage(path)})
            return
        else:
            raise RuntimeError(f"turn_child: unknown command {line!r}")


def main(argv: list[str]) -> int:
    system_name = argv[0]
    path = Path(argv[1]) if len(argv) > 1 and not argv[1].startswith("--") else None
    marker_dir = Path(argv[argv.index("--marker-dir") + 1]) if "--marker-dir" in argv else Path()
    # The protocol gets its own copy of stdout; whatever a library prints goes to stderr.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    asyncio.run(serve(system_name, path, marker_dir, out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
