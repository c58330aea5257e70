"""What a process cache's entries take in memory, learned from a few of them.

The caches of decoded values were bounded by the characters of the text they
came from, yet they keep the decoded objects, which take two to five times
that (``bench/session_churn.py``). Walking every entry's objects to size it
costs more than decoding it, so a ``MemoryRate`` walks a few (the first ones,
one that outgrows every walked one, then one in ``every``) and charges each
entry its cheap measure (its text's characters, its elements) times the bytes
per unit the walked ones took.
"""

from __future__ import annotations

import enum
import gc
import sys
import types
from collections.abc import Iterable

_NOT_WALKED = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    enum.Enum,  # a value's enum members are the process's, not the entry's
)

FIRST_SAMPLES = 2
"""How many of its first entries a ``MemoryRate`` walks. Few: a session's first chunk
rolls over after about eight turns, and walking its run of messages costs more than
a turn's other work on the caches; eight samples put walks into turns 30 to 60 of a
session (``bench/turn_instructions.py``)."""

GROWTH_SAMPLE = 4
"""An entry of at least this many times the units of the largest walked one is walked too.

A cache's first entries are a session's first turns, small, where the objects'
fixed overhead takes several bytes a unit: a conversation walk of two "hi" turns
took 7.4 bytes a unit, one of 200 turns 3.1, and charged at the first rate until
the 1,025th entry the walks of one long session outgrew the 32 MiB bound at 14 MiB.
The walks this adds are one per fourfold growth, a few in a process's life."""

SAMPLE_EVERY = 1024
"""After the first, one entry in this many is walked: the rate follows what a long-lived
process keeps, and the walks cost nothing a turn can count."""


def memory_of(roots: Iterable[object]) -> int:
    """The bytes ``sys.getsizeof`` gives for every object reachable from ``roots``, each once.

    Types, modules, functions, enum members and ``None`` are not counted: they
    are the process's, whatever holds them.
    """
    seen: set[int] = set()
    total = 0
    stack = list(roots)
    while stack:
        found = stack.pop()
        if found is None or id(found) in seen or isinstance(found, _NOT_WALKED):
            continue
        seen.add(id(found))
        total += sys.getsizeof(found)
        stack.extend(gc.get_referents(found))
    return total


class MemoryRate:
    """Bytes of memory per unit of an entry's measure, from the entries walked so far.

    Not locked: two threads charging at once may each miss a sample, which only
    makes the rate learn a little later. The rate is at least one byte a unit.
    """

    __slots__ = ("_bytes", "_charged", "_every", "_first", "_largest", "_units")

    def __init__(self, *, first: int = FIRST_SAMPLES, every: int = SAMPLE_EVERY) -> None:
        self._first = first
        self._every = every
        self._charged = 0
        self._units = 0
        self._bytes = 0
        self._largest = 0  # the units of the largest entry walked

    @property
    def rate(self) -> float:
        """The bytes a unit took in the entries walked (1.0 before any)."""
        return max(1.0, self._bytes / self._units) if self._units else 1.0

    def charge(self, units: int, kept: object) -> int:
        """What an entry of ``units`` that keeps ``kept`` alive is charged: ``units`` times
        the rate, after walking ``kept`` when it is one of the entries sampled."""
        charged = self._charged
        self._charged = charged + 1
        largest = self._largest
        if units > 0 and (
            charged < self._first or charged % self._every == 0 or units >= GROWTH_SAMPLE * largest
        ):
            self._largest = max(largest, units)
            self._units += units
            self._bytes += memory_of((kept,))
        return int(units * self.rate)
