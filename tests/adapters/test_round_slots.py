"""A claim round's slots go to a hand-off before its transaction begins and once it has
claimed, never while it runs, and each slot is released once."""

from __future__ import annotations

import pytest

from dex_agents.adapters.local.round_slots import RoundSlots


@pytest.mark.parametrize(
    ("reserved", "asks", "lent", "claims_up_to"),
    [
        (16, [3], [3], 13),
        (16, [3, 3], [3, 3], 10),
        (2, [3], [2], 0),
        (2, [3, 3], [2, 0], 0),
        (0, [3], [0], 0),
    ],
    ids=["one-hand-off", "two-hand-offs", "fewer-than-asked", "none-left", "none-reserved"],
)
def test_slots_lent_before_the_round_begins_are_taken_from_its_limit(
    reserved: int, asks: list[int], lent: list[int], claims_up_to: int
) -> None:
    slots = RoundSlots(reserved)
    assert [slots.lend(most) for most in asks] == lent
    assert slots.begin() == claims_up_to
    assert slots.claim_limit == claims_up_to
    # Every reserved slot is released once: by the hand-offs, and by the round.
    assert sum(lent) + slots.limit == reserved


@pytest.mark.parametrize(
    ("reserved", "claimed", "asks", "lent"),
    [
        (16, 0, [3, 3], [3, 3]),
        (16, 14, [3], [2]),
        (4, 4, [3], [0]),
        (4, 1, [3, 3], [3, 0]),
    ],
    ids=["claimed-nothing", "claimed-most", "claimed-all", "claimed-one"],
)
def test_once_the_round_claimed_the_slots_beyond_its_claims_are_lent(
    reserved: int, claimed: int, asks: list[int], lent: list[int]
) -> None:
    slots = RoundSlots(reserved)
    assert slots.begin() == reserved
    assert slots.lend(3) == 0  # its transaction runs: it may need every slot
    slots.took(claimed)
    assert [slots.lend(most) for most in asks] == lent
    assert slots.limit == reserved - sum(lent) >= claimed
    assert slots.claim_limit == reserved


def test_a_transaction_that_begins_again_claims_up_to_what_the_round_still_holds() -> None:
    slots = RoundSlots(16)
    slots.begin()
    slots.took(2)  # then its commit failed: the store retries the work
    assert slots.lend(3) == 3
    assert slots.begin() == 13
    assert slots.lend(3) == 0


def test_a_round_reserves_no_negative_count() -> None:
    with pytest.raises(ValueError, match="not -1"):
        RoundSlots(-1)
