"""The Stream events a store's own commits appended, kept for readers in its process.

A store appends a session's events holding the write lock, so it knows each
event's predecessor and that nothing came between them: a reader in the same
process that has one event gets the next from here without a read. It also
knows which event each of its commits left newest in a run, under that commit's
change number (``flow_changes``): when the change log still names that commit
as the run's newest to append events, the event is still the run's newest, and
a reader that has it waits for the next one without reading first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

from dex_agents.ports.flow_rows import EventRow

COMMITTED_EVENTS_KEPT = 4096
"""How many of its newest committed Stream events a store keeps for readers in its process."""


class OwnEvents:
    """The newest ``most`` events one store committed, and the newest of each run it appended to."""

    def __init__(self, most: int = COMMITTED_EVENTS_KEPT) -> None:
        self._most = most
        self._lock = threading.Lock()  # commits and readers run on different threads
        self._after: OrderedDict[tuple[str, int], EventRow] = OrderedDict()
        # Run -> (its newest event, the change number of the commit that appended it).
        self._newest: OrderedDict[str, tuple[EventRow, int]] = OrderedDict()

    def committed(self, appended: Sequence[tuple[int, EventRow]], change: int | None) -> None:
        """A commit appended ``appended`` (``(previous event ID, event)``, in order) and logged
        change number ``change`` (``None``: it logged none, so no event is known newest)."""
        if not appended:
            return
        with self._lock:
            after, newest = self._after, self._newest
            for previous, row in appended:
                after[(row.flow_id, previous)] = row
                if change is None:
                    newest.pop(row.flow_id, None)
                else:
                    newest[row.flow_id] = (row, change)
                    newest.move_to_end(row.flow_id)
            while len(after) > self._most:
                after.popitem(last=False)
            while len(newest) > self._most:
                newest.popitem(last=False)

    def event_after(self, flow_id: str, after_id: int) -> EventRow | None:
        """The event this store committed right after ``after_id``; ``None`` when not known."""
        with self._lock:
            return self._after.get((flow_id, after_id))

    def newest(self, flow_id: str) -> tuple[EventRow, int] | None:
        """The last event this store's commits appended to ``flow_id`` and the change number of
        that commit; ``None`` when not known."""
        with self._lock:
            return self._newest.get(flow_id)
