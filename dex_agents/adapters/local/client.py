"""The embedded engine's client: start and stop Flows, run RPCs, read Streams and history."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from dex_agents.adapters.local import handoff, transitions
from dex_agents.adapters.local.decoded_values import from_stored
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.event_read_ahead import EventReadAhead
from dex_agents.adapters.local.registry import RegisteredFlow
from dex_agents.adapters.local.rpcs import ReadFirstRpcs, RpcNeedsWriteError, rpc_call, run_rpc
from dex_agents.adapters.local.stream_owners import (
    CheckedStreamOwners,
)
from dex_agents.adapters.local.stream_reads import LocalStreamReads
from dex_agents.domain.errors import DexAgentsError
from dex_agents.domain.wire import to_json
from dex_agents.ports.engine import (
    FlowDefinition,
    Rpc,
)
from dex_agents.ports.errors import (
    FlowNotFoundError,
)
from dex_agents.ports.flow_client import (
    FlowInfo,
    StepHistoryEntry,
)
from dex_agents.ports.flow_rows import ACTIVE_EXECUTION_STATUSES, FlowRow
from dex_agents.ports.flow_store import StoreTransaction
from dex_agents.ports.persistence import AttributeDef
from dex_agents.ports.store_capabilities import CommittedEvents

T = TypeVar("T")
R = TypeVar("R")


async def commit(
    engine: LocalEngine,
    flow: RegisteredFlow,
    flow_id: str,
    work: Callable[[StoreTransaction], R],
) -> R:
    """Commit a client's ``work`` on session ``flow_id``, durably.

    With a worker in this process, the same commit leases it the Steps the work
    made runnable (``HandOffTarget``), so they start without a claim round.
    """
    target = engine.hand_off_target
    if target is None or target.loop is not asyncio.get_running_loop():
        return await engine.run(work)

    def handing_off(tx: StoreTransaction, owner: str, limit: int) -> tuple[R, handoff.HandOff]:
        output = work(tx)
        now = engine.now()
        return output, handoff.hand_off(tx, flow, flow_id, owner, now, engine.lease_duration, limit)

    return await target.commit_handing_off(handing_off)


class LocalFlowClient(LocalStreamReads):
    """A ``FlowClient`` of the embedded engine. Share its ``LocalEngine`` with a worker to run in one process."""

    def __init__(self, engine: LocalEngine) -> None:
        self._engine = engine
        self._read_ahead = EventReadAhead()
        # Checked once: a runtime Protocol check looks up every method.
        store = engine.store
        self._committed = store if isinstance(store, CommittedEvents) else None
        self._read_first = ReadFirstRpcs()
        self._stream_owners = CheckedStreamOwners()

    @property
    def engine(self) -> LocalEngine:
        """The engine this client talks to."""
        return self._engine

    async def start_flow(
        self,
        flow: FlowDefinition,
        flow_id: str,
        input: Any,
        *,
        initial_attributes: Mapping[AttributeDef[Any], Any] | None = None,
    ) -> str:
        """Start a Flow run; return its run ID. Raises ``FlowAlreadyStartedError``."""
        registered = self._engine.registered(flow)
        if not flow_id or "/" in flow_id:
            raise ValueError(f"a session ID must be non-empty and contain no '/': {flow_id!r}")
        input_json = to_json(input)
        initial = [
            (attribute.name, to_json(value))
            for attribute, value in (initial_attributes or {}).items()
        ]
        engine = self._engine
        return await commit(
            engine,
            registered,
            flow_id,
            lambda tx: transitions.start_flow(
                tx, registered, flow_id, input_json, initial, engine.now()
            ),
        )

    async def invoke_rpc(self, flow: FlowDefinition, flow_id: str, rpc: str, input: Any) -> Any:
        """Run an RPC in one transaction and return its output, decoded as its wire type."""
        engine = self._engine
        call = rpc_call(engine.registered(flow), flow_id, rpc, input, engine.now)
        # The output is returned as the handler built it: a frozen value of the declared
        # type, which crosses no process boundary here. Encoding it only to decode it
        # again cost more than the RPC itself for a snapshot of 200 messages.
        if self._read_first.reads_first(call.rpc):
            try:
                return await engine.read(call.read)
            except RpcNeedsWriteError:
                self._read_first.wrote(call.rpc)
        return await commit(engine, call.flow, flow_id, call.write)

    async def read_view(self, flow: FlowDefinition, flow_id: str, view: Rpc[None, T]) -> T:
        """The output of ``view``, a handler that writes nothing, on one session, in one read.

        ``view`` need not be one of the Flow's RPCs (``wait_for_user`` reads
        ``SNAPSHOT_WHEN_NEEDED``); it raises as an RPC would (``FlowNotFoundError``
        for a session that is not there), and a view that writes raises.
        """
        registered = self._engine.registered(flow)
        engine = self._engine
        return await engine.read(
            lambda tx: run_rpc(tx, registered, flow_id, view, None, engine.now(), read_only=True)
        )

    async def read_each(
        self, flow: FlowDefinition, flow_ids: Sequence[str], view: Rpc[None, T]
    ) -> dict[str, T]:
        """The output of ``view``, a handler that writes nothing, for each session in one read.

        ``view`` need not be one of the Flow's RPCs: a listing runs a part of a
        snapshot (``ATTENTION_SNAPSHOT``) on every session at once, where an RPC
        each would read them one transaction at a time. A session the view cannot
        read (no longer there, of another Flow type, or state it cannot decode:
        a ``DexAgentsError``) is left out; a view that writes raises.
        """
        registered = self._engine.registered(flow)
        engine = self._engine

        def each(tx: StoreTransaction) -> dict[str, T]:
            now = engine.now()
            outputs: dict[str, T] = {}
            for flow_id in flow_ids:
                try:
                    outputs[flow_id] = run_rpc(
                        tx, registered, flow_id, view, None, now, read_only=True
                    )
                except DexAgentsError:
                    continue
            return outputs

        return await engine.read(each)

    async def stop_flow(self, flow_id: str, reason: str | None = None) -> None:
        """Stop a Flow run; its Steps are cancelled and its state stays readable."""
        engine = self._engine

        def stop(tx: StoreTransaction) -> None:
            row = tx.get_flow(flow_id)
            if row is None:
                raise FlowNotFoundError(f"no session with ID {flow_id!r}")
            # A Flow type this process does not serve keeps its whole history here.
            registered = engine.flows.get(row.flow_type)
            limit = None if registered is None else registered.step_history_limit
            transitions.stop_flow(tx, flow_id, reason, engine.now(), limit)

        await engine.run(stop)

    async def describe_flow(self, flow_id: str) -> FlowInfo:
        """A Flow run's status and the Step types it is active in."""

        def describe(tx: StoreTransaction) -> FlowInfo:
            row = tx.get_flow(flow_id)
            if row is None:
                raise FlowNotFoundError(f"no session with ID {flow_id!r}")
            return _flow_info(tx, row)

        return await self._engine.read(describe)

    async def list_flows(self, flow_type: str | None = None) -> Sequence[FlowInfo]:
        """Every Flow run in the store (of one type), oldest first."""

        def list_all(tx: StoreTransaction) -> list[FlowInfo]:
            return [
                _flow_info(tx, row)
                for row in tx.list_flows()
                if flow_type is None or row.flow_type == flow_type
            ]

        return await self._engine.read(list_all)

    async def session_change_mark(self) -> int:
        """A mark of the store as of now, to take before reading a session's state:
        ``session_changed_since`` then says whether any commit changed it after."""
        return await self._engine.flow_change_mark()

    async def session_changed_since(self, flow_id: str, mark: int) -> bool:
        """Whether a commit changed session ``flow_id`` after ``mark`` (``True`` when the store
        cannot tell which sessions a commit changed).

        A wait for a person rereads the snapshot once the session's Stream has been
        quiet a while, since some changes write no event; when no commit changed the
        session, the snapshot would be the one it read.
        """
        await self._engine.flow_change_mark()  # a look now: the commits until then are seen
        return self._engine.run_changed_after(flow_id, mark)

    async def read_attribute(self, flow_id: str, attribute: AttributeDef[T]) -> T | None:
        """An Attribute's committed value, or ``None`` when it is unset."""

        def read(tx: StoreTransaction) -> str | None:
            if tx.get_flow(flow_id) is None:
                raise FlowNotFoundError(f"no session with ID {flow_id!r}")
            return tx.get_value(flow_id, attribute.name, "")

        text = await self._engine.read(read)
        return None if text is None else from_stored(text, attribute.value_type, self._engine.store)

    async def read_step_history(self, flow_id: str) -> Sequence[StepHistoryEntry]:
        """Completed Step executions, oldest first.

        Executions that finished in one commit share its time and are listed in
        the order they were created: a state-only Step run inside another Step's
        commit (``ResumeTurn`` woken by a tool's result) is listed before that
        Step when it was created first.
        """

        def history(tx: StoreTransaction) -> list[StepHistoryEntry]:
            if tx.get_flow(flow_id) is None:
                raise FlowNotFoundError(f"no session with ID {flow_id!r}")
            rows = [row for row in tx.flow_executions(flow_id) if row.final_event is not None]
            rows.sort(key=lambda row: (row.finished_at or row.created_at, row.id))
            return [
                StepHistoryEntry(
                    event_type=row.final_event or "",
                    step_type=row.step_type,
                    step_execution_id=row.step_execution_id,
                    final_attempt=row.attempt,
                )
                for row in rows
            ]

        return await self._engine.read(history)


def _flow_info(tx: StoreTransaction, row: FlowRow) -> FlowInfo:
    active = tx.flow_executions(row.flow_id, list(ACTIVE_EXECUTION_STATUSES))
    return FlowInfo(
        flow_id=row.flow_id,
        flow_type=row.flow_type,
        status=row.status.value,
        started_at=row.created_at,
        closed_at=row.closed_at,
        active_step_types=tuple(sorted({execution.step_type for execution in active})),
        failure_reason=row.failure_reason,
    )
