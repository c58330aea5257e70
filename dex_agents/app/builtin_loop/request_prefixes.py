"""Which part of a model request's items the built-in loop vouches for, known without a look.

Every model call's items repeat the conversation so far, and a model client that
estimates them (``ScriptedModelClient``) resumed its walk over an earlier
request's items only after comparing them with the new request's, element by
element: work that grew with the session at every call. Yet the loop knows
more than a comparison finds: each call's items start with the walk it kept of
the earlier turns (``conversation.py``), and each kept walk starts with the one
it resumed. An ``ItemsLineage`` marks such a chain of kept walks, and the loop
notes, for the time of a call, where in the request's items the newest one is
(``ItemsPrefix``). A client that finds the note resumes its walk of an earlier
prefix of the lineage with nothing compared, and walks only what follows it.
"""

from __future__ import annotations

import threading
from types import TracebackType

import attrs

from dex_agents.domain.model_io import ModelInputItem

_lock = threading.Lock()


class ItemsLineage:
    """The mark of kept walks' items, each of which starts with those of the one kept before.

    ``latest`` is the newest items kept with it: only a walk that resumed those
    may extend the lineage, so two walks that resumed one earlier walk and
    then went apart never share it.
    """

    __slots__ = ("latest",)

    def __init__(self, latest: tuple[ModelInputItem, ...]) -> None:
        self.latest = latest


def extended_lineage(
    lineage: ItemsLineage | None,
    resumed: tuple[ModelInputItem, ...],
    kept: tuple[ModelInputItem, ...],
) -> ItemsLineage:
    """The lineage of ``kept``, the items of a walk that resumed the walk whose items were
    ``resumed`` and whose lineage was ``lineage`` (``None``: it resumed none), and went on
    from there: ``kept`` starts with ``resumed``, element by element, by construction."""
    with _lock:
        if lineage is not None and lineage.latest is resumed:
            lineage.latest = kept
            return lineage
    return ItemsLineage(kept)


@attrs.frozen(eq=False)
class ItemsPrefix:
    """A kept walk's ``items`` at ``offset`` in a request's items, and their ``lineage``."""

    offset: int
    items: tuple[ModelInputItem, ...]
    lineage: ItemsLineage


_Noted = dict[int, tuple[tuple[ModelInputItem, ...], ItemsPrefix]]


class RequestPrefixes:
    """The ``ItemsPrefix`` of each request's items for the time the loop notes it.

    Keyed by the items tuple's identity: an entry holds the tuple, so its ID is
    not another tuple's while the entry lasts. Thread-safe: Steps run on the
    event loop, and an RPC may estimate on a store thread; each note is one
    dict operation, atomic in CPython.
    """

    def __init__(self) -> None:
        self._noted: _Noted = {}

    def noting(self, items: tuple[ModelInputItem, ...], prefix: ItemsPrefix | None) -> _Noting:
        """A context in which ``prefix`` is noted for ``items`` (nothing for ``None``)."""
        return _Noting(self._noted, items, prefix)

    def get(self, items: tuple[ModelInputItem, ...]) -> ItemsPrefix | None:
        """The prefix noted for this very tuple of items, if one is noted now."""
        noted = self._noted.get(id(items))
        return noted[1] if noted is not None and noted[0] is items else None

    def count(self) -> int:
        """How many requests' items are noted now."""
        return len(self._noted)


class _Noting:
    """``RequestPrefixes.noting``: a class, not a generator, since every model call enters it."""

    __slots__ = ("_items", "_noted", "_prefix")

    def __init__(
        self, noted: _Noted, items: tuple[ModelInputItem, ...], prefix: ItemsPrefix | None
    ) -> None:
        self._noted = noted
        self._items = items
        self._prefix = prefix if prefix is not None and prefix.items else None

    def __enter__(self) -> None:
        if self._prefix is not None:
            self._noted[id(self._items)] = (self._items, self._prefix)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._prefix is not None:
            self._noted.pop(id(self._items), None)


REQUEST_PREFIXES = RequestPrefixes()
"""The process's notes: the built-in loop writes them, a model client may read them."""
