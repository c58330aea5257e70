"""``wait_for_user`` on the embedded engine reads a busy session's messages not at all.

Its reads are ``SNAPSHOT_WHEN_NEEDED``: ``get_agent_snapshot`` once the session
needs a person, and the attention part alone (``ATTENTION_SNAPSHOT``) while it
does not, which is every read but the last of a wait for a turn's end.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.app.rpcs import ATTENTION_SNAPSHOT, SNAPSHOT_WHEN_NEEDED
from dex_agents.cli.database import demo_flow
from dex_agents.domain.attention import SessionAttention, session_attention
from dex_agents.local import LocalRuntime
from dex_agents.ports.errors import FlowNotFoundError, SessionWaitTimeoutError
from tests.adapters.traced_sql import traced_statements
from tests.console.agents import question_flow, sessions_in_every_situation


async def test_the_view_is_the_whole_snapshot_exactly_when_a_session_needs_a_person(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.sqlite3"
    await sessions_in_every_situation(path)
    demo, asking = demo_flow(), question_flow()
    async with LocalRuntime(path, [demo, asking], workers=0, create=False) as runtime:
        client = runtime.flow_client
        needs: dict[str, SessionAttention | None] = {}
        for flow, session_id in (
            (demo, "idle"),
            (demo, "approval"),
            (demo, "queued"),
            (demo, "starting"),
            (asking, "question"),
        ):
            full = await client.invoke_rpc(flow, session_id, "get_agent_snapshot", None)
            attention = (await client.read_each(flow, [session_id], ATTENTION_SNAPSHOT))[session_id]
            view = await client.read_view(flow, session_id, SNAPSHOT_WHEN_NEEDED)
            needs[session_id] = session_attention(full)
            assert view == (attention if needs[session_id] is None else full), session_id
        with pytest.raises(FlowNotFoundError, match="nobody"):
            await client.read_view(demo, "nobody", SNAPSHOT_WHEN_NEEDED)
    assert needs == {
        "idle": SessionAttention.IDLE,
        "approval": SessionAttention.APPROVAL,
        "queued": SessionAttention.APPROVAL,
        "starting": None,
        "question": SessionAttention.QUESTION,
    }


async def test_a_wait_on_a_busy_session_reads_none_of_its_messages(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    await sessions_in_every_situation(path)
    demo = demo_flow()
    async with LocalRuntime(path, [demo], workers=0, create=False) as runtime:
        # No worker takes it: the session stays busy with the message queued.
        assert await runtime.sessions(demo).send_user_message("idle", "where is order 3")
    # A reader of its own, whose store has kept no row of the file, so each read is SQL.
    async with LocalRuntime(path, [demo], workers=0, create=False) as runtime:
        store = runtime.flow_client.engine.store
        assert isinstance(store, SqliteFlowStore)
        with traced_statements(store) as statements, pytest.raises(SessionWaitTimeoutError):
            await runtime.sessions(demo).wait_for_user("idle", timeout=timedelta(milliseconds=300))
    read_messages = [sql for sql in statements if "'AgentMessages'" in sql]
    read_chunks = [sql for sql in statements if "'AgentMessageChunks'" in sql]
    assert (read_messages, read_chunks) == ([], [])
    assert any("'AgentState'" in sql for sql in statements)  # it did read the session
    # Once a worker ends the turn, the wait returns the whole snapshot.
    async with LocalRuntime(path, [demo], workers=1, create=False) as runtime:
        sessions = runtime.sessions(demo)
        waited = await sessions.wait_for_user("idle")
        assert waited == await sessions.get_agent_snapshot("idle")
    assert session_attention(waited) is SessionAttention.IDLE
    assert [message.text for message in waited.messages if message.role == "user"][-1] == (
        "where is order 3"
    )
