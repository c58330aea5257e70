"""The wire converter's primitives: each decodes only from its own JSON type, and a refusal names the field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import pytest

from dex_agents.domain.errors import WireFormatError
from dex_agents.domain.messages import AgentUserMessage, FrameworkMessage, MessageRole
from dex_agents.domain.requests import (
    ExecutePlanRequest,
    ListAgentMessagesRequest,
    ResolveInterruptRequest,
)
from dex_agents.domain.state import AgentSessionStartInput
from dex_agents.domain.wire import from_json, from_wire, to_json


@attrs.frozen(kw_only=True)
class Primitives:
    """One field of each primitive, and an optional of each."""

    text: str = "t"
    count: int = 0
    flag: bool = False
    ratio: float = 0.5
    maybe_text: str | None = None
    maybe_count: int | None = None
    maybe_flag: bool | None = None
    maybe_ratio: float | None = None


@attrs.frozen(kw_only=True)
class Outer:
    """Primitives nested in a field, a tuple and a mapping, to check the paths."""

    inner: Primitives = attrs.field(factory=Primitives)
    items: tuple[Primitives, ...] = ()
    labels: Mapping[str, str] = attrs.field(factory=dict)


# field, accepted values, refused values with the name of their type in the message
CASES: list[tuple[str, list[Any], list[tuple[Any, str]]]] = [
    (
        "text",
        ["", "hello", "None"],
        [(None, "None"), (5, "int"), (1.5, "float"), (True, "bool"), ([], "list"), ({}, "dict")],
    ),
    (
        "count",
        [0, -7, 2**60],
        [
            ("5", "str"),
            (1.9, "float"),
            (1.0, "float"),
            (True, "bool"),
            (None, "None"),
            ([], "list"),
        ],
    ),
    (
        "flag",
        [True, False],
        [("false", "str"), ("true", "str"), (0, "int"), (1, "int"), (None, "None"), (0.0, "float")],
    ),
    (
        "ratio",
        [0.25, 0, 3, -1.5],
        [("0.5", "str"), (True, "bool"), (False, "bool"), (None, "None"), ([], "list")],
    ),
]

EXPECTED = {"text": "a str", "count": "an int", "flag": "a bool", "ratio": "a float"}


@pytest.mark.parametrize(
    ("field", "value"),
    [(field, value) for field, accepted, _ in CASES for value in accepted],
    ids=repr,
)
def test_a_primitive_of_its_own_type_is_accepted(field: str, value: Any) -> None:
    decoded = from_wire({field: value}, Primitives)
    assert getattr(decoded, field) == value
    assert type(getattr(decoded, field)) is type(getattr(Primitives(), field))


@pytest.mark.parametrize(
    ("field", "value", "kind"),
    [(field, value, kind) for field, _, refused in CASES for value, kind in refused],
    ids=repr,
)
def test_a_primitive_of_another_type_is_refused_naming_the_field(
    field: str, value: Any, kind: str
) -> None:
    with pytest.raises(WireFormatError) as caught:
        from_wire({field: value}, Primitives)
    assert str(caught.value) == (
        f"invalid Primitives: {field}: expected {EXPECTED[field]}, not {kind}"
    )


@pytest.mark.parametrize("field", ["maybe_text", "maybe_count", "maybe_flag", "maybe_ratio"])
def test_an_optional_primitive_accepts_none_and_is_as_strict_otherwise(field: str) -> None:
    assert getattr(from_wire({field: None}, Primitives), field) is None
    wrong = {"maybe_text": 5, "maybe_count": "5", "maybe_flag": "false", "maybe_ratio": True}
    with pytest.raises(WireFormatError, match=f"^invalid Primitives: {field}: expected "):
        from_wire({field: wrong[field]}, Primitives)


def test_an_int_for_a_float_field_decodes_to_a_float() -> None:
    decoded = from_wire({"ratio": 3}, Primitives)
    assert decoded.ratio == 3.0
    assert type(decoded.ratio) is float


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"inner": {"flag": "no"}}, "inner.flag: expected a bool, not str"),
        ({"items": [{}, {"count": "2"}]}, "items[1].count: expected an int, not str"),
        ({"labels": {"a": "x", "b": 7}}, "labels['b']: expected a str, not int"),
    ],
)
def test_a_nested_field_is_named_by_its_path(data: dict[str, Any], message: str) -> None:
    with pytest.raises(WireFormatError) as caught:
        from_wire(data, Outer)
    assert str(caught.value) == f"invalid Outer: {message}"


def test_every_faulty_field_is_named() -> None:
    with pytest.raises(WireFormatError) as caught:
        from_wire({"text": None, "flag": "yes", "count": 1}, Primitives)
    assert str(caught.value) == (
        "invalid Primitives: text: expected a str, not None; flag: expected a bool, not str"
    )


def test_the_bug_report_approval_is_refused_not_read_as_true() -> None:
    text = '{"interrupt_id": "call-1", "approved": "false"}'
    with pytest.raises(WireFormatError) as caught:
        from_json(text, ResolveInterruptRequest)
    assert str(caught.value) == (
        "invalid ResolveInterruptRequest: approved: expected a bool, not str"
    )


@pytest.mark.parametrize(
    ("data", "cls", "message"),
    [
        ({"text": None}, AgentUserMessage, "text: expected a str, not None"),
        ({"text": "hi", "plan_mode": "no"}, AgentUserMessage, "plan_mode: expected a bool"),
        ({"limit": "5"}, ListAgentMessagesRequest, "limit: expected an int, not str"),
        ({"limit": 1.9}, ListAgentMessagesRequest, "limit: expected an int, not float"),
        ({"limit": True}, ListAgentMessagesRequest, "limit: expected an int, not bool"),
        ({"revision": "1"}, ExecutePlanRequest, "revision: expected an int, not str"),
        (
            {"start_environment": {"PORT": 8080}},
            AgentSessionStartInput,
            "start_environment['PORT']: expected a str, not int",
        ),
        (
            {
                "text": "look",
                "images": [
                    {
                        "type": "image",
                        "uri": "u",
                        "mime_type": "image/png",
                        "sha256": "a",
                        "size_bytes": "9",
                    }
                ],
            },
            AgentUserMessage,
            "images[0].size_bytes: expected an int, not str",
        ),
    ],
    ids=repr,
)
def test_the_session_values_are_strict(data: dict[str, Any], cls: type[Any], message: str) -> None:
    with pytest.raises(WireFormatError) as caught:
        from_wire(data, cls)
    assert message in str(caught.value)
    assert str(caught.value).startswith(f"invalid {cls.__name__}: ")


def test_a_string_enum_still_decodes_and_refuses_a_number() -> None:
    message = from_wire({"role": "user", "framework_item": "{}"}, FrameworkMessage)
    assert message.role is MessageRole.USER
    with pytest.raises(WireFormatError, match="role: expected a str, not int"):
        from_wire({"role": 1, "framework_item": "{}"}, FrameworkMessage)


@pytest.mark.parametrize(
    ("data", "cls", "message"),
    [
        ("5", int, "invalid int: expected an int, not str"),
        (1, bool, "invalid bool: expected a bool, not int"),
        (None, str, "invalid str: expected a str, not None"),
        (True, float, "invalid float: expected a float, not bool"),
    ],
)
def test_a_bare_primitive_is_strict_too(data: Any, cls: type[Any], message: str) -> None:
    with pytest.raises(WireFormatError) as caught:
        from_wire(data, cls)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"inner": "x"}, "inner: expected a JSON object, not str"),
        ({"inner": [1]}, "inner: expected a JSON object, not list"),
        ({"items": "ab"}, "items: expected a JSON array, not str"),
        ({"items": {"a": {}}}, "items: expected a JSON array, not dict"),
        ({"items": [{}, 5]}, "items[1]: expected a JSON object, not int"),
    ],
)
def test_an_object_or_array_field_takes_only_its_json_type(
    data: dict[str, Any], message: str
) -> None:
    # cattrs alone would fail on ``"x".keys()`` or make a tuple of the characters.
    with pytest.raises(WireFormatError) as caught:
        from_wire(data, Outer)
    assert str(caught.value) == f"invalid Outer: {message}"


@pytest.mark.parametrize("data", ["false", 1, None, ["call-1", False]])
def test_a_request_that_is_not_an_object_is_refused(data: Any) -> None:
    with pytest.raises(WireFormatError) as caught:
        from_wire(data, ResolveInterruptRequest)
    assert str(caught.value).startswith("invalid ResolveInterruptRequest: expected a JSON object")


def test_cattrs_errors_keep_their_own_detail() -> None:
    with pytest.raises(WireFormatError) as caught:
        from_wire({"role": "robot", "framework_item": "{}"}, FrameworkMessage)
    assert str(caught.value) == (
        "invalid FrameworkMessage: role: invalid value for type, expected MessageRole"
        " ('robot' is not a valid MessageRole)"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0", "invalid NoneType: expected null, not int"),
        ('"null"', "invalid NoneType: expected null, not str"),
        (" nul", "invalid NoneType: not valid JSON"),
    ],
)
def test_no_input_decodes_only_from_null(text: str, message: str) -> None:
    assert to_json(None) == "null"
    assert from_json("null", type(None)) is None
    assert from_json(" null ", type(None)) is None
    with pytest.raises(WireFormatError, match=message):
        from_json(text, type(None))
