"""What a cache's entries take in memory: each object once, and a rate learned from a few."""

from __future__ import annotations

import sys
from datetime import UTC, datetime

import pytest

from dex_agents.domain.kept_memory import CACHE_ENTRY_BYTES, MemoryRate, memory_of
from dex_agents.domain.messages import AgentMessage
from dex_agents.domain.state import AgentStatus
from dex_agents.domain.wire import from_json, to_json


def test_memory_counts_every_reachable_object_once() -> None:
    text = "x" * 1000
    alone = memory_of((text,))
    assert alone == sys.getsizeof(text)
    shared = (text, text, [text])
    assert memory_of((shared,)) == sys.getsizeof(shared) + sys.getsizeof(shared[2]) + alone


def test_types_and_enum_members_are_the_processes_not_an_entrys() -> None:
    assert memory_of((AgentStatus.WAITING_FOR_USER_MESSAGE, str, None)) == 0


def test_an_entry_is_charged_its_units_times_the_bytes_a_unit_took_in_the_sampled() -> None:
    rate = MemoryRate(first=1, every=1000, entry_bytes=0)
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
    assert rate.charge(10**6, "x") == 10**6 + CACHE_ENTRY_BYTES


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


def _entry(units: int, fields: int) -> object:
    """What an entry of ``units`` characters keeps: its text, and ``fields`` objects of its own
    that take the same bytes whatever the text (as a message's fields do)."""
    return ("x" * units, [f"field {units} {n}" for n in range(fields)])


def _message(units: int) -> object:
    """A stored message's text of about ``units`` characters and the message it decodes to."""
    text = to_json(
        AgentMessage(
            sequence=units,
            turn_id=f"turn-{units}",
            role="user",
            framework_item="{}",
            text="y" * units,
            created_at=datetime(2026, 12, 7, tzinfo=UTC),
        )
    )
    return (text, from_json(text, AgentMessage))


def _units(kept: object) -> int:
    assert isinstance(kept, tuple)
    return len(kept[0])


@pytest.mark.parametrize(
    ("runs", "every"),
    [
        # (how many entries, of how many units, with how many fields of their own), in order.
        pytest.param([(2, 20_000, 20), (300, 60, 20)], 1024, id="large first, then small"),
        pytest.param([(2, 60, 20), (2, 20_000, 20), (300, 60, 20)], 1024, id="small, large, small"),
        pytest.param([(300, 200, 20)], 1024, id="all small"),
        pytest.param([(2, 50_000, 0), (300, 40, 0)], 1024, id="no fields: text alone"),
        pytest.param(
            [(1, 20_000, 20), (50, 60, 20), (1, 20_000, 20), (50, 60, 20)] * 3, 16, id="interleaved"
        ),
    ],
)
def test_small_entries_are_charged_what_they_take_once_large_ones_were_walked(
    runs: list[tuple[int, int, int]], every: int
) -> None:
    # One rate a unit, set by large entries, left out each entry's fixed part: a message
    # of 272 characters was charged 547 bytes of the 997 it and its cache entry took.
    rate = MemoryRate(every=every)
    entries = [_entry(units, fields) for count, units, fields in runs for _ in range(count)]
    charged = sum(rate.charge(_units(kept), kept) for kept in entries)
    taken = sum(memory_of((kept,)) + CACHE_ENTRY_BYTES for kept in entries)
    assert 0.9 * taken <= charged <= 1.3 * taken
    for kind in {(units, fields) for _, units, fields in runs}:  # each kind, once learned
        kept = _entry(*kind)
        assert (
            0.9 <= rate.charge(_units(kept), kept) / (memory_of((kept,)) + CACHE_ENTRY_BYTES) <= 1.3
        )


@pytest.mark.parametrize(
    "sizes",
    [
        pytest.param([20_000, 20_000] + [60] * 300, id="tool results, then short messages"),
        pytest.param([200, 200] + [20_000] * 4 + [200] * 300, id="messages, a few large ones"),
        pytest.param([200] * 300, id="messages alike"),
    ],
)
def test_decoded_messages_are_charged_what_they_take(sizes: list[int]) -> None:
    rate = MemoryRate()
    entries = [_message(size) for size in sizes]
    charged = sum(rate.charge(_units(kept), kept) for kept in entries)
    taken = sum(memory_of((kept,)) + CACHE_ENTRY_BYTES for kept in entries)
    assert 0.9 * taken <= charged <= 1.3 * taken


def test_an_entry_far_below_every_walked_one_is_walked_for_the_fixed_part() -> None:
    rate = MemoryRate(first=1, every=1024, entry_bytes=0)
    rate.charge(20_000, _entry(20_000, 20))
    assert rate.fixed == 0  # one size walked: no line yet
    small = _entry(60, 20)
    assert rate.charge(60, small) >= 0.9 * memory_of((small,))
    assert rate.fixed > 0
    # Not a quarter of the smallest walked: not walked, the line kept.
    learned = (rate.fixed, rate.rate)
    rate.charge(16, ("z" * 16,))
    assert (rate.fixed, rate.rate) == learned


@pytest.mark.parametrize(
    ("first", "every", "walked"),
    [
        (2, 4, [0, 1, 4, 8, 12, 16]),
        (1, 5, [0, 5, 10, 15]),
        (0, 8, [0, 8, 16]),
        (6, 4, [0, 1, 2, 3, 4, 5, 8, 12, 16]),
        (3, 1, list(range(19))),
    ],
)
def test_the_entries_walked_by_number_are_the_first_then_each_multiple_of_every(
    first: int, every: int, walked: list[int]
) -> None:
    rate = MemoryRate(first=first, every=every)
    seen = []
    for number in range(19):
        before = rate.rate
        rate.charge(10, "x" * (100 + 50 * number))  # each of ten units: only a walk moves the rate
        if rate.rate != before:
            seen.append(number)
    assert seen == walked
