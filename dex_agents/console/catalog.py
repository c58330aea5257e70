"""The sessions of one database as the console sees them: which Flow reads each, and the inbox.

The console serves the Flows it is given with workers in this process, and
reads the sessions of every other Flow type in the file through a viewer Flow
on a runtime with no worker (``dex_agents.cli.database.viewer_flow``), so it
never runs their Steps. Those sessions are read-only. Flow types that appear in
the file after the console opened it are listed from their Flow runs alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import DEFAULT_LEASE_DURATION
from dex_agents.cli.database import (
    attention_snapshots,
    flow_types_in,
    last_activities,
    viewer_flow,
)
from dex_agents.cli.listing import snapshot_status, step_status
from dex_agents.composition.session_client import AgentSessionClient
from dex_agents.composition.session_flow import AgentSessionFlow
from dex_agents.domain.attention import SessionAttention, session_attention
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.local import LocalRuntime
from dex_agents.ports.errors import FlowNotFoundError
from dex_agents.ports.flow_client import FlowInfo

_PROBE_FLOW_TYPE = "DexAgentsConsoleProbe"

# Sessions that need a person come first: a decision, then a failed turn, then an idle one.
_ATTENTION_RANK = {
    SessionAttention.APPROVAL: 0,
    SessionAttention.QUESTION: 0,
    SessionAttention.TURN_FAILED: 1,
    SessionAttention.IDLE: 2,
}
_WORKING_RANK = 3
_CLOSED_RANK = 4


@dataclass(frozen=True)
class ConsoleFlow:
    """How the console reaches the sessions of one Flow type."""

    flow: AgentSessionFlow
    runtime: LocalRuntime
    writable: bool
    """Whether this process serves the Flow (its workers run the sessions' Steps)."""

    @property
    def plan_mode(self) -> bool:
        """Whether the Flow takes messages in plan mode (``plan_mode_enabled``)."""
        return self.flow.options.plan_mode_enabled

    @property
    def sessions(self) -> AgentSessionClient:
        """The session client of the Flow, for its RPCs."""
        return self.runtime.sessions(self.flow)


@dataclass(frozen=True)
class InboxRow:
    """One session in the inbox."""

    session_id: str
    flow_type: str
    status: str
    attention: str | None
    waits_for: str | None
    last_activity: datetime
    writable: bool
    rank: int

    def to_json(self) -> dict[str, object]:
        """The row as the browser reads it."""
        return {
            "session_id": self.session_id,
            "flow_type": self.flow_type,
            "status": self.status,
            "attention": self.attention,
            "needs_person": self.rank < _WORKING_RANK,
            "running": self.rank != _CLOSED_RANK,
            "waits_for": self.waits_for,
            "last_activity": self.last_activity.isoformat(),
            "writable": self.writable,
        }


@dataclass(frozen=True)
class _InboxBuild:
    """The inbox as built at a change mark: each session's row, and all of them in order."""

    mark: int
    rows: dict[str, InboxRow]
    ordered: list[InboxRow]


def _waits_for(snapshot: AgentSnapshot) -> str | None:
    if not snapshot.pending_interrupts:
        return None
    first = snapshot.pending_interrupts[0]
    if first.question:
        return f"{first.kind}: {first.question}"
    return f"{first.kind} of {first.tool_name}"


class SessionCatalog:
    """The database's sessions, each with the ``ConsoleFlow`` that reaches it."""

    def __init__(self, reader: LocalRuntime, flows: Sequence[ConsoleFlow]) -> None:
        self._reader = reader
        self._flows = {entry.flow.flow_type: entry for entry in flows}
        self._inbox: _InboxBuild | None = None
        self._inbox_lock = asyncio.Lock()

    @property
    def writable_flow_types(self) -> list[str]:
        """The Flow types this process serves: the ones a new session can have."""
        return sorted(t for t, entry in self._flows.items() if entry.writable)

    @property
    def plan_mode_flow_types(self) -> list[str]:
        """The Flow types this process serves whose sessions take plan mode."""
        return [t for t in self.writable_flow_types if self._flows[t].plan_mode]

    def flow(self, flow_type: str) -> ConsoleFlow | None:
        """The ``ConsoleFlow`` of ``flow_type``, or ``None`` when the console cannot read it."""
        return self._flows.get(flow_type)

    async def describe(self, session_id: str) -> FlowInfo:
        """The session's Flow run; ``FlowNotFoundError`` when the file has none with this ID."""
        return await self._reader.flow_client.describe_flow(session_id)

    async def list_sessions(self) -> Sequence[FlowInfo]:
        """Every Flow run in the file."""
        return await self._reader.flow_client.list_flows()

    def _reach(self, flow_type: str) -> tuple[LocalFlowClient, AgentSessionFlow] | None:
        entry = self._flows.get(flow_type)
        return None if entry is None else (entry.runtime.flow_client, entry.flow)

    async def inbox(self) -> list[InboxRow]:
        """Every session's inbox row, in ``inbox_order``; rows are rebuilt only for the sessions
        that changed since the last build.

        Pages poll the inbox every few seconds, and a row costs a snapshot read.
        While any session works the file changes all the time, and rebuilding every
        row after each change cost 0.8 ms a session (1,000 sessions: 0.8 s a
        refresh). The engine's looks at the store's change log say which runs any
        commit, by any process, changed since the mark taken before the last build
        (``runs_changed_after``); the other rows are still exact. When the looks
        cannot tell, every row is rebuilt.
        """
        engine = self._reader.flow_client.engine
        # One build at a time: pages that poll together share it.
        async with self._inbox_lock:
            # Marked before reading: a change during the build makes the next call rebuild it.
            mark = await engine.flow_change_mark()
            built = self._inbox
            if built is not None and built.mark == mark:
                return built.ordered
            changed = None if built is None else engine.runs_changed_after(built.mark)
            if built is None or changed is None:
                rows: dict[str, InboxRow] = {}
                infos = await self.list_sessions()
            elif not changed:  # a commit of no session: nothing to read or order again
                self._inbox = replace(built, mark=mark)
                return built.ordered
            else:
                rows = dict(built.rows)
                infos = await self._describe_all(sorted(changed))
            rows.update(await self._rows(infos))
            self._inbox = _InboxBuild(mark, rows, inbox_order(list(rows.values())))
            return self._inbox.ordered

    async def _describe_all(self, session_ids: Sequence[str]) -> list[FlowInfo]:
        infos = []
        for session_id in session_ids:
            with contextlib.suppress(FlowNotFoundError):
                infos.append(await self.describe(session_id))
        return infos

    async def inbox_row(self, info: FlowInfo) -> InboxRow:
        """The inbox row of one session."""
        return (await self._rows([info]))[info.flow_id]

    async def _rows(self, infos: Sequence[FlowInfo]) -> dict[str, InboxRow]:
        # Two reads for all of them, not two a session: a first build reads every session.
        activities = await last_activities(self._reader.flow_client, infos)
        snapshots = await attention_snapshots(infos, self._reach)
        return {
            info.flow_id: self._row(info, snapshots.get(info.flow_id), activities[info.flow_id])
            for info in infos
        }

    def _row(
        self, info: FlowInfo, snapshot: AgentSnapshot | None, last_activity: datetime
    ) -> InboxRow:
        entry = self._flows.get(info.flow_type)
        attention = None if snapshot is None else session_attention(snapshot)
        if snapshot is None or snapshot.state is None:
            status = step_status(info)
        else:
            status = snapshot_status(info, snapshot)
        if info.status != "running":
            rank = _CLOSED_RANK
        elif attention is None:
            rank = _WORKING_RANK
        else:
            rank = _ATTENTION_RANK[attention]
        return InboxRow(
            session_id=info.flow_id,
            flow_type=info.flow_type,
            status=status,
            attention=None if attention is None or info.status != "running" else str(attention),
            # A stopped or failed session never takes the answer its interrupt asked for.
            waits_for=None
            if snapshot is None or info.status != "running"
            else _waits_for(snapshot),
            last_activity=last_activity,
            writable=entry is not None and entry.writable and info.status == "running",
            rank=rank,
        )


def inbox_order(rows: Sequence[InboxRow]) -> list[InboxRow]:
    """Sessions that need a person first, then the rest; the latest activity first within each."""
    by_recent = sorted(rows, key=lambda row: row.last_activity, reverse=True)
    return sorted(by_recent, key=lambda row: row.rank)


@contextlib.asynccontextmanager
async def open_catalog(
    db: str | os.PathLike[str],
    flows: Sequence[AgentSessionFlow],
    *,
    workers: int = 1,
    create: bool = True,
    lease_duration: timedelta = DEFAULT_LEASE_DURATION,
) -> AsyncIterator[SessionCatalog]:
    """``db`` with ``flows`` served by ``workers`` workers here and every other type read-only."""
    served_types = {flow.flow_type for flow in flows}
    async with contextlib.AsyncExitStack() as stack:
        entries: list[ConsoleFlow] = []
        if flows:
            served = await stack.enter_async_context(
                LocalRuntime(
                    db, list(flows), workers=workers, create=create, lease_duration=lease_duration
                )
            )
            entries.extend(ConsoleFlow(flow=f, runtime=served, writable=True) for f in flows)
            reader = served
        else:
            probe_flow = viewer_flow(_PROBE_FLOW_TYPE)
            if probe_flow is None:  # pragma: no cover - the name is a valid Flow type
                raise AssertionError(f"{_PROBE_FLOW_TYPE} is not a valid Flow type")
            reader = await stack.enter_async_context(
                LocalRuntime(db, [probe_flow], workers=0, create=create)
            )
        other_types = await flow_types_in(reader.flow_client)
        viewers = [
            viewer
            for flow_type in sorted(other_types - served_types)
            if (viewer := viewer_flow(flow_type)) is not None
        ]
        if viewers:
            reader = await stack.enter_async_context(
                LocalRuntime(db, viewers, workers=0, create=False)
            )
            entries.extend(ConsoleFlow(flow=v, runtime=reader, writable=False) for v in viewers)
        yield SessionCatalog(reader, entries)
