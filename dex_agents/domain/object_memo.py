"""Values derived from an object, made once and kept while the object lives.

A tool source offers the same frozen tool objects to every model call until it
lists again, and what a call derives from each (a model definition, its
schema's JSON text) is the same every time. Such objects compare by value and
hold mappings, so they cannot key a dict or a ``WeakKeyDictionary``: an
``ObjectMemo`` finds them by identity, and a weak reference ends each entry
when its object goes, before any new object can take its ID.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class ObjectMemo(Generic[K, V]):
    """``memo.get(obj, make)``: ``make(obj)`` on the first call for ``obj``, the kept value after.

    The objects must take weak references (``attrs`` classes do) and must not
    change while they live, since the value is not made again. Not thread-safe:
    use it from one thread.
    """

    def __init__(self) -> None:
        self._kept: dict[int, tuple[weakref.ref[K], V]] = {}

    def get(self, obj: K, make: Callable[[K], V]) -> V:
        """The value made for ``obj``, made now if this object has none."""
        key = id(obj)
        kept = self._kept.get(key)
        if kept is not None and kept[0]() is obj:
            return kept[1]
        value = make(obj)
        self._kept[key] = (weakref.ref(obj, lambda _: self._kept.pop(key, None)), value)
        return value

    def __len__(self) -> int:
        """How many live objects have a kept value."""
        return len(self._kept)
