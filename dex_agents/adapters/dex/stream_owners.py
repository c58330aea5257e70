"""Whose Stream a read names: a read that finds no event checks the session's Flow type.

Dex keeps a Stream per Flow type and reads one by Flow ID without checking
that the Flow exists, so a read through another Flow type's Flow, or of a
session never started, found nothing and waited out every long poll: the
browser stream sent keep-alives for ever and ``wait_for_user`` waited its whole
timeout. The embedded engine refuses both with ``FlowNotFoundError`` naming the
type asked for. So when a read finds no event, one ``describe_flow`` tells
which: a read that finds an event is of its own type's Stream and needs none. A
Flow ID's type never changes, so a client remembers the sessions it checked.
A ``describe_flow`` that fails for another reason leaves the read's own outcome.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable

import dex

from dex_agents.ports.errors import FlowNotFoundError

_CAPACITY = 4096


class StreamOwners:
    """The sessions whose Flow type a read checked, by ID; bounded, least recently used out."""

    def __init__(self, capacity: int = _CAPACITY) -> None:
        self._capacity = capacity
        self._types: OrderedDict[str, str] = OrderedDict()
        # The sync client's reads run in many threads at once.
        self._lock = threading.Lock()

    def _known(self, flow_type: str, flow_id: str) -> bool:
        with self._lock:
            known = self._types.get(flow_id)
            if known is not None:
                self._types.move_to_end(flow_id)
            return known == flow_type

    def _remember(self, info: dex.FlowInfo, flow_type: str, flow_id: str) -> None:
        if info.flow_type != flow_type:
            raise FlowNotFoundError(f"no {flow_type} session with ID {flow_id!r}")
        with self._lock:
            self._types[flow_id] = flow_type
            self._types.move_to_end(flow_id)
            while len(self._types) > self._capacity:
                self._types.popitem(last=False)

    async def check(
        self, describe: Callable[[str], Awaitable[dex.FlowInfo]], flow_type: str, flow_id: str
    ) -> None:
        """``FlowNotFoundError`` when ``describe`` finds no ``flow_type`` session ``flow_id``."""
        if self._known(flow_type, flow_id):
            return
        try:
            info = await describe(flow_id)
        except dex.FlowNotFoundError:
            raise FlowNotFoundError(f"no {flow_type} session with ID {flow_id!r}") from None
        except dex.DexServiceError:
            return
        self._remember(info, flow_type, flow_id)

    def check_sync(
        self, describe: Callable[[str], dex.FlowInfo], flow_type: str, flow_id: str
    ) -> None:
        """``check`` with a blocking ``describe``."""
        if self._known(flow_type, flow_id):
            return
        try:
            info = describe(flow_id)
        except dex.FlowNotFoundError:
            raise FlowNotFoundError(f"no {flow_type} session with ID {flow_id!r}") from None
        except dex.DexServiceError:
            return
        self._remember(info, flow_type, flow_id)
