"""The Stream's ``StoreTransaction`` primitives over the in-memory tables.

Events are kept by ID with their size, indexed per session (IDs in order, for
``events_after``) and per Flow type (oldest first, with the bytes held, for
``trim_events``), as the SQLite store's ``SqliteStream`` keeps them in SQL.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Sequence
from datetime import datetime
from functools import partial

from dex_agents.adapters.local.memory_parts import MemoryPart
from dex_agents.adapters.local.store_rows import check_limit, utc_time
from dex_agents.ports.flow_rows import EventRow


class MemoryStream(MemoryPart):
    """Mixed into ``MemoryTransaction`` (``memory_parts.MemoryPart``)."""

    def append_event(
        self, flow_type: str, flow_id: str, value: str, source: str, created_at: datetime
    ) -> int:
        when = utc_time(created_at, "created_at")
        size = len(value.encode("utf-8"))
        event_id = self._next_id("event")
        self._put(
            self._t.events,
            event_id,
            (EventRow(event_id, flow_type, flow_id, value, source, when), size),
        )
        for ids in (
            self._t.flow_events.setdefault(flow_id, []),
            self._t.type_events.setdefault(flow_type, deque()),
        ):
            ids.append(event_id)
            self.undo.append(ids.pop)
        self._put(self._t.type_bytes, flow_type, self._t.type_bytes.get(flow_type, 0) + size)
        return event_id

    def events_after(self, flow_id: str, after_id: int, limit: int) -> Sequence[EventRow]:
        check_limit(limit)
        ids = self._t.flow_events.get(flow_id, [])
        start = bisect.bisect_right(ids, after_id)
        return [self._t.events[i][0] for i in ids[start : start + limit]]

    def last_event_id(self, flow_id: str) -> int:
        ids = self._t.flow_events.get(flow_id, [])
        return ids[-1] if ids else 0

    def get_event(self, event_id: int) -> EventRow | None:
        entry = self._t.events.get(event_id)
        return None if entry is None else entry[0]

    def trim_events(self, flow_type: str, capacity_bytes: int) -> int:
        if capacity_bytes < 0:
            raise ValueError(f"capacity_bytes must be 0 or more, not {capacity_bytes}")
        total = self._t.type_bytes.get(flow_type, 0)
        oldest_first = self._t.type_events.get(flow_type, deque())
        deleted = 0
        while total > capacity_bytes and oldest_first:
            event_id = oldest_first.popleft()
            self.undo.append(partial(oldest_first.appendleft, event_id))
            row, size = self._pop(self._t.events, event_id)
            flow_ids = self._t.flow_events[row.flow_id]
            del flow_ids[bisect.bisect_left(flow_ids, event_id)]
            self.undo.append(partial(bisect.insort, flow_ids, event_id))
            total -= size
            deleted += 1
        if deleted:
            self._put(self._t.type_bytes, flow_type, total)
        return deleted
