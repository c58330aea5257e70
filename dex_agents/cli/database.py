"""The session database of every ``dex-agents`` command, opened through ``LocalRuntime``.

``chat`` opens it to serve the demo agent (creating the file when it is new);
``sessions`` and ``show`` open it to read, with no worker and never creating
it. ``LocalRuntime`` checks the path when it opens, so a faulty one is reported
(``DatabaseFileError``, one wording per fault) before anyone types anything.

Sessions of Flow types this program does not serve are read through a viewer
Flow: every session Flow type has the same schema and RPCs, and the read RPCs
(``get_agent_snapshot``, ``list_agent_messages``) never call the runner, so a
session Flow of that type with a runner that refuses to run reads them. No
worker runs its Steps: readers have none.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NoReturn

from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.store_errors import StoreCorruptError
from dex_agents.app.rpcs import ATTENTION_SNAPSHOT
from dex_agents.builtin_loop import builtin_agent_session_flow
from dex_agents.cli.demo_agent import DEMO_FLOW_TYPE, build_demo_agent
from dex_agents.composition.session_flow import AgentSessionFlow
from dex_agents.domain.errors import DexAgentsError
from dex_agents.domain.messages import FrameworkMessage
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.runner_outcomes import AgentTurnOutcome, ToolExecutionResult
from dex_agents.local import LocalRuntime
from dex_agents.ports.flow_client import FlowInfo
from dex_agents.ports.flow_store import StoreTransaction
from dex_agents.ports.model_client import ModelClient
from dex_agents.ports.runner import AgentTurnContext, DeferredToolExecution
from dex_agents.ports.tool_source import ToolSource

CHAT_LEASE_DURATION = timedelta(seconds=3)
"""The chat's Step lease: short, so a chat killed during a Step resumes it within seconds."""


def demo_flow(
    model: ModelClient | None = None, tool_sources: Sequence[ToolSource] = ()
) -> AgentSessionFlow:
    """The session Flow of the demo agent (``DEMO_FLOW_TYPE``); ``model`` replaces its scripted
    one, and ``tool_sources`` add their tools."""
    return builtin_agent_session_flow(
        build_demo_agent(model, tool_sources), flow_type=DEMO_FLOW_TYPE
    )


@contextlib.asynccontextmanager
async def open_chat_runtime(
    db: str | os.PathLike[str], flow: AgentSessionFlow
) -> AsyncIterator[LocalRuntime]:
    """``flow``'s sessions in ``db`` with one worker in this process; creates a new file."""
    async with LocalRuntime(
        db, [flow], workers=1, create=True, lease_duration=CHAT_LEASE_DURATION
    ) as runtime:
        yield runtime


class _ReadOnlyRunner:
    """The runner of a viewer Flow: it is never asked to run, and refuses if it is."""

    def __init__(self, flow_type: str) -> None:
        self._flow_type = flow_type

    def _refuse(self) -> NoReturn:
        raise RuntimeError(f"dex-agents only reads {self._flow_type} sessions; it runs none")

    def build_user_message(self, text: str) -> FrameworkMessage:
        self._refuse()

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        self._refuse()

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        self._refuse()


def viewer_flow(flow_type: str) -> AgentSessionFlow | None:
    """A session Flow that reads the sessions of ``flow_type``; ``None`` for a type no session
    Flow can have (such as one with a ``/``)."""
    try:
        return AgentSessionFlow(_ReadOnlyRunner(flow_type), flow_type=flow_type)
    except ValueError:
        return None


@dataclass(frozen=True)
class Reader:
    """A database opened to read: its sessions, and a session Flow for each readable type."""

    runtime: LocalRuntime
    flows: Mapping[str, AgentSessionFlow]

    async def snapshot(self, info: FlowInfo) -> AgentSnapshot | None:
        """The session's snapshot, or ``None`` when it is not an agent session this can read;
        ``StoreCorruptError`` when its stored state is damaged.

        Through the engine's client rather than ``AgentSessionClient``: the IDs come
        from the file, and a listing shows a session another program started with
        an ID the session client would refuse.
        """
        flow = self.flows.get(info.flow_type)
        if flow is None:
            return None
        try:
            snapshot = await self.runtime.flow_client.invoke_rpc(
                flow, info.flow_id, "get_agent_snapshot", None
            )
        except StoreCorruptError:
            # A damaged session is an agent session all the same: "cannot read as an agent
            # session" sent a person looking at the wrong thing. Said as it is, with the
            # value to repair.
            raise
        except DexAgentsError:  # a Flow of its own with another schema, or one that went away
            return None
        return snapshot if isinstance(snapshot, AgentSnapshot) else None

    async def attention_snapshots(self, infos: Sequence[FlowInfo]) -> dict[str, AgentSnapshot]:
        """``attention_snapshots`` of ``infos`` through this reader's Flows."""
        return await attention_snapshots(infos, self._reach)

    def _reach(self, flow_type: str) -> tuple[LocalFlowClient, AgentSessionFlow] | None:
        flow = self.flows.get(flow_type)
        return None if flow is None else (self.runtime.flow_client, flow)

    async def last_activities(self, infos: Sequence[FlowInfo]) -> dict[str, datetime]:
        """``last_activities`` of ``infos`` in this reader's file."""
        return await last_activities(self.runtime.flow_client, infos)


SessionReach = Callable[[str], tuple[LocalFlowClient, AgentSessionFlow] | None]
"""The client and session Flow that read the sessions of a Flow type, ``None`` for none."""


async def attention_snapshots(
    infos: Sequence[FlowInfo], reach: SessionReach
) -> dict[str, AgentSnapshot]:
    """What says whether each session needs a person (``ATTENTION_SNAPSHOT``), one read per
    Flow type; a session not readable as an agent session is left out.

    A listing's status needs no message, and a session's snapshot reads up to 200
    (a first inbox of 100 sessions 50 turns long took 0.46 s): this reads none.
    Through the engine's client: the IDs come from the file, and a listing shows a
    session another program started with an ID the session client would refuse.
    """
    by_type: dict[str, list[str]] = {}
    for info in infos:
        by_type.setdefault(info.flow_type, []).append(info.flow_id)
    found: dict[str, AgentSnapshot] = {}
    for flow_type, session_ids in by_type.items():
        reached = reach(flow_type)
        if reached is not None:
            client, flow = reached
            found.update(await client.read_each(flow, session_ids, ATTENTION_SNAPSHOT))
    return found


async def last_activities(
    client: LocalFlowClient, infos: Sequence[FlowInfo]
) -> dict[str, datetime]:
    """When a Step of each session was last scheduled or finished (its start before any), in
    one read.

    From the engine's store: Step history entries carry no times, and this is the
    newest thing a session did (an RPC that only reads does nothing).
    """

    def newest(tx: StoreTransaction) -> dict[str, datetime]:
        return {
            info.flow_id: tx.last_step_activity(info.flow_id) or info.started_at for info in infos
        }

    return await client.engine.read(newest)


async def flow_types_in(client: LocalFlowClient) -> set[str]:
    """The Flow types of the file's runs, from their Flow rows alone: ``list_flows`` also
    reads each run's active Steps, which the types do not need."""

    def types(tx: StoreTransaction) -> set[str]:
        return {row.flow_type for row in tx.list_flows()}

    return await client.engine.read(types)


@contextlib.asynccontextmanager
async def open_reader(
    db: str | os.PathLike[str], flow_types: Iterable[str] | None = None
) -> AsyncIterator[Reader]:
    """``db`` opened to read the sessions of ``flow_types`` (of every type in it by default).

    With no worker and ``create=False``: a missing file is an error, never a new
    database. The Flow types are found in a first look at the file when not given.
    """
    demo = demo_flow()
    if flow_types is None:
        async with LocalRuntime(db, [demo], workers=0, create=False) as probe:
            others = await flow_types_in(probe.flow_client) - {DEMO_FLOW_TYPE}
            if not others:
                yield Reader(probe, {DEMO_FLOW_TYPE: demo})
                return
        flow_types = others
    flows: dict[str, AgentSessionFlow] = {DEMO_FLOW_TYPE: demo}
    for flow_type in set(flow_types) - {DEMO_FLOW_TYPE}:
        viewer = viewer_flow(flow_type)
        if viewer is not None:
            flows[flow_type] = viewer
    async with LocalRuntime(db, list(flows.values()), workers=0, create=False) as runtime:
        yield Reader(runtime, flows)
