"""The embedded engine's history-retention rule: what a session's finished work leaves in the file.

A long session would otherwise keep every finished Step execution and every
Channel message it ever consumed. The rule:

- A Channel message is deleted in the commit that finishes the execution whose
  wait took it (completed or failed): it has been acted on, and its value lives
  on in the Step's result. A cancelled execution hands its messages back instead.
- Each session keeps its newest ``step_history_limit`` finished Step executions
  (1,000 by default); older ones are deleted. The check runs in the commit of
  every ``PRUNE_INTERVAL``-th execution the store numbers, so it costs one
  indexed statement per hundred Steps, and a session holds at most
  ``step_history_limit + PRUNE_INTERVAL`` finished executions between checks.
  ``None`` keeps every one. Step history lists what is kept.
- Stream events are trimmed to the Flow type's capacity as they are written.

Active executions (pending, waiting, ready, running) are never pruned.
"""

from __future__ import annotations

from typing import Final

from dex_agents.adapters.local.codec import taken_messages
from dex_agents.ports.flow_store import ExecutionRow, StoreTransaction

DEFAULT_STEP_HISTORY_LIMIT: Final = 1_000
"""The finished Step executions each session keeps by default."""

PRUNE_INTERVAL: Final = 100
"""The rule's check runs when the finished execution's store ID is a multiple of this."""


def check_step_history_limit(limit: int | None) -> int | None:
    """``limit`` if it is ``None`` or a whole number of at least 1; else ``ValueError`` naming it."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"step_history_limit must be None or an int of at least 1, not {limit!r}")
    return limit


def prune_due(execution_id: int, limit: int | None) -> bool:
    """Whether finishing execution ``execution_id`` runs the history check."""
    return limit is not None and execution_id % PRUNE_INTERVAL == 0


def retire_finished(tx: StoreTransaction, row: ExecutionRow, limit: int | None) -> None:
    """Apply the rule in the commit that completes or fails ``row`` for good."""
    taken = taken_messages(row)
    if taken:
        tx.delete_consumed_messages([message.seq for message in taken])
    if limit is not None and prune_due(row.id, limit):
        tx.prune_finished_executions(row.flow_id, limit)
