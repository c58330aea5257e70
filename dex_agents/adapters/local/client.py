"""The embedded engine's client: start and stop Flows, run RPCs, read Streams and history."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from dex_agents.adapters.local import handoff, transitions
from dex_agents.adapters.local.codec import decode_resume_token, encode_resume_token
from dex_agents.adapters.local.decoded_values import DECODED, from_stored
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.event_read_ahead import READ_AHEAD_EVENTS, EventReadAhead
from dex_agents.adapters.local.registry import RegisteredFlow
from dex_agents.adapters.local.staged_state import StagedState, TransactionSource
from dex_agents.adapters.local.stream_owners import (
    CheckedStreamOwners,
    flow_of_another_type,
    require_flow_type,
)
from dex_agents.adapters.local.undecodable_events import SKIPPED, decode_or_skip
from dex_agents.domain.errors import DexAgentsError
from dex_agents.domain.wire import from_json, to_json
from dex_agents.ports.engine import (
    FlowDefinition,
    Rpc,
    RpcResult,
)
from dex_agents.ports.errors import (
    FlowDefinitionError,
    FlowNotActiveError,
    FlowNotFoundError,
    RpcLockConflictError,
    StreamReadTimeoutError,
)
from dex_agents.ports.flow_client import (
    FlowInfo,
    StepHistoryEntry,
    StreamMessage,
    check_poll_timeout,
)
from dex_agents.ports.flow_rows import ACTIVE_EXECUTION_STATUSES, EventRow, FlowRow, FlowStatus
from dex_agents.ports.flow_store import StoreTransaction
from dex_agents.ports.persistence import AttributeDef, StateTransaction
from dex_agents.ports.store_capabilities import CommittedEvents

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_STREAM_POLL_TIMEOUT = timedelta(seconds=30)
"""How long ``read_stream`` long-polls by default."""


def poll_seconds(poll_timeout: timedelta | None) -> float:
    """The seconds ``read_stream`` waits for an event: 30 for ``None``; zero reads once, at once."""
    checked = check_poll_timeout(poll_timeout)
    return (DEFAULT_STREAM_POLL_TIMEOUT if checked is None else checked).total_seconds()


class LocalRpcContext:
    """An RPC's context: the session, the clock, and its transaction's state."""

    def __init__(self, flow_id: str, now: datetime, active: bool, state: StagedState) -> None:
        self._flow_id = flow_id
        self._now = now
        self._active = active
        self._state = state

    @property
    def flow_id(self) -> str:
        """The session ID."""
        return self._flow_id

    @property
    def now(self) -> datetime:
        """The engine's clock."""
        return self._now

    @property
    def flow_active(self) -> bool:
        """Whether the Flow still runs."""
        return self._active

    @property
    def state(self) -> StateTransaction:
        """The session's state in this transaction."""
        return self._state


class RpcNeedsWriteError(Exception):
    """An RPC tried as a read changed something: it runs again in a write transaction."""


class ReadFirstRpcs:
    """Which RPCs a client first tries as a read.

    An RPC that takes no lock and is not transactional may change nothing (a
    snapshot, a listing), and then needs no write lock, which a worker of another
    process may hold. One that turned out to write is run as a write from then on,
    so a message sent is not read twice.
    """

    def __init__(self) -> None:
        self._writers: set[str] = set()

    def reads_first(self, rpc: Rpc[Any, Any]) -> bool:
        """Whether to try ``rpc`` as a read."""
        return not rpc.locks and not rpc.is_transactional and rpc.name not in self._writers

    def wrote(self, rpc: Rpc[Any, Any]) -> None:
        """``rpc`` changed something when tried as a read."""
        self._writers.add(rpc.name)


def run_rpc(
    tx: StoreTransaction,
    flow: RegisteredFlow,
    flow_id: str,
    rpc: Rpc[Any, Any],
    input_value: Any,
    now: datetime,
    *,
    read_only: bool = False,
) -> Any:
    """Run an RPC handler in this transaction and apply its result; return its output.

    With ``read_only`` the transaction is a read: a handler that changes anything
    raises ``RpcNeedsWriteError`` before anything is written.
    """
    row = tx.get_flow(flow_id)
    if row is None or row.flow_type != flow.flow_type:
        raise FlowNotFoundError(f"no {flow.flow_type} session with ID {flow_id!r}")
    active = row.status is FlowStatus.RUNNING
    if (rpc.locks or rpc.is_transactional) and not active:
        raise FlowNotActiveError(f"session {flow_id!r} is {row.status.value}")
    for lock in rpc.locks:
        if tx.lock_holder(flow_id, lock.lock_name) is not None:
            raise RpcLockConflictError(
                f"{rpc.name}: a running Step of session {flow_id!r} holds {lock.lock_name}"
            )
    source = TransactionSource(tx, flow_id, flow.singleton_names, flow.write_once_map_names)
    state = StagedState(flow_id, source, rpc.loads, rpc.channel_loads)
    result = rpc.handler(LocalRpcContext(flow_id, now, active, state), input_value)
    if not isinstance(result, RpcResult):
        raise TypeError(f"RPC {rpc.name} returned {type(result).__name__}, not RpcResult")
    if state.events:
        raise FlowDefinitionError(f"RPC {rpc.name} wrote a Stream event; only Steps can")
    changes = state.has_effects or result.next_steps or result.canceling_steps
    if changes and not active:
        raise FlowNotActiveError(f"session {flow_id!r} is {row.status.value}")
    if read_only:
        if changes:
            raise RpcNeedsWriteError(rpc.name)
        return result.output
    transitions.apply_staged(tx, flow, flow_id, state, f"rpc:{rpc.name}", now)
    canceling = [step.step_type for step in result.canceling_steps]
    transitions.cancel_steps(tx, flow_id, canceling, now, flow.step_history_limit)
    for movement in result.next_steps:
        transitions.create_execution(tx, flow, flow_id, movement, "", now)
    transitions.match_waiting(tx, flow_id, now)
    return result.output


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


class LocalFlowClient:
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
        registered = self._engine.registered(flow)
        definition = registered.rpc(rpc)
        # Through the wire form, so the handler sees exactly what Dex would hand it.
        input_value = from_json(to_json(input), definition.input_type)
        engine = self._engine
        # The output is returned as the handler built it: a frozen value of the declared
        # type, which crosses no process boundary here. Encoding it only to decode it
        # again cost more than the RPC itself for a snapshot of 200 messages.
        if self._read_first.reads_first(definition):
            try:
                return await engine.read(
                    lambda tx: run_rpc(
                        tx,
                        registered,
                        flow_id,
                        definition,
                        input_value,
                        engine.now(),
                        read_only=True,
                    )
                )
            except RpcNeedsWriteError:
                self._read_first.wrote(definition)
        return await commit(
            engine,
            registered,
            flow_id,
            lambda tx: run_rpc(tx, registered, flow_id, definition, input_value, engine.now()),
        )

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

    async def read_stream(
        self,
        flow: FlowDefinition,
        flow_id: str,
        resume_token: str = "",
        poll_timeout: timedelta | None = None,
    ) -> StreamMessage[Any]:
        """The next event after ``resume_token``; long-polls up to ``poll_timeout``."""
        registered = self._engine.registered(flow)
        stream = registered.flow.stream
        if stream is None:
            raise FlowDefinitionError(f"Flow type {flow.flow_type} has no Stream")
        after = decode_resume_token(flow_id, resume_token)
        engine = self._engine
        loop = asyncio.get_running_loop()
        deadline = loop.time() + poll_seconds(poll_timeout)
        kept = self._read_ahead.take(flow_id, after)
        committed = self._committed
        if kept is None and committed is not None:
            kept = committed.event_after(flow_id, after)
        mark = 0
        # A read that found ``after`` the run's newest event need not be made again while no
        # look since saw the run get events: the wait below looks again before it sleeps.
        unread = False
        if kept is None:
            newest_at = self._read_ahead.newest_at(flow_id, after)
            if newest_at is not None and not engine.flow_changed_after(flow_id, newest_at):
                mark, unread = newest_at, True
            else:
                mark = await engine.flow_change_mark()
                own = self._own_newest_event(flow_id)
                unread = own is not None and own.id == after  # a read would find nothing
        while True:

            def read(tx: StoreTransaction, after: int = after) -> Any:
                events = tx.events_after(flow_id, after, READ_AHEAD_EVENTS)
                # A run is never deleted, so its events show it exists and, by their type,
                # whose they are: only a read that found none looks the run up (a statement
                # when its row is not kept).
                if not events:
                    require_flow_type(tx, flow.flow_type, flow_id)
                return events

            if kept is not None:
                events = [kept]
            elif unread:
                await self._require_stream_owner(flow, flow_id)
                events, unread = [], False
            else:
                events = list(await engine.read(read))
                if events and len(events) < READ_AHEAD_EVENTS:  # it reached the newest
                    self._read_ahead.keep_newest(flow_id, events[-1].id, mark)
            if events:
                self._read_ahead.keep(flow_id, events)
                event = events[0]
                if event.flow_type != flow.flow_type:
                    raise flow_of_another_type(flow.flow_type, flow_id)
                value = decode_or_skip(
                    event, lambda text: DECODED.decode(text, stream.value_type, engine.store)
                )
                if value is SKIPPED:  # read on past it, without waiting
                    after, unread = event.id, False
                    kept = self._read_ahead.take(flow_id, after)
                    if kept is None and committed is not None:
                        kept = committed.event_after(flow_id, after)
                    continue
                return StreamMessage(
                    value=value,
                    resume_token=encode_resume_token(flow_id, event.id),
                    created_at=event.created_at,
                    source=event.source,
                )
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise StreamReadTimeoutError(f"no new event of session {flow_id!r} arrived")
            waited_from = mark
            mark = await engine.wait_for_flow_change(flow_id, mark, timedelta(seconds=remaining))
            # A wait that ran out saw no events of the run: no read can find one either.
            unread = not engine.flow_changed_after(flow_id, waited_from)
            if committed is not None:
                kept = committed.event_after(flow_id, after)

    async def _require_stream_owner(self, flow: FlowDefinition, flow_id: str) -> None:
        # For a read that reads no event: read through another type's Flow, a run's events
        # were decoded as that type's Stream (``stream_owners``).
        if not self._stream_owners.checked(flow.flow_type, flow_id):
            await self._engine.read(lambda tx: require_flow_type(tx, flow.flow_type, flow_id))
            self._stream_owners.remember(flow.flow_type, flow_id)

    def _own_newest_event(self, flow_id: str) -> EventRow | None:
        """The run's newest event when this process's store committed it, and the change log,
        as the latest look read it, names no later commit that appended to the run; ``None``
        when only a read can tell. Call it right after a look (``flow_change_mark``)."""
        newest = self._committed.newest_committed_event(flow_id) if self._committed else None
        if newest is not None and newest[1] == self._engine.last_events_change(flow_id):
            return newest[0]
        return None

    async def stream_tail_token(self, flow: FlowDefinition, flow_id: str) -> str:
        """The resume token of the session's newest event (``""`` when it has none).

        Reading from it waits for the next event, so a reader that only needs
        what happens from now on skips the retained ones in one query.
        """
        token, _, _ = await self._tail(flow, flow_id, with_event=False)
        return token

    async def stream_tail_marked(
        self, flow: FlowDefinition, flow_id: str
    ) -> tuple[str, Any | None, int]:
        """``stream_tail_token``, the value of that newest event (``None`` when it has none),
        and a mark (``session_change_mark``) taken before the tail was read.

        A wait for a person looks at the event: after one of a turn in progress, the
        session's snapshot would say it is busy, so the wait need not read it yet; and
        ``session_changed_since`` with the mark then says whether any commit changed
        the session after the state that event tells of.
        """
        return await self._tail(flow, flow_id, with_event=True)

    async def _tail(
        self, flow: FlowDefinition, flow_id: str, *, with_event: bool
    ) -> tuple[str, Any | None, int]:
        engine = self._engine
        stream = engine.registered(flow).flow.stream
        await self._require_stream_owner(flow, flow_id)

        def tail(tx: StoreTransaction) -> tuple[int, EventRow | None]:
            last = tx.last_event_id(flow_id)
            if not (with_event and last):
                return last, None
            rows = tx.events_after(flow_id, last - 1, 1)
            return last, rows[0] if rows and rows[0].id == last else None

        mark = await engine.flow_change_mark()
        own = self._own_newest_event(flow_id)
        last, row = (own.id, own) if own is not None else await engine.read(tail)
        # The reader that starts from it waits for the next event without reading first.
        self._read_ahead.keep_newest(flow_id, last, mark)
        if not last:
            return "", None, mark
        value = None
        if with_event and row is not None and stream is not None:
            decoded = decode_or_skip(
                row, lambda text: DECODED.decode(text, stream.value_type, engine.store)
            )
            value = None if decoded is SKIPPED else decoded
        return encode_resume_token(flow_id, last), value, mark

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
        """Completed Step executions, oldest first."""

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
    )
