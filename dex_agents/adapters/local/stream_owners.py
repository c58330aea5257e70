"""Whose Stream a read names: a session's events are read only through its own Flow type.

Every Flow type's events sit in one table, keyed by the run's ID, and a reader
decodes them as the Stream of the Flow it passed. Read through another type's
Flow, a session's events came back as if they were that type's (or failed to
decode), so each read checks the run's type first and, like an RPC, answers
``FlowNotFoundError`` naming the type asked for. An event row carries its run's
type, so a read that finds events needs no lookup; a run's type never changes
and runs are never deleted, so a client remembers the runs it looked up.
"""

from __future__ import annotations

from collections import OrderedDict

from dex_agents.ports.errors import FlowNotFoundError
from dex_agents.ports.flow_store import StoreTransaction

_CAPACITY = 4096


def flow_of_another_type(flow_type: str, flow_id: str) -> FlowNotFoundError:
    """The error for a read of run ``flow_id`` through a Flow of ``flow_type`` it is not."""
    return FlowNotFoundError(f"no {flow_type} session with ID {flow_id!r}")


def require_flow_type(tx: StoreTransaction, flow_type: str, flow_id: str) -> None:
    """``FlowNotFoundError`` unless ``flow_id`` is a run of ``flow_type``."""
    row = tx.get_flow(flow_id)
    if row is None:
        raise FlowNotFoundError(f"no session with ID {flow_id!r}")
    if row.flow_type != flow_type:
        raise flow_of_another_type(flow_type, flow_id)


class CheckedStreamOwners:
    """The runs whose type a read checked, by ID; bounded, least recently checked out first."""

    def __init__(self, capacity: int = _CAPACITY) -> None:
        self._capacity = capacity
        self._types: OrderedDict[str, str] = OrderedDict()

    def checked(self, flow_type: str, flow_id: str) -> bool:
        """Whether ``flow_id`` is known to be a run of ``flow_type``."""
        known = self._types.get(flow_id)
        if known is None:
            return False
        self._types.move_to_end(flow_id)
        return known == flow_type

    def remember(self, flow_type: str, flow_id: str) -> None:
        """``require_flow_type`` found ``flow_id`` a run of ``flow_type``."""
        self._types[flow_id] = flow_type
        self._types.move_to_end(flow_id)
        while len(self._types) > self._capacity:
            self._types.popitem(last=False)
