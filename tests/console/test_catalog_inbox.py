"""The console's inbox rebuilds only the rows of the sessions that changed since its last build."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dex_agents.cli.database import demo_flow
from dex_agents.console.catalog import ConsoleFlow, InboxRow, SessionCatalog, open_catalog
from dex_agents.local import LocalRuntime


def _by_id(rows: list[InboxRow]) -> dict[str, InboxRow]:
    return {row.session_id: row for row in rows}


async def _start_idle_sessions(catalog: SessionCatalog, *session_ids: str) -> None:
    flow = catalog.flow("DemoSupportAgent")
    assert flow is not None
    for session_id in session_ids:
        await flow.sessions.start_session(session_id, "where is order 7")
        await flow.sessions.wait_for_user(session_id)


async def _ask_for_a_refund(catalog: SessionCatalog, session_id: str) -> None:
    flow = catalog.flow("DemoSupportAgent")
    assert flow is not None
    await flow.sessions.send_user_message(session_id, "refund order 8 $2")
    await flow.sessions.wait_for_user(session_id)


@pytest.fixture
async def catalog(tmp_path: Path) -> AsyncIterator[SessionCatalog]:
    async with open_catalog(tmp_path / "s.sqlite3", [demo_flow()]) as opened:
        await _start_idle_sessions(opened, "a", "b", "c")
        yield opened


async def test_a_session_that_changed_gets_a_new_row_and_the_others_keep_theirs(
    catalog: SessionCatalog,
) -> None:
    before = _by_id(await catalog.inbox())
    assert {row.attention for row in before.values()} == {"idle"}
    await _ask_for_a_refund(catalog, "b")
    after = await catalog.inbox()
    assert after[0].session_id == "b"  # it needs a person now
    rows = _by_id(after)
    assert rows["b"].attention == "approval"
    assert rows["b"].last_activity > before["b"].last_activity
    # Not read again: no commit changed them.
    assert rows["a"] is before["a"]
    assert rows["c"] is before["c"]


async def test_a_new_session_from_another_process_gets_a_row(
    catalog: SessionCatalog, tmp_path: Path
) -> None:
    before = _by_id(await catalog.inbox())
    flow = demo_flow()
    async with LocalRuntime(tmp_path / "s.sqlite3", [flow], workers=0, create=False) as other:
        await other.sessions(flow).start_session("d")
    rows = _by_id(await catalog.inbox())
    assert sorted(rows) == ["a", "b", "c", "d"]
    assert rows["d"].status in {"starting", "waiting for a message"}
    assert all(rows[session_id] is before[session_id] for session_id in "abc")


async def test_a_commit_that_changed_no_session_rebuilds_no_row(
    catalog: SessionCatalog, tmp_path: Path
) -> None:
    before = await catalog.inbox()
    # Another program's commit to a table of its own moves the file's change counter.
    with sqlite3.connect(tmp_path / "s.sqlite3") as other:
        other.execute("CREATE TABLE notes (text TEXT)")
        other.execute("INSERT INTO notes VALUES ('hello')")
    other.close()
    after = await catalog.inbox()
    assert after == before
    assert after is before  # nothing was read or ordered again
    assert all(new is old for new, old in zip(after, before, strict=True))


async def test_without_a_change_log_every_row_is_rebuilt() -> None:
    flow = demo_flow()
    async with LocalRuntime(None, [flow], workers=1) as runtime:
        catalog = SessionCatalog(runtime, [ConsoleFlow(flow=flow, runtime=runtime, writable=True)])
        await _start_idle_sessions(catalog, "a", "b")
        before = _by_id(await catalog.inbox())
        await _ask_for_a_refund(catalog, "a")
        rows = _by_id(await catalog.inbox())
        assert rows["a"].attention == "approval"
        assert rows["b"] == before["b"]
        assert rows["b"] is not before["b"]  # the memory store logs no changes: read again
