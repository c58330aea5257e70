"""A state-only Step runs in the commit that made it runnable.

A Step whose execute only reads and stages state (``Step.state_only``: no I/O,
no heartbeat, never suspends) gains nothing from a task of its own: its worker
would lease it, read its state, run it, and commit its result in a second
fsync'd commit. So a durable commit that leases such a Step to a worker of its
own process runs its execute right there, on the state the commit is about to
write, and commits its result with it: ``ResumeTurn`` in the commit of the
tool call that answered it, ``AwaitUserMessage`` in the commit of the message
that woke it. Each stays a Step execution of its own in the history, with its
own result; only the fsync is shared. Both results land together or not at all,
and neither Step has any effect outside the store, so a crash repeats no call.

An execute that suspends, raises, or returns anything but a decision is undone
to a savepoint and left leased to the worker, which runs it as before: its
errors are logged and its retry policy applies there.
"""

from __future__ import annotations

import contextlib
from datetime import datetime

from dex_agents.adapters.local import transitions
from dex_agents.adapters.local.claims import Claim
from dex_agents.adapters.local.registry import RegisteredFlow
from dex_agents.adapters.local.staged_state import (
    StagedState,
)
from dex_agents.adapters.local.state_sources import (
    SnapshotSource,
)
from dex_agents.adapters.local.step_context import LocalStepContext
from dex_agents.ports.engine import StepDecision
from dex_agents.ports.flow_store import StoreTransaction

MOST_RUNS_PER_COMMIT = 4
"""How many state-only Steps one commit runs, one after another, before it leaves the rest
to the worker: two such Steps that go to each other cannot hold a commit forever."""


class _NotInCommitError(RuntimeError):
    """A state-only Step asked for something only a running attempt has."""


async def _refuse_beat(checkpoint: str | None, events: list[str], durable: bool) -> bool:
    raise _NotInCommitError("a Step that heartbeats is not state-only")


async def _refuse_flush(events: list[str]) -> bool:
    raise _NotInCommitError("a Step run in a commit writes its events with its result")


def runs_in_commit(flow: RegisteredFlow, claim: Claim) -> bool:
    """Whether ``claim`` is an execute attempt of a state-only Step with its state read."""
    return (
        claim.phase == "execute"
        and claim.snapshot is not None
        and not claim.row.cancel_requested
        and flow.step(claim.row.step_type).state_only
    )


def run_in_commit(
    tx: StoreTransaction, flow: RegisteredFlow, claim: Claim, now: datetime
) -> LocalStepContext | None:
    """Run a claimed state-only Step's execute and commit its result in ``tx``.

    Its context when its result is staged in ``tx``: once ``tx`` commits, whoever
    committed it calls ``settle`` on it (``handoff.settle_ran``), and a ``tx`` that
    fails or is tried again never does. ``None``, with nothing written, when the
    worker must run it (it suspended, raised or returned no decision).
    """
    row, snapshot = claim.row, claim.snapshot
    assert snapshot is not None  # runs_in_commit checked it
    step = flow.step(row.step_type)
    options = flow.options(step, row.options)
    state = StagedState(row.flow_id, SnapshotSource(snapshot), options.loads)
    # No flush interval: its live events wait for the commit it runs in.
    context = LocalStepContext(
        flow,
        row,
        state,
        now,
        beat=_refuse_beat,
        flush=_refuse_flush,
        flush_interval=None,
        run_id=claim.run_id,
        # What it reports (its spans) waits for the commit it runs in, as a worker's
        # attempt's waits for its own: a commit that fails and is tried again runs it again.
        reports_result=True,
    )
    try:
        running = step.execute(context, flow.decode_input(step, row.input))
    except Exception:
        return None
    try:
        running.send(None)
    except StopIteration as stop:
        decision = stop.value
    except Exception:
        return None  # the worker runs it again, logs what it raised and retries
    else:
        # It awaited something outside the store: the worker runs it. One that awaits as
        # it cleans up refuses to close, which must not fail the commit either.
        with contextlib.suppress(Exception):
            running.close()
        return None
    if not isinstance(decision, StepDecision):
        return None
    stream = flow.flow.stream
    pending = context.close()
    if stream is not None and pending:
        state.events[:0] = [(stream, event) for event in pending]
    outcome = tx.run_undoable(
        lambda: transitions.commit_execute(tx, flow, row, state, decision, now)
    )
    return context if outcome.error is None and bool(outcome.value) else None
