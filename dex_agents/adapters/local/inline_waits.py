"""A new Step execution's wait, decided in the commit that creates it.

A wait phase only reads state. So the transaction that creates a Step
execution can run that Step's ``wait_for`` on the state it is about to commit
and store the wait with it: one commit instead of a claim, a snapshot read and
a second commit, and no other commit can land in between. A ``wait_for`` that
suspends (awaits real I/O) or raises is left to a worker's wait phase, which
runs it as before and logs what it raised.
"""

from __future__ import annotations

import contextlib
import inspect
from datetime import datetime

from dex_agents.adapters.local.damaged_values import is_undecodable
from dex_agents.adapters.local.registry import RegisteredFlow
from dex_agents.adapters.local.staged_state import (
    StagedState,
)
from dex_agents.adapters.local.state_sources import (
    SnapshotSource,
    read_snapshot,
)
from dex_agents.adapters.local.step_context import LocalWaitContext
from dex_agents.ports.flow_rows import ExecutionRow
from dex_agents.ports.flow_store import StoreTransaction
from dex_agents.ports.step_waits import Wait


def decide_wait_now(
    tx: StoreTransaction, flow: RegisteredFlow, row: ExecutionRow, now: datetime
) -> Wait | None:
    """The execution's ``Wait`` when its ``wait_for`` finishes without suspending, else ``None``."""
    step = flow.step(row.step_type)
    options = flow.options(step, row.options)
    try:
        snapshot = read_snapshot(tx, row.flow_id, flow.flow.schema, options.wait_loads)
    except Exception as error:
        # Damaged state fails only this session's wait phase, not the commit deciding it.
        # Any other fault (a disk I/O error, after which SQLite may have rolled the
        # transaction back, and the statements after it would each commit alone) fails the
        # commit: until 2026-12-07 it was taken for damaged state too.
        if not is_undecodable(error):
            raise
        return None
    state = StagedState(row.flow_id, SnapshotSource(snapshot), options.wait_loads)
    try:
        awaitable = step.wait_for(
            LocalWaitContext(row, state, now), flow.decode_input(step, row.input)
        )
    except Exception:
        return None  # the wait phase runs it again and logs the error
    if not inspect.iscoroutine(awaitable):
        return None
    try:
        awaitable.send(None)
    except StopIteration as stop:
        return stop.value if isinstance(stop.value, Wait) else None
    except Exception:
        return None
    # It suspended: it waits on something outside the store, so a worker runs it. A
    # wait_for that awaits as it cleans up refuses to close (RuntimeError): that is the
    # worker's to run too, and must not fail the commit that creates the Step.
    with contextlib.suppress(Exception):
        awaitable.close()
    return None
