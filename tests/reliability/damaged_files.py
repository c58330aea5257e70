"""A session database to damage, and a reader that reports what survived of it.

``build_database`` fills a file with sessions that each ran a few turns (a
tool call among them), and gives session ``s-4`` one long message whose text
is easy to find in the file's bytes (``damage_message_pages`` overwrites every
page that holds a copy of its middle). ``read_everything`` opens a file the
way a restarted program would, as a client only, and reads every session it
was told of through the public client: the messages, the snapshot, the Stream
and the Step history, each read kept as its value or the error it raised.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from pathlib import Path

from dex_agents.local import LocalRuntime
from tests.reliability.conftest import reliability_flow
from tests.reliability.harness import finished_tool_calls, stored_messages

PAGE_SIZE = 4096
"""SQLite's default page size, which the session database keeps."""

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


def message_pages(data: bytes, session: str) -> list[int]:
    """Every page that holds a copy of the middle of ``session``'s long message."""
    found, start = [], data.find(needle(session))
    while start != -1:
        found.append(start // PAGE_SIZE)
        start = data.find(needle(session), start + 1)
    assert found, f"the long message of {session} is not in the file"
    return sorted(set(found))


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
