"""A session database to damage, and a reader that reports what survived of it.

``build_database`` fills a file with sessions that each ran a few turns (a
tool call among them), and gives session ``s-4`` one long message whose text
is easy to find in the file's bytes (``stored_pieces`` finds a piece of every
stored copy of its middle, compressed or not). ``read_everything`` opens a file the
way a restarted program would, as a client only, and reads every session it
was told of through the public client: the messages, the snapshot, the Stream
and the Step history, each read kept as its value or the error it raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import sqlite3
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from pathlib import Path

from dex_agents.adapters.local.sqlite_versions import NEW_FILE_PAGE_SIZE
from dex_agents.adapters.local.stored_text import unpack
from dex_agents.local import LocalRuntime
from tests.reliability.conftest import reliability_flow
from tests.reliability.harness import finished_tool_calls, stored_messages

PAGE_SIZE = NEW_FILE_PAGE_SIZE
"""The page size of a session database the store creates."""

SESSIONS = [f"s-{n}" for n in range(10)]
DAMAGED_SESSION = "s-4"
TURN = timedelta(seconds=30)


def long_message(session: str) -> str:
    """About 13 KB of text, numbered so that any part of it can be found in the file."""
    return "".join(f"[{session} {n:05d}]" for n in range(1000))


def needle(session: str) -> bytes:
    """A part of the middle of ``long_message(session)``, well inside its overflow pages."""
    return f"[{session} 00500]".encode()


async def _fill(path: Path) -> None:
    flow = reliability_flow()
    async with LocalRuntime(path, [flow], poll_interval=timedelta(milliseconds=20)) as runtime:
        sessions = runtime.sessions(flow)
        for session in SESSIONS:
            await sessions.open_session(session)
            texts = ["look it up", f"hello from {session} " + "x" * 300]
            if session == DAMAGED_SESSION:
                texts.append(long_message(session))
            for text in texts:
                assert await sessions.send_user_message(session, text)
                await sessions.wait_for_user(session, timeout=TURN)


def build_database(path: Path) -> bytes:
    """Fill a new session database at ``path``, close it, and return its bytes."""
    asyncio.run(_fill(path))
    # A clean close checkpoints the write-ahead log into the file and removes it, so the
    # file alone holds every commit and damage to it cannot hide behind the log.
    assert not path.with_name(path.name + "-wal").exists()
    return path.read_bytes()


def overwrite_pages(data: bytes, pages: list[int], garbage: str, seed: int) -> bytes:
    """``data`` with whole ``pages`` replaced by seeded random bytes or zeros."""
    rng = random.Random(seed)
    damaged = bytearray(data)
    for page in pages:
        fill = rng.randbytes(PAGE_SIZE) if garbage == "random" else bytes(PAGE_SIZE)
        damaged[page * PAGE_SIZE : (page + 1) * PAGE_SIZE] = fill
    return bytes(damaged)


def stored_pieces(data: bytes, session: str) -> list[bytes]:
    """A piece of the file's bytes inside every stored copy of the middle of ``session``'s long message.

    A copy stored as text holds ``needle(session)`` itself. The store keeps long
    values compressed, and such a copy holds the needle only once inflated, so
    its piece is 16 bytes from the middle of the value's stored bytes.
    """
    pieces = [needle(session)] if needle(session) in data else []
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "copy.sqlite3"
        path.write_bytes(data)
        with contextlib.closing(sqlite3.connect(path)) as connection:
            stored = [
                value
                for table in ("attribute_values", "stream_events")
                for (value,) in connection.execute(f"SELECT value FROM {table}")
                if isinstance(value, bytes)
            ]
    for value in stored:
        if needle(session).decode() not in unpack(value):
            continue
        # A long value spans overflow pages, each starting with a page number, so the
        # piece is taken where the file holds 16 of its bytes together.
        middle = len(value) // 2
        piece = next(
            value[at : at + 16]
            for at in (*range(middle, len(value) - 16), *range(1, middle))
            if value[at : at + 16] in data
        )
        pieces.append(piece)
    assert pieces, f"the long message of {session} is not in the file"
    return pieces


@dataclass
class Reads:
    """What reading a database gave: each read's value, or the error it raised."""

    opened: BaseException | None = None
    values: dict[str, object] = field(default_factory=dict)
    errors: dict[str, BaseException] = field(default_factory=dict)


async def read_everything(path: Path, sessions_to_read: list[str]) -> Reads:
    """Open ``path`` as a client only and read every session named, each read on its own."""
    reads = Reads()
    flow = reliability_flow()
    runtime = LocalRuntime(path, [flow], workers=0, create=False)
    try:
        await runtime.__aenter__()
    except Exception as error:
        reads.opened = error
        return reads
    try:
        sessions = runtime.sessions(flow)
        client = runtime.flow_client
        jobs: dict[str, Callable[[], Awaitable[object]]] = {"list_flows": client.list_flows}
        for session in sessions_to_read:
            jobs[f"{session} messages"] = partial(stored_messages, sessions, session)
            jobs[f"{session} snapshot"] = partial(sessions.get_agent_snapshot, session)
            jobs[f"{session} stream"] = partial(finished_tool_calls, client, sessions, session)
            jobs[f"{session} history"] = partial(client.read_step_history, session)
        for name, job in jobs.items():
            try:
                value = await job()
            except Exception as error:
                reads.errors[name] = error
            else:
                reads.values[name] = list(value) if isinstance(value, Sequence) else value
    finally:
        await runtime.__aexit__(None, None, None)
    return reads
