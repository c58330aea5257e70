"""Stream events read ahead: one store read serves a reader's next several events.

A reader follows a session's Stream one event at a time, and each event it
asks for would cost a read transaction. Events never change once written, so
the events after the one asked for are kept, each under the ID of the event
before it, and the reader's next calls are answered without the store. A read
that reached its run's newest event also leaves the change mark it was made
after (``keep_newest``), so the reader that gets to that event waits for the
next one without reading first (``LocalEngine.wait_for_flow_change``). The
caches are bounded, oldest entries first out.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict

from dex_agents.ports.flow_rows import EventRow

READ_AHEAD_EVENTS = 32
"""How many events one store read fetches for a Stream reader."""

_CAPACITY = 4096


class EventReadAhead:
    """The events read after the one a reader asked for, by ``(flow_id, previous event ID)``."""

    def __init__(self, capacity: int = _CAPACITY) -> None:
        self._capacity = capacity
        self._next: OrderedDict[tuple[str, int], EventRow] = OrderedDict()
        # (flow_id, event ID) -> the change mark taken before the read that found that event
        # to be the run's newest (``LocalEngine.flow_change_mark``).
        self._newest: OrderedDict[tuple[str, int], int] = OrderedDict()

    def take(self, flow_id: str, after: int) -> EventRow | None:
        """The event after ``after`` if it was read ahead (and forget it: readers move on)."""
        return self._next.pop((flow_id, after), None)

    def keep(self, flow_id: str, events: list[EventRow]) -> None:
        """Keep every event of a read but the first, each under its predecessor's ID."""
        for previous, event in itertools.pairwise(events):
            self._next[(flow_id, previous.id)] = event
        while len(self._next) > self._capacity:
            self._next.popitem(last=False)

    def keep_newest(self, flow_id: str, event_id: int, mark: int) -> None:
        """A read after change mark ``mark`` found ``event_id`` its run's newest event (0: it
        has none): the reader that gets to it may wait from that mark instead of reading."""
        self._newest[(flow_id, event_id)] = mark
        while len(self._newest) > self._capacity:
            self._newest.popitem(last=False)

    def newest_at(self, flow_id: str, event_id: int) -> int | None:
        """The change mark after which a read found ``event_id`` its run's newest (and forget
        it); ``None`` when no read did."""
        return self._newest.pop((flow_id, event_id), None)
