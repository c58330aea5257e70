"""What a test reads of a Flow run: the status it comes to, and the Channel messages
its file holds (read raw, past the engine, as a person looking at the file would)."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from dex_agents.adapters.local.probes import wait_until
from dex_agents.ports.flow_client import FlowClient, FlowInfo
from dex_agents.ports.flow_rows import FlowStatus


async def wait_for_status(client: FlowClient, flow_id: str, status: FlowStatus) -> FlowInfo:
    """Wait, within ``wait_until``'s deadline, until the Flow run ``flow_id`` has ``status``;
    return what ``describe_flow`` said then."""

    async def reached() -> FlowInfo | None:
        info = await client.describe_flow(flow_id)
        return info if info.status == status else None

    return await wait_until(f"Flow run {flow_id!r} to be {status}", reached)


def channel_texts(path: Path, flow_id: str, channel: str) -> list[str]:
    """The stored values of the messages waiting in ``flow_id``'s ``channel``, as text."""
    with contextlib.closing(sqlite3.connect(path)) as raw:
        rows = raw.execute(
            "SELECT CAST(value AS TEXT) FROM channel_messages WHERE flow_id = ? AND channel = ?",
            (flow_id, channel),
        ).fetchall()
    return [text for (text,) in rows]
