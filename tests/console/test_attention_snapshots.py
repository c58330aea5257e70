"""A listing's status comes from ``ATTENTION_SNAPSHOT``: ``get_agent_snapshot`` without messages.

The console's inbox and ``dex-agents sessions`` read every session in the file.
They read each one's state, interrupts and queued messages, one read per Flow
type, and none of its messages or tool call records.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.cli.database import attention_snapshots, demo_flow
from dex_agents.composition.session_flow import AgentSessionFlow
from dex_agents.console.catalog import ConsoleFlow, SessionCatalog
from dex_agents.domain.attention import SessionAttention, session_attention
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.usage import AgentUsage
from dex_agents.local import LocalRuntime
from tests.adapters.traced_sql import traced_statements
from tests.console.agents import question_flow, sessions_in_every_situation


def _without_messages(snapshot: AgentSnapshot) -> AgentSnapshot:
    return attrs.evolve(
        snapshot,
        messages=(),
        tool_calls=(),
        usage=AgentUsage(),
        plan=None,
        session_settings={},
        context_summary=None,
        deleted_before_sequence=None,
    )


async def test_each_session_gets_its_snapshot_without_messages_in_one_read_per_flow_type(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.sqlite3"
    await sessions_in_every_situation(path)
    flows: dict[str, AgentSessionFlow] = {f.flow_type: f for f in (demo_flow(), question_flow())}
    async with LocalRuntime(path, list(flows.values()), workers=0, create=False) as runtime:
        client = runtime.flow_client
        infos = await client.list_flows()
        got = await attention_snapshots(infos, lambda flow_type: (client, flows[flow_type]))
        expected = {}
        for info in infos:
            full = await client.invoke_rpc(
                flows[info.flow_type], info.flow_id, "get_agent_snapshot", None
            )
            expected[info.flow_id] = _without_messages(full)
        # A Flow type the caller cannot reach is left out.
        demo_only = await attention_snapshots(
            infos,
            lambda flow_type: (
                (client, flows[flow_type]) if flow_type == "DemoSupportAgent" else None
            ),
        )
    assert got == expected
    assert {session_id: session_attention(snapshot) for session_id, snapshot in got.items()} == {
        "idle": SessionAttention.IDLE,
        "approval": SessionAttention.APPROVAL,
        "queued": SessionAttention.APPROVAL,
        "question": SessionAttention.QUESTION,
        "starting": None,
    }
    assert got["queued"].queued_message_count == 1
    assert got["starting"].state is None
    assert all(not snapshot.messages for snapshot in got.values())
    assert sorted(demo_only) == ["approval", "idle", "queued", "starting"]


async def test_an_inbox_reads_no_message_of_any_session(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    await sessions_in_every_situation(path)
    demo = demo_flow()
    # A reader of its own: its store has kept no row of the file yet.
    async with LocalRuntime(path, [demo], workers=0, create=False) as runtime:
        catalog = SessionCatalog(runtime, [ConsoleFlow(flow=demo, runtime=runtime, writable=False)])
        store = runtime.flow_client.engine.store
        assert isinstance(store, SqliteFlowStore)
        with traced_statements(store) as statements:
            rows = await catalog.inbox()
    attention = {row.session_id: row.attention for row in rows}
    assert attention == {
        "idle": "idle",
        "approval": "approval",
        "queued": "approval",
        "starting": None,
        "question": None,  # a Flow type this catalog does not read
    }
    read_messages = [sql for sql in statements if "'AgentMessages'" in sql]
    read_chunks = [sql for sql in statements if "'AgentMessageChunks'" in sql]
    assert (read_messages, read_chunks) == ([], [])
    assert any("attribute_values" in sql for sql in statements)  # it did read the file
