"""A wait for a session in a process whose worker a damaged file stops says so at once.

Garbage over the locks table: a client's reads and a queued message miss it,
but every claim round of the worker meets it, so no Step runs until a person
repairs the file. Until 2026-12-07 ``wait_for_user`` in the worker's own process
waited out its whole timeout (5 minutes by default) and then said only that the
session did not need a person; the demo chat waited for an answer for ever.
Now it raises the file's ``StoreCorruptError``, naming the file and what to
do, and once a backup is restored in place the session goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from pathlib import Path

import pytest

from dex_agents.adapters.local.probes import wait_until
from dex_agents.adapters.local.sqlite_store import StoreCorruptError
from dex_agents.local import LocalRuntime
from dex_agents.ports.errors import StreamReadTimeoutError
from tests.reliability.conftest import reliability_flow
from tests.support.damaged_files import copy_file, damage_pages_of

WAIT = timedelta(seconds=30)


async def test_a_wait_beside_a_worker_a_damaged_file_stops_raises_and_goes_on_once_restored(
    tmp_path: Path,
) -> None:
    path, backup, flow = (
        tmp_path / "sessions.sqlite3",
        tmp_path / "backup.sqlite3",
        reliability_flow(),
    )
    poll = timedelta(milliseconds=20)
    async with LocalRuntime(path, [flow], poll_interval=poll) as runtime:
        await runtime.sessions(flow).open_session("s1")
        await runtime.sessions(flow).wait_for_user("s1", timeout=WAIT)
    # A client of its own queues the message, as an app's web process does.
    async with LocalRuntime(path, [flow], workers=0) as client:
        assert await client.sessions(flow).send_user_message("s1", "hello")
    copy_file(path, backup)
    damage_pages_of(path, "locks")
    async with LocalRuntime(path, [flow], poll_interval=poll) as runtime:
        sessions = runtime.sessions(flow)
        with pytest.raises(StoreCorruptError) as stopped:
            await sessions.wait_for_user("s1", timeout=WAIT)
        # Before, the wait ran to its timeout and said the session did not need a person.
        message = str(stopped.value)
        assert message.startswith(f"no Step of this process can run: {path} is damaged: ")
        assert f"sqlite3 '{path}' \".restore BACKUP\"" in message
        copy_file(backup, path)
        # The worker's next try, within its longest backoff, finds the file whole.
        engine = runtime.flow_client.engine
        assert await wait_until("the worker's next try", lambda: not engine.stalls.stalled)
        done = await sessions.wait_for_user("s1", timeout=WAIT)
    assert done.messages[-1].text == "echo: hello"


async def test_a_stream_poll_that_began_before_the_worker_stalled_raises_once_it_does(
    tmp_path: Path,
) -> None:
    path, flow = tmp_path / "sessions.sqlite3", reliability_flow()
    poll = timedelta(milliseconds=20)
    async with LocalRuntime(path, [flow], poll_interval=poll) as runtime:
        await runtime.sessions(flow).open_session("s1")
        await runtime.sessions(flow).wait_for_user("s1", timeout=WAIT)
    async with LocalRuntime(path, [flow], poll_interval=poll) as runtime:
        client = runtime.flow_client
        # The worker is idle on pages it read before: it meets the damage at the next commit.
        damage_pages_of(path, "locks")
        token = ""
        with contextlib.suppress(StreamReadTimeoutError):
            while True:
                token = (await client.read_stream(flow, "s1", token, timedelta(0))).resume_token

        async def follow() -> None:
            nonlocal token
            while True:  # the queued message's events, then the poll past them
                token = (await client.read_stream(flow, "s1", token, WAIT)).resume_token

        following = asyncio.create_task(follow())
        # Another process's client queues the message; this worker's rounds then meet the
        # page, the third of them 0.35 s later at least, while the poll already waits.
        async with LocalRuntime(path, [flow], workers=0) as other:
            assert await other.sessions(flow).send_user_message("s1", "hello")
        # Before, a poll already waiting when the worker stalled ran to its timeout.
        with pytest.raises(StoreCorruptError, match=r"^no Step of this process can run: "):
            await following
