"""What a cache's entries take in memory: each object once, and a rate learned from a few."""

from __future__ import annotations

import sys

from dex_agents.domain.kept_memory import MemoryRate, memory_of
from dex_agents.domain.state import AgentStatus


def test_memory_counts_every_reachable_object_once() -> None:
    text = "x" * 1000
    alone = memory_of((text,))
    assert alone == sys.getsizeof(text)
    shared = (text, text, [text])
    assert memory_of((shared,)) == sys.getsizeof(shared) + sys.getsizeof(shared[2]) + alone


def test_types_and_enum_members_are_the_processes_not_an_entrys() -> None:
    assert memory_of((AgentStatus.WAITING_FOR_USER_MESSAGE, str, None)) == 0


def test_an_entry_is_charged_its_units_times_the_bytes_a_unit_took_in_the_sampled() -> None:
    rate = MemoryRate(first=1, every=1000)
    kept = ["a" * 100, "b" * 100]  # more than 100 bytes a string: the list and the headers
    charged = rate.charge(200, kept)
    assert charged == memory_of((kept,))
    assert rate.rate == memory_of((kept,)) / 200
    # Not sampled: charged at the rate, whatever it keeps.
    assert rate.charge(400, "") == int(400 * rate.rate)


def test_the_rate_samples_the_first_entries_then_one_in_every() -> None:
    rate = MemoryRate(first=2, every=4)
    small, large = "s", ["x" * 10_000]
    for _ in range(2):
        rate.charge(1, small)  # the first two: sampled
    learned = rate.rate
    rate.charge(1, large)  # the third and the fourth: not sampled
    rate.charge(1, large)
    assert rate.rate == learned
    rate.charge(1, large)  # the fifth, number 4 from 0, and 4 % 4 == 0: sampled
    assert rate.rate > learned


def test_the_rate_is_at_least_a_byte_a_unit() -> None:
    rate = MemoryRate()
    assert rate.rate == 1.0
    assert rate.charge(10**6, "x") == 10**6


def test_an_entry_that_outgrows_every_walked_one_is_walked_and_sets_the_rate() -> None:
    # A cache's first entries are small, and their objects' fixed overhead took several
    # bytes a unit: charged at their rate until the 1,025th entry, a large entry was
    # charged many times its memory and the cache kept a fraction of its bound.
    rate = MemoryRate(first=2, every=1024)
    for _ in range(2):
        rate.charge(1, ("s",))
    large = "x" * 10_000
    assert rate.charge(10_000, large) <= 1.1 * memory_of((large,))
    # Not four times the largest walked: charged at the rate, not walked.
    learned = rate.rate
    rate.charge(39_999, ("y",))
    assert rate.rate == learned
