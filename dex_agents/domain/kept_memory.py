"""What a process cache's entries take in memory, learned from a few of them.

The caches of decoded values were bounded by the characters of the text they
came from, yet they keep the decoded objects, which take two to five times
that (``bench/session_churn.py``). Walking every entry's objects to size it
costs more than decoding it, so a ``MemoryRate`` walks a few (the first ones,
one that outgrows every walked one or falls far below them, then one in
``every``) and charges each entry a fixed part and its cheap measure (its
text's characters, its elements) times the bytes per unit the walked ones took.
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
"""An entry of at least this many times the units of the largest walked one is walked too, and
one of at most the smallest's over this many.

A cache's first entries are a session's first turns, small, where the objects'
fixed overhead takes several bytes a unit: a conversation walk of two "hi" turns
took 7.4 bytes a unit, one of 200 turns 3.1, and charged at the first rate until
the 1,025th entry the walks of one long session outgrew the 32 MiB bound at 14 MiB.
The walks this adds are one per fourfold growth, a few in a process's life. The small ones
are walked for the fixed part each entry takes, which the large ones' bytes a unit leave out."""

CACHE_ENTRY_BYTES = 160
"""What a cache's own maps take for one entry beside its key and value, which no walk sees: an
``OrderedDict``'s slot and node and the charges ``dict``'s slot and ``int`` (``tracemalloc``,
CPython 3.11: 100 to 160 bytes, as the tables grow, and 32)."""

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
    """Bytes of memory an entry takes, from its measure: a part per entry and one per unit.

    Learned from the entries walked so far: a line through their (units, bytes),
    least squares, once they are of sizes at least twice apart; before that, their
    bytes per unit alone. An entry's objects take bytes whatever its text
    (``AgentMessage``'s fields, a walk's tuples), and one rate per unit taken from
    large entries under-charged the small ones: at the rate of messages of 20,000
    characters, one of 272 was charged 547 bytes of the 997 it and its cache entry
    took, and 20,000 short messages after four tool results 62% of their memory
    (``tests/domain/test_kept_memory.py``). Each entry is also charged
    ``entry_bytes``, what the cache's own maps take for it, which no walk sees.

    Not locked: two threads charging at once may each miss a sample, which only
    makes the rate learn a little later. A unit is charged at least one byte.
    ``charge`` is called for every entry a cache keeps (each value a Step writes),
    so what it checks is kept ready: the bounds of the sizes walked, the two terms.
    """

    __slots__ = (
        "_countdown",
        "_due",
        "_entry_bytes",
        "_every",
        "_first",
        "_fixed",
        "_grow_at",
        "_per_unit",
        "_samples",
        "_shrink_at",
        "_sizes",
        "_sums",
    )

    def __init__(
        self,
        *,
        first: int = FIRST_SAMPLES,
        every: int = SAMPLE_EVERY,
        entry_bytes: int = CACHE_ENTRY_BYTES,
    ) -> None:
        self._first = first
        self._every = every
        self._entry_bytes = entry_bytes
        # Charges until the next entry sampled by number, and that entry's number.
        self._countdown = 1
        self._due = 0
        self._samples = 0
        # Over the walked entries: units, bytes, units squared, units times bytes.
        self._sums = (0.0, 0.0, 0.0, 0.0)
        self._sizes = (0, 0)  # the smallest and the largest walked, in units
        # An entry of at least this many units, or at most this many, is walked.
        self._grow_at = 0
        self._shrink_at = -1
        self._fixed = float(entry_bytes)
        self._per_unit = 1.0

    @property
    def rate(self) -> float:
        """The bytes a unit is charged (1.0 before any entry is walked)."""
        return self._per_unit

    @property
    def fixed(self) -> float:
        """The bytes each entry is charged beside its units: ``entry_bytes`` and the part of
        the walked entries' memory that did not grow with their units."""
        return self._fixed

    def charge(self, units: int, kept: object) -> int:
        """What an entry of ``units`` that keeps ``kept`` alive is charged: the fixed part and
        ``units`` times the rate, after walking ``kept`` when it is one of the entries sampled."""
        # A countdown to the next entry sampled by number, and the bounds of the sizes
        # walked, not the number's arithmetic and the rate's division: a charge took
        # 4.3 K instructions, about 120 K a turn (28.6 charges, bench/turn_instructions.py).
        countdown = self._countdown - 1
        self._countdown = countdown
        if countdown <= 0 or units >= self._grow_at or units <= self._shrink_at:
            self._sample(units, kept)
        return int(self._fixed + units * self._per_unit)

    def _sample(self, units: int, kept: object) -> None:
        if self._countdown <= 0:  # this entry is number ``_due``, counted from 0
            due = self._due
            # The first ones each, then those whose number is a multiple of ``every``.
            following = due + 1 if due + 1 < self._first else (due // self._every + 1) * self._every
            self._due = following
            self._countdown = following - due
        if units > 0:
            self._learn(units, memory_of((kept,)))

    def _learn(self, units: int, walked: int) -> None:
        count = self._samples = self._samples + 1
        total_units, total_bytes, squares, products = self._sums
        total_units += units
        total_bytes += walked
        squares += units * units
        products += units * walked
        self._sums = (total_units, total_bytes, squares, products)
        smallest, largest = self._sizes
        smallest, largest = (
            (units, units) if count == 1 else (min(smallest, units), max(largest, units))
        )
        self._sizes = (smallest, largest)
        self._grow_at = GROWTH_SAMPLE * largest
        self._shrink_at = smallest // GROWTH_SAMPLE or -1  # an entry of no units is not walked
        per_unit = total_bytes / total_units
        fixed = 0.0
        spread = count * squares - total_units * total_units
        # Entries of about one size tell nothing of the fixed part: their bytes a unit,
        # charged to entries of that size, is right for them.
        if largest >= 2 * smallest and spread > 0:
            slope = (count * products - total_units * total_bytes) / spread
            intercept = (total_bytes - slope * total_units) / count
            if slope >= 1.0 and intercept >= 0:
                per_unit, fixed = slope, intercept
            elif slope < 1.0:  # a unit is charged at least a byte; the rest is the fixed part
                per_unit, fixed = 1.0, max(0.0, (total_bytes - total_units) / count)
            # Otherwise (a line through below zero) their bytes a unit over all, as before.
        self._per_unit = max(1.0, per_unit)
        self._fixed = self._entry_bytes + fixed
