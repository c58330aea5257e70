"""The embedded engine's history-retention rule: what a session's finished work leaves in the file.

A long session would otherwise keep every finished Step execution and every
Channel message it ever consumed. The rule:

- A Channel message is deleted in the commit that finishes the execution whose
  wait took it (completed or failed): it has been acted on, and its value lives
  on in the Step's result. A cancelled execution hands its messages back instead,
  and so does one that failed because its state could not be read
  (``UnreadableStateError``) and with it the Flow: no attempt acted on them with
  the session's state. One with a failure route does not: that route acts in
  its place, and the next wait on their Channel would take them as its own.
- Each session keeps its newest ``step_history_limit`` finished Step executions
  (1,000 by default), newest by when they were created (their IDs), not by when
  they finished; older ones are deleted. The check runs in the commit that
  finishes (completes, fails or cancels) a session's ``PRUNE_INTERVAL``-th,
  200th, ... execution of one Step type (the number in its Step execution ID),
  so it costs one indexed statement per hundred Steps of a type, and a session
  holds at most ``step_history_limit + (PRUNE_INTERVAL - 1) x its Flow's Step
  types`` finished executions between checks. ``None`` keeps every one. Step
  history lists what is kept. Until 2026-12-06 the check went by the store-wide
  ID of the execution, and a session whose executions never got an ID that was
  a multiple of a hundred (two sessions taking turns, each turn two Steps) kept
  every finished one; and until 2026-12-07 a cancelled execution ran no check,
  so a Step type whose executions mostly ended cancelled kept every one.
- Stream events are trimmed to the Flow type's capacity as they are written.

Active executions (pending, waiting, ready, running) are never pruned.
"""

from __future__ import annotations

from typing import Final

from dex_agents.adapters.local.codec import taken_messages
from dex_agents.ports.flow_rows import ExecutionRow
from dex_agents.ports.flow_store import StoreTransaction

DEFAULT_STEP_HISTORY_LIMIT: Final = 1_000
"""The finished Step executions each session keeps by default."""

PRUNE_INTERVAL: Final = 100
"""The rule's check runs when the finished execution's number (per session and Step type) is a
multiple of this."""


def check_step_history_limit(limit: int | None) -> int | None:
    """``limit`` if it is ``None`` or a whole number of at least 1; else ``ValueError`` naming it."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"step_history_limit must be None or an int of at least 1, not {limit!r}")
    return limit


def prune_due(step_execution_id: str, limit: int | None) -> bool:
    """Whether finishing the execution ``step_execution_id`` (``<StepType>-<n>``, ``n`` counted
    per session and Step type) runs the history check."""
    if limit is None:
        return False
    _, _, number = step_execution_id.rpartition("-")
    return number.isdigit() and int(number) % PRUNE_INTERVAL == 0


def retire_finished(tx: StoreTransaction, row: ExecutionRow) -> None:
    """Delete the Channel messages ``row``'s wait took, in the commit that completes or fails it."""
    taken = taken_messages(row)
    if taken:
        tx.delete_consumed_messages([message.seq for message in taken])


def hand_back_taken(tx: StoreTransaction, row: ExecutionRow) -> None:
    """Return the Channel messages ``row``'s wait took to their Channel: ``row`` never acted
    on them (it was cancelled, or no attempt could read the state to act with)."""
    taken = taken_messages(row)
    if taken:
        tx.restore_messages([message.seq for message in taken])


def prune_if_due(tx: StoreTransaction, row: ExecutionRow, limit: int | None) -> None:
    """The history check, in the commit that finishes ``row``, however it ended."""
    if limit is not None and prune_due(row.step_execution_id, limit):
        tx.prune_finished_executions(row.flow_id, limit)
