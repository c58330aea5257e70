"""How the embedded engine runs an RPC handler: in one store transaction, as a read when it can.

``run_rpc`` checks the session and the RPC's locks, runs the handler on the
session's staged state (``LocalRpcContext``) and applies its result: staged
writes, Steps started and cancelled, waits matched. ``ReadFirstRpcs`` remembers
which RPCs a client may try as a read first, without the write lock.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import attrs

from dex_agents.adapters.local import lease_recovery, transitions
from dex_agents.adapters.local.registry import RegisteredFlow
from dex_agents.adapters.local.staged_state import (
    StagedState,
)
from dex_agents.adapters.local.state_sources import (
    TransactionSource,
)
from dex_agents.domain.exact_values import exactly_decodable, immutable_when_exact
from dex_agents.domain.wire import from_json, to_json
from dex_agents.ports.engine import Rpc, RpcResult
from dex_agents.ports.errors import (
    FlowDefinitionError,
    FlowNotActiveError,
    FlowNotFoundError,
    RpcLockConflictError,
)
from dex_agents.ports.flow_rows import ExecutionStatus, FlowRow, FlowStatus
from dex_agents.ports.flow_store import StoreTransaction
from dex_agents.ports.persistence import StateTransaction


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


@attrs.frozen
class RpcCall:
    """One RPC of one session, ready to run in a store transaction as a read or a write.

    ``input_value`` has been through the wire form (``rpc_call``), and ``input_text``,
    when given, is its canonical JSON; ``now`` is read when it runs.
    """

    flow: RegisteredFlow
    flow_id: str
    rpc: Rpc[Any, Any]
    input_value: Any
    now: Callable[[], datetime]
    input_text: str | None = None

    def read(self, tx: StoreTransaction) -> Any:
        """Run it in a read; ``RpcNeedsWriteError`` when it would change anything."""
        return run_rpc(
            tx, self.flow, self.flow_id, self.rpc, self.input_value, self.now(), read_only=True
        )

    def write(self, tx: StoreTransaction) -> Any:
        """Run it in a write transaction and apply its result."""
        return run_rpc(
            tx,
            self.flow,
            self.flow_id,
            self.rpc,
            self.input_value,
            self.now(),
            input_text=self.input_text,
        )


def rpc_call(
    flow: RegisteredFlow, flow_id: str, rpc: str, input: Any, now: Callable[[], datetime]
) -> RpcCall:
    """The call of ``flow``'s RPC ``rpc`` on session ``flow_id`` with ``input``.

    ``FlowDefinitionError`` for an RPC the Flow does not have. The input goes
    through its wire form, so the handler sees exactly what Dex would hand it: it
    is encoded, and its decode is the handler's input. An input that its decode
    would give back type for type (``exactly_decodable``) and that nobody can
    change (``immutable_when_exact``) is its own decode: it is handed over as it
    is, with the text it was encoded as, which a handler's publish of it writes
    (``StagedState.know_text``) instead of encoding it again.
    """
    definition = flow.rpc(rpc)
    input_type = definition.input_type
    text = to_json(input)
    if immutable_when_exact(input_type) and exactly_decodable(input, input_type):
        return RpcCall(flow, flow_id, definition, input, now, text)
    return RpcCall(flow, flow_id, definition, from_json(text, input_type), now)


def _recover_lapsed_holder(
    tx: StoreTransaction, flow: RegisteredFlow, execution_id: int, now: datetime
) -> None:
    """Recover the lease of a lock's holder when it lapsed, as a worker's claim round would.

    Only a claim round recovers lapsed leases, so after a worker died inside a Step
    that held a lock, every RPC that takes the lock was refused until a worker ran
    again, where Dex frees it when the lease lapses. Recovered, the dead attempt can
    no longer commit (``holds_lease``), so the RPC cannot race it.
    """
    row = tx.get_execution(execution_id)
    if (
        row is not None
        and row.status is ExecutionStatus.RUNNING
        and row.lease_expires_at is not None
        and row.lease_expires_at < now
    ):
        lease_recovery.recover_lost_lease(tx, flow, row, now)


def run_rpc(
    tx: StoreTransaction,
    flow: RegisteredFlow,
    flow_id: str,
    rpc: Rpc[Any, Any],
    input_value: Any,
    now: datetime,
    *,
    read_only: bool = False,
    input_text: str | None = None,
) -> Any:
    """Run an RPC handler in this transaction and apply its result; return its output.

    With ``read_only`` the transaction is a read: a handler that changes anything
    raises ``RpcNeedsWriteError`` before anything is written. ``input_text`` is
    ``input_value``'s canonical JSON, when the caller has it (``rpc_call``).
    """
    row = tx.get_flow(flow_id)
    if row is None or row.flow_type != flow.flow_type:
        raise FlowNotFoundError(f"no {flow.flow_type} session with ID {flow_id!r}")
    active = row.status is FlowStatus.RUNNING
    if (rpc.locks or rpc.is_transactional) and not active:
        raise _not_active(row)
    for lock in rpc.locks:
        holder = tx.lock_holder(flow_id, lock.lock_name)
        if holder is not None:
            _recover_lapsed_holder(tx, flow, holder, now)
        if tx.lock_holder(flow_id, lock.lock_name) is not None:
            raise RpcLockConflictError(
                f"{rpc.name}: a running Step of session {flow_id!r} holds {lock.lock_name}"
            )
    source = TransactionSource(tx, flow_id, flow.singleton_names, flow.write_once_map_names)
    state = StagedState(flow_id, source, rpc.loads, rpc.channel_loads)
    if input_text is not None:
        state.know_text(input_value, input_text)
    result = rpc.handler(LocalRpcContext(flow_id, now, active, state), input_value)
    if not isinstance(result, RpcResult):
        raise TypeError(f"RPC {rpc.name} returned {type(result).__name__}, not RpcResult")
    if state.events:
        raise FlowDefinitionError(f"RPC {rpc.name} wrote a Stream event; only Steps can")
    changes = state.has_effects or result.next_steps or result.canceling_steps
    if changes and not active:
        raise _not_active(row)
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


def _not_active(row: FlowRow) -> FlowNotActiveError:
    """The refusal of an RPC that changes a closed session: why it ended, when it failed."""
    why = "" if row.failure_reason is None else f": {row.failure_reason}"
    return FlowNotActiveError(f"session {row.flow_id!r} is {row.status.value}{why}")
