"""Whole-map reads kept per session: equal text gives the very tuple, any change a new one."""

from __future__ import annotations

import json

import pytest

from dex_agents.adapters.local.decoded_maps import DecodedMaps
from dex_agents.adapters.local.decoded_values import DecodedValues
from dex_agents.domain.state import AgentState, AgentStatus, TurnSessionSettings
from dex_agents.domain.wire import to_json

TEXTS = {"b": '"two"', "a": '"one"', "c": '"three"'}


def _maps(*, measured: bool = False, **bounds: int) -> DecodedMaps:
    return DecodedMaps(DecodedValues(), measured=measured, **bounds)


def test_a_map_reads_in_key_order_decoded() -> None:
    maps = _maps()
    assert maps.instances("s1", "Notes", dict(TEXTS), str) == (
        ("a", "one"),
        ("b", "two"),
        ("c", "three"),
    )


def test_equal_text_read_again_is_the_same_tuple() -> None:
    maps = _maps()
    first = maps.instances("s1", "Notes", dict(TEXTS), str)
    # Another transaction's copy, in another order: equal text all the same.
    again = maps.instances("s1", "Notes", dict(reversed(list(TEXTS.items()))), str)
    assert again is first


@pytest.mark.parametrize(
    ("texts", "expected"),
    [
        ({**TEXTS, "b": '"changed"'}, (("a", "one"), ("b", "changed"), ("c", "three"))),
        ({**TEXTS, "d": '"four"'}, (("a", "one"), ("b", "two"), ("c", "three"), ("d", "four"))),
        ({"a": '"one"', "c": '"three"'}, (("a", "one"), ("c", "three"))),
        (
            {"a": '"one"', "b": '"two"', "z": '"three"'},
            (("a", "one"), ("b", "two"), ("z", "three")),
        ),
        ({}, ()),
    ],
    ids=["a value changed", "a key added", "a key deleted", "a key renamed", "emptied"],
)
def test_any_change_to_the_text_reads_anew(
    texts: dict[str, str], expected: tuple[tuple[str, str], ...]
) -> None:
    maps = _maps()
    maps.instances("s1", "Notes", dict(TEXTS), str)
    assert maps.instances("s1", "Notes", texts, str) == expected
    # The changed read is now the one kept.
    assert maps.instances("s1", "Notes", dict(texts), str) == expected


def test_sessions_maps_and_value_types_are_kept_apart() -> None:
    maps = _maps()
    notes = maps.instances("s1", "Notes", dict(TEXTS), str)
    other_session = maps.instances("s2", "Notes", {"a": '"elsewhere"'}, str)
    other_map = maps.instances("s1", "Other", {"a": '"other"'}, str)
    assert other_session == (("a", "elsewhere"),)
    assert other_map == (("a", "other"),)
    assert maps.instances("s1", "Notes", dict(TEXTS), str) is notes
    state = AgentState(status=AgentStatus.WAITING_FOR_USER_MESSAGE, turn_count=3)
    assert maps.instances("s1", "Notes", {"a": to_json(state)}, AgentState) == (("a", state),)
    assert len(maps) == 4


def test_a_mutable_value_type_is_decoded_afresh_and_not_kept() -> None:
    maps = _maps()
    texts = {"a": to_json(TurnSessionSettings(turn_id="turn-1", settings={"model": "a"}))}
    first = maps.instances("s1", "Settings", dict(texts), TurnSessionSettings)
    again = maps.instances("s1", "Settings", dict(texts), TurnSessionSettings)
    assert again == first
    assert again[0][1] is not first[0][1]
    assert len(maps) == 0


def test_the_kept_reads_are_bounded_in_count_and_in_text() -> None:
    by_count = _maps(entries=2)
    for session in ("s1", "s2", "s3"):
        by_count.instances(session, "Notes", dict(TEXTS), str)
    assert len(by_count) == 2
    first = by_count.instances("s2", "Notes", dict(TEXTS), str)
    by_count.instances("s4", "Notes", dict(TEXTS), str)  # drops s3, read before s2
    assert by_count.instances("s2", "Notes", dict(TEXTS), str) is first
    chars = sum(map(len, TEXTS.values()))
    by_chars = _maps(most_chars=2 * chars)
    too_long = {**TEXTS, "d": '"' + "1" * 2 * chars + '"'}
    by_chars.instances("s1", "Notes", too_long, str)  # more text than all may hold: not kept
    assert len(by_chars) == 0
    for session in ("s1", "s2", "s3"):
        by_chars.instances(session, "Notes", dict(TEXTS), str)
    assert len(by_chars) == 2


def test_a_map_read_again_replaces_what_it_weighed() -> None:
    chars = sum(map(len, TEXTS.values()))
    maps = _maps(most_chars=2 * chars)
    for _ in range(5):  # one session's read replaced again and again: never over its bound
        maps.instances("s1", "Notes", dict(TEXTS), str)
        maps.instances("s1", "Notes", {**TEXTS, "b": '"six"'}, str)
    maps.instances("s2", "Notes", dict(TEXTS), str)
    assert len(maps) == 2


@pytest.mark.parametrize(
    ("texts", "extends"),
    [
        ({**TEXTS, "d": '"four"'}, True),
        ({**TEXTS, "e": '"five"', "d": '"four"'}, True),
        ({**TEXTS, "bb": '"between"'}, False),  # a key among the kept ones
        ({**TEXTS, "0": '"first"'}, False),
        ({**TEXTS, "b": '"changed"', "d": '"four"'}, False),  # a kept text changed
        ({"a": '"one"', "c": '"three"', "d": '"four"'}, False),  # one kept key gone
    ],
    ids=["one key after", "two after", "one between", "one before", "changed", "dropped"],
)
def test_a_read_that_only_adds_keys_after_the_last_extends_its_tuple(
    texts: dict[str, str], extends: bool
) -> None:
    maps = _maps()
    first = maps.instances("s1", "Notes", dict(TEXTS), str)
    read = maps.instances("s1", "Notes", dict(texts), str)
    assert read == tuple((key, json.loads(texts[key])) for key in sorted(texts))
    assert all(a is b for a, b in zip(first, read, strict=False)) is extends
    # The extended read is the one kept now, whichever way it was made.
    assert maps.instances("s1", "Notes", dict(texts), str) is read


def test_an_extended_read_weighs_its_whole_text() -> None:
    chars = sum(map(len, TEXTS.values()))
    maps = _maps(most_chars=chars + 6)
    maps.instances("s1", "Notes", dict(TEXTS), str)
    four = {**TEXTS, "d": '"four"'}  # six characters more: the bound
    assert maps.instances("s1", "Notes", four, str) is maps.instances("s1", "Notes", four, str)
    five = {**four, "e": '"e"'}
    # Past the bound: not kept, so read again it is paired again.
    assert maps.instances("s1", "Notes", five, str) is not maps.instances("s1", "Notes", five, str)


def test_a_kept_read_is_charged_the_memory_of_its_texts_and_pairs() -> None:
    # Three texts of 18 characters in all take hundreds of bytes with their dict and
    # their pairs: by characters a read fits a bound of 200 twice, by memory not once.
    chars = sum(map(len, TEXTS.values()))
    assert 2 * chars < 200
    by_chars = _maps(most_chars=200)
    by_chars.instances("s1", "Notes", dict(TEXTS), str)
    by_chars.instances("s2", "Notes", dict(TEXTS), str)
    assert len(by_chars) == 2
    by_memory = _maps(most_chars=200, measured=True)
    by_memory.instances("s1", "Notes", dict(TEXTS), str)
    assert len(by_memory) == 0
    roomy = _maps(most_chars=8 * 1024, measured=True)
    for session in ("s1", "s2", "s3"):
        roomy.instances(session, "Notes", dict(TEXTS), str)
    assert len(roomy) == 3
