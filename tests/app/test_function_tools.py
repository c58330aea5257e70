"""Function tools of the built-in loop: schema derivation, argument checks, calls and results."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import threading
from collections.abc import AsyncIterator, Awaitable, Iterator, Mapping
from typing import Annotated, Any, Literal, NotRequired, Optional, Required, TypedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.adapters.media.memory_store import InMemoryMediaStore
from dex_agents.app.builtin_loop.function_tools import (
    FunctionTool,
    FunctionToolResult,
    ToolCallContext,
    function_tool,
)
from dex_agents.app.builtin_loop.json_schema import convert_json_value, json_schema_for_type
from dex_agents.app.builtin_loop.json_validation import validate_json_value
from dex_agents.domain.errors import ImageValidationError, ToolExecutionError
from dex_agents.domain.events import EventPayload
from dex_agents.domain.images import MAX_IMAGES_PER_MESSAGE, AgentImageReference, image_uri
from dex_agents.domain.model_io import ModelToolDefinition
from dex_agents.domain.runner_outcomes import ToolExecutionResult, ToolInputRequested
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from dex_agents.ports.event_writer import AgentEventWriter
from dex_agents.ports.runner import DeferredToolExecution
from tests.domain.images_support import png


class FakeEventWriter:
    """Records what a tool writes."""

    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    def write_text_delta(self, text: str) -> None:
        self.events.append(("text_delta", text))

    def write_reasoning_delta(self, text: str) -> None:
        self.events.append(("reasoning_delta", text))

    def write_tool_call_started(self, tool_call_id: str, tool_name: str) -> None:
        self.events.append(("tool_call_started", tool_call_id))

    def write_tool_call_finished(
        self, tool_call_id: str, tool_name: str, status: ToolCallStatus
    ) -> None:
        self.events.append(("tool_call_finished", tool_call_id))

    def write_event(self, event_type: str, payload: Mapping[str, Any] | EventPayload) -> None:
        self.events.append((event_type, payload))


async def no_heartbeat() -> None:
    return None


def make_context(**changes: Any) -> ToolCallContext:
    writer: AgentEventWriter = FakeEventWriter()
    context = ToolCallContext(
        idempotency_key="flow-1/turn-1/call-1",
        attempt=1,
        flow_id="flow-1",
        turn_id="turn-1",
        tool_call_id="call-1",
        events=writer,
        heartbeat=no_heartbeat,
    )
    return dataclasses.replace(context, **changes)


class Color(enum.StrEnum):
    RED = "red"
    GREEN = "green"


class Priority(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass(frozen=True)
class Address:
    city: str
    zip_code: Annotated[str, "Postal code."] = ""


@dataclasses.dataclass(frozen=True)
class Customer:
    name: str
    address: Address
    tags: list[str] = dataclasses.field(default_factory=list)


class Filters(TypedDict):
    status: Literal["open", "closed"]
    limit: NotRequired[int]


@dataclasses.dataclass
class Node:
    child: Node | None


class Plain:
    pass


@dataclasses.dataclass
class Box:
    items: set[str]


class Flags(TypedDict, total=False):
    verbose: bool
    level: Required[int]


ADDRESS_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "zip_code": {"type": "string", "description": "Postal code."},
    },
    "required": ["city"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("hint", "schema"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (None, {"type": "null"}),
        (type(None), {"type": "null"}),
        (list, {"type": "array"}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (dict, {"type": "object"}),
        (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Literal[1, "a", None], {"enum": [1, "a", None]}),
        (Color, {"type": "string", "enum": ["red", "green"]}),
        (Priority, {"type": "integer", "enum": [1, 2]}),
        (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (Optional[str], {"anyOf": [{"type": "string"}, {"type": "null"}]}),  # noqa: UP045
        (
            str | list[int],
            {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "integer"}}]},
        ),
        (Annotated[int, "How many."], {"type": "integer", "description": "How many."}),
        (
            Annotated[int, 7, "Second wins.", "Third."],
            {"type": "integer", "description": "Second wins."},
        ),
        (Annotated[int, 7], {"type": "integer"}),
        (
            list[Annotated[Color, "A color."]],
            {
                "type": "array",
                "items": {"type": "string", "enum": ["red", "green"], "description": "A color."},
            },
        ),
        (Address, ADDRESS_SCHEMA),
        (
            Customer,
            {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "address": ADDRESS_SCHEMA,
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["name", "address"],
                "additionalProperties": False,
            },
        ),
        (
            Filters,
            {
                "type": "object",
                "properties": {
                    "status": {"type": "string", "enum": ["open", "closed"]},
                    "limit": {"type": "integer"},
                },
                "required": ["status"],
                "additionalProperties": False,
            },
        ),
        (
            Flags,
            {
                "type": "object",
                "properties": {"verbose": {"type": "boolean"}, "level": {"type": "integer"}},
                "required": ["level"],
                "additionalProperties": False,
            },
        ),
    ],
    ids=repr,
)
def test_schema_of_each_supported_type(hint: object, schema: dict[str, Any]) -> None:
    assert json_schema_for_type(hint) == schema


SUFFIX = (
    "; function tools take str, int, float, bool, None, list, dict[str, T], Literal, Enum, "
    'unions, dataclasses, TypedDict and Annotated[T, "description"]'
)


@pytest.mark.parametrize(
    ("hint", "message"),
    [
        (set[int], "tool t: parameter value has an unsupported type set[int]" + SUFFIX),
        (
            tuple[int, ...],
            "tool t: parameter value has an unsupported type tuple[int, ...]" + SUFFIX,
        ),
        (bytes, "tool t: parameter value has an unsupported type bytes" + SUFFIX),
        (Any, "tool t: parameter value has an unsupported type Any" + SUFFIX),
        (Plain, "tool t: parameter value has an unsupported type Plain" + SUFFIX),
        (dict[int, str], "tool t: parameter value has an unsupported type dict[int, str]" + SUFFIX),
        (
            list[str | bytes],
            "tool t: parameter value has an unsupported type bytes" + SUFFIX,
        ),
        (
            Node,
            "tool t: parameter value (field child of Node) has a recursive type Node; "
            "function tool schemas are inlined and cannot refer to themselves",
        ),
    ],
    ids=repr,
)
def test_unsupported_types_raise_type_error_at_decoration(hint: object, message: str) -> None:
    def t(value: Any) -> str:
        return ""

    t.__annotations__["value"] = hint
    with pytest.raises(TypeError) as raised:
        function_tool(effect=ToolEffect.READ)(t)
    assert str(raised.value) == message


def test_an_unsupported_dataclass_field_names_the_field() -> None:
    def pack(box: Box) -> str:
        return ""

    with pytest.raises(
        TypeError,
        match=r"^tool pack: parameter box \(field items of Box\) has an unsupported type set\[str\];",
    ):
        function_tool(effect=ToolEffect.READ)(pack)


def test_signature_errors_at_decoration() -> None:
    def untyped(value) -> str:  # type: ignore[no-untyped-def]
        return ""

    def star(*values: int) -> str:
        return ""

    def keywords(**values: int) -> str:
        return ""

    with pytest.raises(TypeError, match=r"^tool untyped: parameter value has no type hint$"):
        function_tool(effect=ToolEffect.READ)(untyped)
    with pytest.raises(TypeError, match=r"^tool star: parameter \*values is not supported$"):
        function_tool(effect=ToolEffect.READ)(star)
    with pytest.raises(TypeError, match=r"^tool keywords: parameter \*\*values is not supported$"):
        function_tool(effect=ToolEffect.READ)(keywords)
    with pytest.raises(ValueError, match="must be 1 to 64 letters"):
        function_tool(effect=ToolEffect.READ, name="has space")(star)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"parameters_schema": {"type": "object", "properties": {"x": {"enum": {1, 2}}}}},
            "tool cancel: parameters_schema is not JSON: Object of type set is not JSON "
            "serializable",
        ),
        (
            {"parameters_schema": {"type": "object", "maximum": float("inf")}},
            "tool cancel: parameters_schema is not JSON: Out of range float values are not "
            "JSON compliant",
        ),
        ({"description": 5}, "description must be a string or None, not int"),
    ],
)
def test_a_schema_or_description_the_model_cannot_be_sent_is_refused_at_decoration(
    fields: dict[str, Any], message: str
) -> None:
    # Each was taken, and every turn of the agent then failed in the model call with an
    # error naming no tool ("object of type 'int' has no len()").
    def cancel(x: int = 0) -> str:
        return ""

    with pytest.raises(TypeError) as raised:
        function_tool(effect=ToolEffect.READ, **fields)(cancel)
    assert str(raised.value) == message


def test_a_generator_function_is_refused_at_decoration() -> None:
    def lines(count: int) -> Iterator[str]:
        yield from ("line",) * count

    async def chunks(count: int) -> AsyncIterator[str]:
        for _ in range(count):
            yield "chunk"

    for function in (lines, chunks):
        with pytest.raises(
            TypeError,
            match=rf"^tool {function.__name__}: a generator function cannot be a tool; ",
        ):
            function_tool(effect=ToolEffect.READ)(function)


@function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE)
async def refund_order(
    order_id: Annotated[str, "The order to refund."],
    amount_cents: int,
    context: ToolCallContext,
    reason: str | None = None,
    color: Color = Color.RED,
) -> str:
    """Refund part of an order."""
    return f"{order_id} {amount_cents} {reason} {color!r} {context.idempotency_key}"


def test_a_decorated_function_becomes_a_function_tool() -> None:
    assert isinstance(refund_order, FunctionTool)
    assert refund_order.name == "refund_order"
    assert refund_order.description == "Refund part of an order."
    assert refund_order.parameters_schema == {
        "type": "object",
        "properties": {
            "order_id": {"type": "string", "description": "The order to refund."},
            "amount_cents": {"type": "integer"},
            "reason": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "color": {"type": "string", "enum": ["red", "green"]},
        },
        "required": ["order_id", "amount_cents"],
        "additionalProperties": False,
    }
    assert refund_order.effect is ToolEffect.NON_IDEMPOTENT_WRITE
    assert refund_order.policy() == ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, None)
    assert refund_order.definition() == ModelToolDefinition(
        name="refund_order",
        description="Refund part of an order.",
        parameters_schema=refund_order.parameters_schema,
    )


def test_every_model_call_is_offered_one_definition_whose_schema_the_tool_does_not_share() -> None:
    # Made once per tool, not deep-copied for every model call; a copy all the same, so
    # the schema the tool checks arguments against is not the one handed to model clients.
    definition = refund_order.definition()

    assert refund_order.definition() is definition
    assert definition.parameters_schema == refund_order.parameters_schema
    assert definition.parameters_schema is not refund_order.parameters_schema
    assert (
        definition.parameters_schema["properties"]
        is not refund_order.parameters_schema["properties"]
    )


def test_name_description_schema_and_approval_overrides() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}

    @function_tool(
        effect="read",
        requires_approval=True,
        name="search-v2",
        description="Search tickets.",
        parameters_schema=schema,
    )
    def search(q: str) -> str:
        """Ignored docstring."""
        return q

    assert (search.name, search.description) == ("search-v2", "Search tickets.")
    assert search.parameters_schema == schema
    assert search.policy() == ToolPolicy(ToolEffect.READ, True)


def test_no_docstring_gives_an_empty_description() -> None:
    @function_tool(effect=ToolEffect.READ)
    def ping() -> str:
        return "pong"

    assert ping.description == ""
    assert ping.parameters_schema == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


async def test_the_context_parameter_receives_the_context() -> None:
    result = await refund_order.invoke(
        '{"order_id": "o-1", "amount_cents": 250, "color": "green"}', make_context()
    )
    assert result == ToolExecutionResult("o-1 250 None <Color.GREEN: 'green'> flow-1/turn-1/call-1")


async def test_an_optional_context_parameter_receives_the_context() -> None:
    @function_tool(effect=ToolEffect.READ)
    def where(city: str, context: ToolCallContext | None = None) -> str:
        return f"{city} {context.tool_call_id if context else None}"

    assert where.parameters_schema["properties"] == {"city": {"type": "string"}}
    assert await where.invoke('{"city": "Oslo"}', make_context()) == (
        ToolExecutionResult("Oslo call-1")
    )


def test_a_hand_built_context_is_unclassified_without_a_store() -> None:
    context = make_context()
    assert context.effect is ToolEffect.UNCLASSIFIED
    assert context.media_store is None
    assert context.input_answers == ()


@pytest.mark.parametrize(
    "text", ["not json", "", '{"order_id": ', "NaN", '{"amount_cents": Infinity}']
)
async def test_arguments_that_are_not_json(text: str) -> None:
    with pytest.raises(ToolExecutionError) as raised:
        await refund_order.invoke(text, make_context())
    assert str(raised.value) == "invalid arguments for refund_order: arguments are not valid JSON"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"order_id": "o", "amount_cents": 1e400}', "number 1e400 is out of range"),
        ('{"order_id": "o", "amount_cents": -1.5E+999}', "number -1.5E+999 is out of range"),
        ('{"order_id": ' + "[" * 100_000 + "]" * 100_000 + "}", "arguments are nested too deeply"),
    ],
)
async def test_arguments_out_of_range_or_too_deep(text: str, reason: str) -> None:
    with pytest.raises(ToolExecutionError) as raised:
        await refund_order.invoke(text, make_context())
    assert str(raised.value) == f"invalid arguments for refund_order: {reason}"


async def test_a_whole_number_past_float_range_for_a_float_is_invalid() -> None:
    @function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE)
    def weigh(weights: list[float]) -> str:
        return str(sum(weights))

    with pytest.raises(ToolExecutionError) as raised:
        await weigh.invoke('{"weights": [1' + "0" * 400 + "]}", make_context())
    assert str(raised.value) == (
        "invalid arguments for weigh: weights: int too large to convert to float"
    )


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ("[]", "arguments: expected object, got array"),
        ('{"amount_cents": 1}', "arguments: missing required property order_id"),
        ('{"order_id": 7, "amount_cents": 1}', "order_id: expected string, got integer"),
        ('{"order_id": "o", "amount_cents": true}', "amount_cents: expected integer, got boolean"),
        ('{"order_id": "o", "amount_cents": 1.5}', "amount_cents: expected integer, got number"),
        (
            '{"order_id": "o", "amount_cents": 12345678901234567890.0}',
            "amount_cents: expected integer, got number",
        ),
        ('{"order_id": "o", "amount_cents": 1, "x": 1}', "arguments: unexpected property x"),
        (
            '{"order_id": "o", "amount_cents": 1, "color": "blue"}',
            'color: "blue" is not one of "red", "green"',
        ),
        (
            '{"order_id": "o", "amount_cents": 1, "reason": 3}',
            "reason: expected string or null, got integer",
        ),
    ],
)
async def test_arguments_that_break_the_schema(arguments: str, reason: str) -> None:
    with pytest.raises(ToolExecutionError) as raised:
        await refund_order.invoke(arguments, make_context())
    assert str(raised.value) == f"invalid arguments for refund_order: {reason}"


@function_tool(effect=ToolEffect.READ)
def register(customer: Customer, filters: Filters, priorities: list[Priority]) -> dict[str, Any]:
    """Register a customer."""
    assert isinstance(customer, Customer)
    assert isinstance(customer.address, Address)
    assert all(isinstance(priority, Priority) for priority in priorities)
    return {"customer": customer, "filters": filters, "priorities": priorities}


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        (
            '{"customer": {"name": "A"}, "filters": {"status": "open"}, "priorities": []}',
            "customer: missing required property address",
        ),
        (
            '{"customer": {"name": "A", "address": {"city": 1}}, "filters": {"status": "open"}, "priorities": []}',
            "customer.address.city: expected string, got integer",
        ),
        (
            '{"customer": {"name": "A", "address": {"city": "B"}}, "filters": {"status": "x"}, "priorities": []}',
            'filters.status: "x" is not one of "open", "closed"',
        ),
        (
            '{"customer": {"name": "A", "address": {"city": "B"}}, "filters": {"status": "open"}, "priorities": [1, 3]}',
            "priorities[1]: 3 is not one of 1, 2",
        ),
    ],
)
async def test_nested_violations_name_the_path(arguments: str, reason: str) -> None:
    with pytest.raises(ToolExecutionError) as raised:
        await register.invoke(arguments, make_context())
    assert str(raised.value) == f"invalid arguments for register: {reason}"


class ByEmail(TypedDict):
    kind: Literal["email"]
    address: str


class BySms(TypedDict):
    kind: Literal["sms"]
    phone: str


async def test_an_object_that_matches_no_alternative_names_each_alternatives_error() -> None:
    @function_tool(effect=ToolEffect.READ)
    def notify(via: ByEmail | BySms) -> str:
        return str(via)

    with pytest.raises(ToolExecutionError) as raised:
        await notify.invoke('{"via": {"kind": "sms", "phone": 5}}', make_context())
    assert str(raised.value) == (
        "invalid arguments for notify: via: matches no alternative: "
        "via: missing required property address; via.phone: expected string, got integer"
    )


async def test_arguments_become_dataclasses_enums_and_typed_dicts() -> None:
    result = await register.invoke(
        '{"customer": {"name": "Ann", "address": {"city": "Oslo"}, "tags": ["vip"]},'
        ' "filters": {"status": "open", "limit": 2}, "priorities": [2, 1]}',
        make_context(),
    )
    assert result == ToolExecutionResult(
        '{"customer": {"name": "Ann", "address": {"city": "Oslo", "zip_code": ""}, "tags": ["vip"]},'
        ' "filters": {"status": "open", "limit": 2}, "priorities": [2, 1]}'
    )


async def test_null_for_an_optional_argument_means_absent() -> None:
    @function_tool(effect=ToolEffect.READ)
    def page(size: int = 10, cursor: str | None = "start") -> str:
        return f"{size} {cursor}"

    assert await page.invoke('{"size": null, "cursor": null}', make_context()) == (
        ToolExecutionResult("10 None")
    )


async def test_an_absent_positional_only_argument_keeps_its_default() -> None:
    @function_tool(effect=ToolEffect.READ)
    def page(size: int = 10, cursor: str = "start", /, *, order: str = "asc") -> str:
        return f"{size} {cursor} {order}"

    assert await page.invoke('{"cursor": "c2"}', make_context()) == (
        ToolExecutionResult("10 c2 asc")
    )
    assert await page.invoke('{"size": 5}', make_context()) == ToolExecutionResult("5 start asc")


def upgrade_old_shape(arguments: Any) -> Any:
    if isinstance(arguments, dict) and "order" in arguments:
        return {"order_id": arguments["order"], "amount_cents": arguments["cents"]}
    return arguments


async def test_prepare_arguments_converts_an_old_argument_shape() -> None:
    tool = function_tool(effect=ToolEffect.IDEMPOTENT_WRITE, prepare_arguments=upgrade_old_shape)(
        refund_order.function
    )
    result = await tool.invoke('{"order": "o-9", "cents": 5}', make_context())
    assert result == ToolExecutionResult("o-9 5 None <Color.RED: 'red'> flow-1/turn-1/call-1")


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (KeyError("cents"), "'cents'"),
        (ValueError("bad shape"), "bad shape"),
        (ValueError(), "ValueError"),
    ],
)
async def test_prepare_arguments_raising_fails_like_a_schema_violation(
    error: Exception, reason: str
) -> None:
    def prepare(arguments: Any) -> Any:
        raise error

    tool = function_tool(effect=ToolEffect.READ, prepare_arguments=prepare)(refund_order.function)
    with pytest.raises(ToolExecutionError) as raised:
        await tool.invoke("{}", make_context())
    assert str(raised.value) == f"invalid arguments for refund_order: {reason}"


async def test_prepare_arguments_cancelled_error_passes_through() -> None:
    def prepare(arguments: Any) -> Any:
        raise asyncio.CancelledError

    tool = function_tool(effect=ToolEffect.READ, prepare_arguments=prepare)(refund_order.function)
    with pytest.raises(asyncio.CancelledError):
        await tool.invoke("{}", make_context())


async def test_prepare_arguments_returning_an_awaitable_is_refused() -> None:
    async def later(arguments: Any) -> Any:
        return arguments

    def prepare(arguments: Any) -> Awaitable[Any]:
        return later(arguments)

    tool = function_tool(effect=ToolEffect.READ, prepare_arguments=prepare)(refund_order.function)
    with pytest.raises(ToolExecutionError) as raised:
        await tool.invoke("{}", make_context())
    assert str(raised.value) == (
        "invalid arguments for refund_order: "
        "prepare_arguments returned an awaitable; it must be synchronous"
    )
    with pytest.raises(TypeError, match="prepare_arguments must be a synchronous function"):
        function_tool(effect=ToolEffect.READ, prepare_arguments=later)


async def test_a_sync_function_runs_in_a_worker_thread_and_an_async_one_on_the_loop() -> None:
    @function_tool(effect=ToolEffect.READ)
    def sync_ident() -> int:
        return threading.get_ident()

    @function_tool(effect=ToolEffect.READ)
    async def async_ident() -> int:
        return threading.get_ident()

    sync_result = await sync_ident.invoke("{}", make_context())
    async_result = await async_ident.invoke("{}", make_context())
    assert isinstance(sync_result, ToolExecutionResult)
    assert int(sync_result.output) != threading.get_ident()
    assert async_result == ToolExecutionResult(str(threading.get_ident()))


class Shade(enum.Enum):
    DARK = "dark"


@pytest.mark.parametrize(
    ("value", "output"),
    [
        ("plain text", "plain text"),
        ({"b": 1, "a": "ø"}, '{"b": 1, "a": "ø"}'),
        ([1, 2.5, None, True], "[1, 2.5, null, true]"),
        (None, "null"),
        (Address(city="Bergen"), '{"city": "Bergen", "zip_code": ""}'),
        ({"shade": Shade.DARK}, '{"shade": "dark"}'),
        ({"output": "x", "images": []}, '{"output": "x", "images": []}'),
        (FunctionToolResult("only text"), "only text"),
    ],
    ids=repr,
)
async def test_results(value: object, output: str) -> None:
    @function_tool(effect=ToolEffect.READ)
    def produce() -> object:
        return value

    assert await produce.invoke("{}", make_context()) == ToolExecutionResult(output)


async def test_a_result_that_is_not_json_serializable() -> None:
    @function_tool(effect=ToolEffect.READ)
    def produce() -> object:
        return {1, 2}

    with pytest.raises(
        TypeError, match=r"^tool produce returned a result that is not JSON serializable"
    ):
        await produce.invoke("{}", make_context())


async def test_a_question_passes_through() -> None:
    question = ToolInputRequested("Which account?", choices=("a", "b"))

    @function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE)
    def ask(context: ToolCallContext) -> object:
        return f"answered {context.input_answers[0]}" if context.input_answers else question

    assert await ask.invoke("{}", make_context()) is question
    assert await ask.invoke("{}", make_context(input_answers=("a",))) == ToolExecutionResult(
        "answered a"
    )


@function_tool(effect=ToolEffect.READ)
async def screenshots(count: int, context: ToolCallContext) -> str | FunctionToolResult:
    """Take screenshots."""
    if context.media_store is None:
        references = [
            AgentImageReference(
                uri=f"memory://media/sha256/{'a' * 64}",
                mime_type="image/png",
                sha256="a" * 64,
                size_bytes=1,
            )
        ] * count
    else:
        references = [await context.media_store.put_image(png())] * count
    return FunctionToolResult(output="Took screenshots.", images=references)


async def test_images_from_a_function_tool() -> None:
    store = InMemoryMediaStore()
    reference = await store.put_image(png())
    result = await screenshots.invoke('{"count": 2}', make_context(media_store=store))
    assert result == ToolExecutionResult("Took screenshots.", (reference, reference))


async def test_images_without_a_media_store_raise_tool_execution_error() -> None:
    with pytest.raises(ToolExecutionError) as raised:
        await screenshots.invoke('{"count": 1}', make_context())
    assert str(raised.value) == (
        "tool screenshots returned 1 images, but the runner has no media store to show them "
        "to the model"
    )


async def test_too_many_or_invalid_images_raise_image_validation_error() -> None:
    store = InMemoryMediaStore()
    with pytest.raises(ImageValidationError, match=r"^21 images; .*MAX_IMAGES_PER_MESSAGE \(20\)"):
        await screenshots.invoke(
            f'{{"count": {MAX_IMAGES_PER_MESSAGE + 1}}}', make_context(media_store=store)
        )

    @function_tool(effect=ToolEffect.READ)
    def broken() -> FunctionToolResult:
        bad = AgentImageReference(
            uri="memory://media/x", mime_type="image/png", sha256="b" * 64, size_bytes=3
        )
        return FunctionToolResult("text", [bad])

    with pytest.raises(
        ImageValidationError, match=r"^image 1: image uri .* does not end in /sha256/"
    ):
        await broken.invoke("{}", make_context(media_store=store))


@pytest.mark.parametrize("effect", list(ToolEffect))
async def test_errors_of_the_function_are_not_wrapped(effect: ToolEffect) -> None:
    class Boom(RuntimeError):
        pass

    @function_tool(effect=effect)
    def fail(kind: str) -> str:
        if kind == "model":
            raise ToolExecutionError("the model should see this")
        raise Boom("boom")

    context = make_context(effect=effect)
    with pytest.raises(ToolExecutionError, match=r"^the model should see this$"):
        await fail.invoke('{"kind": "model"}', context)
    with pytest.raises(Boom, match=r"^boom$"):
        await fail.invoke('{"kind": "other"}', context)


@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "name": st.text(max_size=5),
                "address": st.fixed_dictionaries({"city": st.text(max_size=5)}),
            }
        ),
        max_size=4,
    )
)
@settings(max_examples=60, deadline=None)
def test_valid_values_convert_and_round_trip(values: list[dict[str, Any]]) -> None:
    hint = list[Customer]
    validate_json_value(values, json_schema_for_type(hint))
    converted = convert_json_value(values, hint)
    assert all(isinstance(customer, Customer) for customer in converted)
    assert [
        {"name": customer.name, "address": {"city": customer.address.city}}
        for customer in converted
    ] == values


async def test_a_hand_written_schema_is_checked_and_its_other_keywords_ignored() -> None:
    schema = {
        "type": "object",
        "properties": {"q": {"type": "string", "minLength": 3}, "limit": {"type": "integer"}},
        "required": ["q"],
    }

    @function_tool(effect=ToolEffect.READ, parameters_schema=schema)
    def search(q: str, limit: int = 5) -> str:
        return f"{q} {limit}"

    assert await search.invoke('{"q": "a"}', make_context()) == ToolExecutionResult("a 5")
    with pytest.raises(ToolExecutionError) as raised:
        await search.invoke('{"q": "a", "page": 2}', make_context())
    assert str(raised.value) == "invalid arguments for search: arguments: unexpected property page"
    with pytest.raises(ToolExecutionError) as raised:
        await search.invoke('{"limit": 2}', make_context())
    assert (
        str(raised.value) == "invalid arguments for search: arguments: missing required property q"
    )


def test_the_context_of_a_tool_step_call() -> None:
    writer = FakeEventWriter()
    store = InMemoryMediaStore()
    record = AgentToolCall(
        tool_call_id="call-7",
        tool_name="refund_order",
        arguments="{}",
        turn_id="turn-3",
        effect=ToolEffect.IDEMPOTENT_WRITE,
        requires_approval=False,
        status=ToolCallStatus.APPROVED,
        deferral_order=0,
    )

    async def save(text: str) -> None:
        return None

    call = DeferredToolExecution(
        flow_id="flow-2",
        tool_call=record,
        idempotency_key="flow-2/turn-3/call-7",
        attempt=2,
        events=writer,
        heartbeat=no_heartbeat,
        save_heartbeat_checkpoint=save,
        input_answers=("yes",),
    )
    assert ToolCallContext.for_call(call, store) == ToolCallContext(
        idempotency_key="flow-2/turn-3/call-7",
        attempt=2,
        flow_id="flow-2",
        turn_id="turn-3",
        tool_call_id="call-7",
        events=writer,
        heartbeat=no_heartbeat,
        input_answers=("yes",),
        effect=ToolEffect.IDEMPOTENT_WRITE,
        media_store=store,
    )


async def test_an_image_of_another_store_raises_image_validation_error() -> None:
    elsewhere = InMemoryMediaStore("memory://elsewhere")
    reference = await elsewhere.put_image(png())

    @function_tool(effect=ToolEffect.READ)
    def foreign() -> FunctionToolResult:
        return FunctionToolResult("text", [reference])

    store = InMemoryMediaStore()
    with pytest.raises(ImageValidationError) as raised:
        await foreign.invoke("{}", make_context(media_store=store))
    assert str(raised.value) == (
        f"image 1: tool foreign returned image uri {reference.uri!r}, which is not in the "
        f"runner's media store; its images are {image_uri(store.store_uri, reference.sha256)!r}"
    )
