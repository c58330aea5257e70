"""Argument checks at the public doors: each type accepted as itself, every other refused by name."""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType

import pytest

from dex_agents.domain.arguments import (
    require_bool,
    require_int,
    require_optional_int,
    require_optional_str,
    require_str,
    require_str_mapping,
)

Check = Callable[[str, str, object], object]

ACCEPTED: list[tuple[Check, object]] = [
    (require_str, "text"),
    (require_str, ""),
    (require_optional_str, "text"),
    (require_optional_str, None),
    (require_bool, True),
    (require_bool, False),
    (require_int, 0),
    (require_int, -3),
    (require_int, 2**70),
    (require_optional_int, 5),
    (require_optional_int, None),
    (require_str_mapping, {}),
    (require_str_mapping, {"HOME": "/home/a"}),
    (require_str_mapping, MappingProxyType({"k": "v"})),
]


@pytest.mark.parametrize(("check", "value"), ACCEPTED, ids=repr)
def test_a_value_of_the_right_type_is_returned_as_it_is(check: Check, value: object) -> None:
    assert check("door", "arg", value) is value


REFUSED: list[tuple[Check, object, str]] = [
    (require_str, None, "door: arg must be a str, not None"),
    (require_str, 5, "door: arg must be a str, not int (5)"),
    (require_str, b"x", "door: arg must be a str, not bytes (b'x')"),
    (require_str, ("a",), "door: arg must be a str, not tuple (('a',))"),
    (require_optional_str, 5, "door: arg must be a str or None, not int (5)"),
    (require_optional_str, False, "door: arg must be a str or None, not bool (False)"),
    (require_bool, "false", "door: arg must be a bool, not str ('false')"),
    (require_bool, 0, "door: arg must be a bool, not int (0)"),
    (require_bool, 1, "door: arg must be a bool, not int (1)"),
    (require_bool, None, "door: arg must be a bool, not None"),
    (require_int, "5", "door: arg must be an int, not str ('5')"),
    (require_int, 1.9, "door: arg must be an int, not float (1.9)"),
    (require_int, 1.0, "door: arg must be an int, not float (1.0)"),
    (require_int, True, "door: arg must be an int, not bool (True)"),
    (require_int, None, "door: arg must be an int, not None"),
    (require_optional_int, "5", "door: arg must be an int or None, not str ('5')"),
    (require_optional_int, True, "door: arg must be an int or None, not bool (True)"),
    (require_str_mapping, [("a", "b")], "door: arg must be a mapping of str to str, not list"),
    (require_str_mapping, "a=b", "door: arg must be a mapping of str to str, not str"),
    (require_str_mapping, {1: "b"}, "door: every key of arg must be a str, not int (1)"),
    (require_str_mapping, {"PORT": 8080}, "door: arg['PORT'] must be a str, not int (8080)"),
]


@pytest.mark.parametrize(("check", "value", "message"), REFUSED, ids=repr)
def test_a_value_of_another_type_is_refused_naming_the_door_and_argument(
    check: Check, value: object, message: str
) -> None:
    with pytest.raises(TypeError) as caught:
        check("door", "arg", value)
    assert str(caught.value).startswith(message)


def test_a_long_value_is_shown_shortened() -> None:
    with pytest.raises(TypeError) as caught:
        require_bool("door", "arg", "x" * 10_000)
    assert len(str(caught.value)) < 100
