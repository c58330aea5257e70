"""Storage faults: the worker lives through them, RPCs fail clearly and change nothing.

Each scenario breaks the file system under a running session (read-only,
full, the file deleted), checks that a client's call fails with a clear
``StoreError`` and leaves the session as it was, then clears the fault and
checks that the same worker, never restarted, finishes the session's work.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from pathlib import Path

import pytest

from dex_agents.adapters.local.sqlite_store import StoreError, StoreFileGoneError
from dex_agents.domain.messages import MessageRole
from dex_agents.local import LocalRuntime
from tests.reliability.conftest import SmallFileSystem, reliability_flow

FAST = timedelta(milliseconds=20)
TURN = timedelta(seconds=20)


async def _idle_session(runtime: LocalRuntime, session_id: str) -> None:
    sessions = runtime.sessions(runtime.flows[0])  # type: ignore[arg-type]
    await sessions.open_session(session_id)
    await sessions.wait_for_user(session_id, timeout=TURN)


async def test_the_worker_survives_a_full_disk(
    small_fs: SmallFileSystem, caplog: pytest.LogCaptureFixture
) -> None:
    # A file system cannot be remounted read-only under open writers (EBUSY), so a
    # read-only file is tested where it is found: when the database opens.
    flow = reliability_flow()
    async with LocalRuntime(small_fs.path / "db.sqlite3", [flow], poll_interval=FAST) as runtime:
        sessions = runtime.sessions(flow)
        await _idle_session(runtime, "s-1")
        caplog.set_level(logging.WARNING, logger="dex_agents.engine")
        small_fs.fill()
        accepted = 0
        refusal: StoreError | None = None
        try:
            for attempt in range(200):  # the WAL may take a few pages before it is full
                try:
                    await sessions.send_user_message("s-1", f"message {attempt}")
                except StoreError as error:
                    refusal = error
                    break
                accepted += 1
        finally:
            small_fs.free()
        assert refusal is not None
        assert "full" in str(refusal)
        # Every message acknowledged before the disk filled up is kept; the refused one is not.
        after = await sessions.wait_for_user("s-1", timeout=TURN)
        stored = [m.text for m in after.messages if m.role is MessageRole.USER]
        assert stored == [f"message {n}" for n in range(accepted)]
        # A durable wait's Timer fires while the disk is full: the worker's claim fails until
        # the disk has room again, and then the same worker ends the turn.
        assert await sessions.send_user_message("s-1", "wait a second")
        small_fs.fill()
        await asyncio.sleep(2.5)
        small_fs.free()
        waited = await sessions.wait_for_user("s-1", timeout=TURN)
        assert waited.state is not None
        assert waited.state.last_turn_error is None
        logged = [r for r in caplog.records if "failed; retrying" in r.getMessage()]
        assert 1 <= len(logged) <= 5, "each fault is logged once, not on every try"
        # The same worker, never restarted, runs the next turn.
        assert await sessions.send_user_message("s-1", "look up order 7")
        done = await sessions.wait_for_user("s-1", timeout=TURN)
        assert done.messages[-1].text == "done: order 7 shipped"
        assert done.state is not None
        assert done.state.last_turn_error is None


async def test_a_deleted_database_is_noticed_and_never_written(tmp_path: Path) -> None:
    flow = reliability_flow()
    database = tmp_path / "db.sqlite3"
    async with LocalRuntime(database, [flow], poll_interval=FAST) as runtime:
        sessions = runtime.sessions(flow)
        await _idle_session(runtime, "s-1")
        database.unlink()
        with pytest.raises(StoreFileGoneError, match="was deleted or replaced"):
            await sessions.send_user_message("s-1", "into the void")
        with pytest.raises(StoreFileGoneError):
            await sessions.get_agent_snapshot("s-1")
    assert not database.exists()


async def test_a_replaced_database_is_noticed(tmp_path: Path) -> None:
    flow = reliability_flow()
    database = tmp_path / "db.sqlite3"
    async with LocalRuntime(database, [flow], poll_interval=FAST) as runtime:
        sessions = runtime.sessions(flow)
        await _idle_session(runtime, "s-1")
        replacement = tmp_path / "other.sqlite3"
        async with LocalRuntime(replacement, [reliability_flow()], workers=0):
            pass
        replacement.replace(database)
        with pytest.raises(StoreFileGoneError, match="restart the process"):
            await sessions.send_user_message("s-1", "to the wrong file")
