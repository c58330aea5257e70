"""What each part of ``MemoryTransaction`` mixed into it may use of the transaction.

``MemoryStream`` and ``MemoryExecutions`` each hold one table group's primitives;
``MemoryTransaction`` provides the live tables (``_t``), the undo log (``undo``) and
the writes that log their undo (``_put``, ``_pop``, ``_next_id``), declared here once.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from dex_agents.adapters.local.memory_transaction import MemoryTables

K = TypeVar("K")
V = TypeVar("V")


class MemoryPart:
    """A part of ``MemoryTransaction``: the names it takes from the transaction."""

    undo: list[Callable[[], object]]

    _t: MemoryTables

    def _put(self, mapping: MutableMapping[K, V], key: K, value: V) -> None:
        raise NotImplementedError

    def _pop(self, mapping: MutableMapping[K, V], key: K) -> V:
        raise NotImplementedError

    def _next_id(self, sequence: str) -> int:
        raise NotImplementedError
