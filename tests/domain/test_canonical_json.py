"""The canonical JSON text is the standard library's, byte for byte, and so are its errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dex_agents.domain import canonical_json
from dex_agents.domain.canonical_json import compact_encoder, dumps, loads
from dex_agents.domain.unicode_text import escape_lone_surrogates


def standard_dumps(value: Any) -> str:
    return json.dumps(
        value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False
    )


def test_the_c_encoder_and_scanner_are_in_use() -> None:
    # Every other test here would pass on the standard library's entry points alone.
    assert canonical_json._CANONICAL.__qualname__ == "compact_encoder.<locals>.encode"
    assert type(canonical_json._scan).__module__ == "_json"


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -7,
        10**30,
        1.5,
        -0.0,
        1e300,
        "",
        "plain",
        'quote " backslash \\ newline \n tab \t nul \x00',
        "non-ASCII é ü 日本 🚀",
        [],
        {},
        [1, "two", None, [3.25, {"b": 1, "a": 2}]],
        {"z": 1, "a": {"y": [True, False], "b": "x"}, "m": None},
        (1, 2),
    ],
)
def test_dumps_writes_what_the_standard_encoder_writes(value: Any) -> None:
    assert dumps(value) == standard_dumps(value)


def test_dumps_escapes_a_lone_surrogate() -> None:
    assert dumps({"name": "file\udcff.txt"}) == '{"name":"file\\udcff.txt"}'


@pytest.mark.parametrize("value", [float("nan"), float("inf"), [float("-inf")]])
def test_dumps_refuses_what_json_cannot_hold(value: Any) -> None:
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        dumps(value)


def test_dumps_names_a_type_it_cannot_write() -> None:
    with pytest.raises(TypeError, match="Object of type set is not JSON serializable"):
        dumps({"a": {1, 2}})


def test_dumps_names_a_circular_value() -> None:
    # The fast encoder keeps no table of the containers it is in; the standard one does.
    value: list[Any] = []
    value.append(value)
    with pytest.raises(ValueError, match="Circular reference detected"):
        dumps(value)


def test_dumps_of_a_value_nested_too_deeply_raises_recursion_error() -> None:
    value: list[Any] = []
    for _ in range(100_000):
        value = [value]
    with pytest.raises(RecursionError):
        dumps(value)


@pytest.mark.parametrize(
    "text",
    [
        "null",
        "0",
        "-1.25e3",
        '"text"',
        '"\\u00e9\\ud83d\\ude80"',
        "[]",
        '{"a":[1,{"b":null}],"c":"é"}',
        ' {"a": 1} ',  # whitespace around: json.loads reads it
        "\n[1]\n",
        "NaN",
        '{"a":1,"a":2}',
    ],
)
def test_loads_reads_what_json_loads_reads(text: str) -> None:
    expected = json.loads(text)
    got = loads(text)
    assert got == expected or (got != got and expected != expected)  # NaN equals no NaN
    assert type(got) is type(expected)


def test_loads_reads_bytes() -> None:
    assert loads(b'{"a":1}') == {"a": 1}


@pytest.mark.parametrize(
    "text",
    ["", "   ", "nul", "[1,2", '{"a":1} x', '{"a":1}{"b":2}', "\ufeff{}", "{'a':1}", '"\\ud83d'],
)
def test_loads_raises_what_json_loads_raises(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    with pytest.raises(json.JSONDecodeError) as got:
        loads(text)
    assert (got.value.msg, got.value.pos) == (expected.value.msg, expected.value.pos)


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@given(_json_values)
def test_any_json_value_round_trips_as_the_standard_library_writes_and_reads_it(value: Any) -> None:
    text = dumps(value)
    assert text == escape_lone_surrogates(standard_dumps(value))
    assert loads(text) == json.loads(text)


_OPTIONS = [
    {"sort_keys": sort_keys, "ensure_ascii": ensure_ascii, "allow_nan": allow_nan}
    for sort_keys in (False, True)
    for ensure_ascii in (False, True)
    for allow_nan in (False, True)
]


def json_dumps(value: Any, options: dict[str, bool]) -> str:
    return json.dumps(
        value,
        separators=(",", ":"),
        sort_keys=options["sort_keys"],
        ensure_ascii=options["ensure_ascii"],
        allow_nan=options["allow_nan"],
    )


def outcome(encode: Callable[[], str]) -> tuple[str, str]:
    """The text written, or the error raised, as a pair to compare."""
    try:
        return "text", encode()
    except Exception as error:
        return type(error).__name__, str(error)


@pytest.mark.parametrize("options", _OPTIONS)
@pytest.mark.parametrize(
    "value",
    [
        None,
        "plain",
        "non-ASCII é 日本 🚀 and a lone surrogate \udcff",
        -0.0,
        10**30,
        [1, "two", None, [3.25, {"b": 1, "a": 2}]],
        {"z": 1, "a": {"y": [True, False], "b": "é"}, "m": None},
        {2: "int key", 1.5: "float key", True: "bool key", None: "null key"},
        (1, ("nested", "tuple")),
    ],
)
def test_a_compact_encoder_writes_what_json_dumps_writes(
    value: Any, options: dict[str, bool]
) -> None:
    encode = compact_encoder(**options)
    assert encode.__qualname__ == "compact_encoder.<locals>.encode"
    # Keys of mixed types cannot be sorted: both raise the same TypeError then.
    assert outcome(lambda: encode(value)) == outcome(lambda: json_dumps(value, options))


@pytest.mark.parametrize("options", _OPTIONS)
def test_a_compact_encoder_writes_or_refuses_nan_as_json_dumps_does(
    options: dict[str, bool],
) -> None:
    value = [float("nan"), float("inf"), float("-inf")]
    encode = compact_encoder(**options)
    if options["allow_nan"]:
        assert encode(value) == "[NaN,Infinity,-Infinity]"
    else:
        with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
            encode(value)


@pytest.mark.parametrize("options", _OPTIONS)
def test_a_compact_encoder_raises_what_json_dumps_raises(options: dict[str, bool]) -> None:
    encode = compact_encoder(**options)
    with pytest.raises(TypeError, match="Object of type set is not JSON serializable"):
        encode({"a": {1, 2}})
    circular: dict[str, Any] = {}
    circular["self"] = circular
    with pytest.raises(ValueError, match="Circular reference detected"):
        encode(circular)


@given(_json_values, st.sampled_from(_OPTIONS))
def test_any_json_value_is_written_as_json_dumps_writes_it(
    value: Any, options: dict[str, bool]
) -> None:
    assert compact_encoder(**options)(value) == json_dumps(value, options)
