"""The scripted model client of the built-in loop ("Model clients")."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.app.builtin_loop import scripted_estimates
from dex_agents.app.builtin_loop.scripted_model import (
    DEFAULT_MAX_RECORDED_REQUESTS,
    SCRIPTED_API,
    SCRIPTED_PROVIDER,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
)
from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.model_io import (
    ModelOutputItem,
    ModelRequest,
    ModelToolCall,
    ModelToolDefinition,
    ToolResultItem,
    UserTextItem,
)
from dex_agents.domain.token_estimates import estimate_text_tokens
from dex_agents.domain.usage import AgentUsage
from dex_agents.ports.model_client import (
    ForcedToolChoiceSupport,
    ModelClient,
    model_supports_forced_tool_choice,
)


class RecordingOutput:
    """A fake ``ModelOutputWriter`` that keeps every write in order."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, str]] = []

    def write_text_delta(self, text: str) -> None:
        self.writes.append(("text", text))

    def write_reasoning_delta(self, text: str) -> None:
        self.writes.append(("reasoning", text))


def reply_as_demo_model(request: ModelRequest) -> ScriptedModelReply:
    results = ScriptedModelClient.tool_results(request)
    if results:
        return ScriptedModelReply(text="; ".join(result.output for result in results))
    return ScriptedModelReply(text=f"Demo reply: {ScriptedModelClient.user_texts(request)[-1]}")


def _untyped(value: object) -> Any:
    """``value`` as ``Any``, to pass a wrong type on purpose."""
    return value


def _call_item(call_id: str, name: str = "lookup_order") -> ModelOutputItem:
    return ModelOutputItem(
        item=json.dumps({"id": call_id}),
        provider="openai",
        api="responses",
        tool_calls=(ModelToolCall(tool_call_id=call_id, tool_name=name, arguments="{}"),),
    )


def _request(*texts: str, instructions: str = "You help.") -> ModelRequest:
    return ModelRequest(instructions=instructions, items=tuple(UserTextItem(text=t) for t in texts))


FIRST_RESULT = ToolResultItem(tool_call_id="c1", tool_name="lookup_order", output="shipped")
SECOND_RESULT = ToolResultItem(tool_call_id="c2", tool_name="refund_order", output="refunded")
OLD_RESULT = ToolResultItem(tool_call_id="c0", tool_name="lookup_order", output="old")

TOOL_RESULT_CASES = [
    pytest.param((UserTextItem(text="hi"),), (), id="no-results"),
    pytest.param(
        (UserTextItem(text="hi"), _call_item("c1"), FIRST_RESULT),
        (FIRST_RESULT,),
        id="one-result",
    ),
    pytest.param(
        (UserTextItem(text="hi"), _call_item("c1"), FIRST_RESULT, _call_item("c2"), SECOND_RESULT),
        (FIRST_RESULT, SECOND_RESULT),
        id="results-of-two-iterations",
    ),
    pytest.param(
        (_call_item("c0"), OLD_RESULT, UserTextItem(text="again")),
        (),
        id="results-before-last-user-text",
    ),
    pytest.param(
        (UserTextItem(text="a"), OLD_RESULT, UserTextItem(text="b"), FIRST_RESULT),
        (FIRST_RESULT,),
        id="only-after-last-user-text",
    ),
    pytest.param((FIRST_RESULT, SECOND_RESULT), (FIRST_RESULT, SECOND_RESULT), id="no-user-text"),
]


@pytest.mark.parametrize(("items", "expected"), TOOL_RESULT_CASES)
def test_tool_results_are_those_after_the_last_user_text(
    items: tuple[Any, ...], expected: tuple[ToolResultItem, ...]
) -> None:
    request = ModelRequest(instructions="", items=items)
    assert ScriptedModelClient.tool_results(request) == expected


def test_user_texts_are_in_order() -> None:
    request = ModelRequest(
        instructions="",
        items=(UserTextItem(text="first"), FIRST_RESULT, UserTextItem(text="second")),
    )
    assert ScriptedModelClient.user_texts(request) == ("first", "second")


async def test_the_demo_reply_function_answers_user_text_and_tool_results() -> None:
    model = ScriptedModelClient(reply_as_demo_model)
    output = RecordingOutput()

    first = await model.call_model(_request("Where is order 7?"), output)
    assert first.text == "Demo reply: Where is order 7?"
    assert first.tool_calls == ()

    with_results = ModelRequest(
        instructions="You help.",
        items=(
            UserTextItem(text="Where is order 7?"),
            _call_item("c1"),
            FIRST_RESULT,
            _call_item("c2"),
            SECOND_RESULT,
        ),
    )
    second = await model.call_model(with_results, output)
    assert second.text == "shipped; refunded"
    assert output.writes == [
        ("text", "Demo reply: Where is order 7?"),
        ("text", "shipped; refunded"),
    ]


async def test_reasoning_then_text_stream_in_order_and_become_items() -> None:
    model = ScriptedModelClient(
        lambda request: ScriptedModelReply(text="The answer.", reasoning="Thinking it over.")
    )
    output = RecordingOutput()

    response = await model.call_model(_request("hi"), output)

    assert output.writes == [("reasoning", "Thinking it over."), ("text", "The answer.")]
    reasoning_item, text_item = response.output
    assert reasoning_item == ModelOutputItem(
        item='{"type":"reasoning","text":"Thinking it over."}',
        provider="scripted",
        api="scripted",
        reasoning="Thinking it over.",
    )
    assert text_item == ModelOutputItem(
        item='{"type":"message","role":"assistant","text":"The answer."}',
        provider="scripted",
        api="scripted",
        text="The answer.",
    )
    assert (SCRIPTED_PROVIDER, SCRIPTED_API) == ("scripted", "scripted")


@pytest.mark.parametrize(
    ("reply", "kinds"),
    [
        pytest.param(ScriptedModelReply(), [], id="empty"),
        pytest.param(ScriptedModelReply(text=""), [], id="empty-text"),
        pytest.param(ScriptedModelReply(text="a"), ["message"], id="text"),
        pytest.param(ScriptedModelReply(reasoning="r"), ["reasoning"], id="reasoning"),
        pytest.param(
            ScriptedModelReply(
                text="a",
                reasoning="r",
                tool_calls=[ScriptedToolCall("t", {}), ScriptedToolCall("u", "{}")],
            ),
            ["reasoning", "message", "tool_call", "tool_call"],
            id="all",
        ),
    ],
)
async def test_output_items_come_in_reasoning_text_tool_call_order(
    reply: ScriptedModelReply, kinds: list[str]
) -> None:
    response = await ScriptedModelClient(lambda request: reply).call_model(
        _request("hi"), RecordingOutput()
    )
    assert [json.loads(item.item)["type"] for item in response.output] == kinds


async def test_tool_calls_get_stable_ids_for_the_same_request() -> None:
    def respond(request: ModelRequest) -> ScriptedModelReply:
        return ScriptedModelReply(
            tool_calls=(
                ScriptedToolCall("lookup_order", {"order_id": "7"}),
                ScriptedToolCall("refund_order", '{"order_id": "7", "amount_cents": 5}'),
                ScriptedToolCall("lookup_order", {"order_id": "8"}, call_id="mine"),
            )
        )

    first = await ScriptedModelClient(respond).call_model(_request("hi"), RecordingOutput())
    rerun = await ScriptedModelClient(respond).call_model(_request("hi"), RecordingOutput())
    other = await ScriptedModelClient(respond).call_model(_request("bye"), RecordingOutput())

    assert first == rerun
    ids = [call.tool_call_id for call in first.tool_calls]
    assert len(set(ids)) == 3
    assert ids[0].startswith("call_")
    assert ids[1].startswith("call_")
    assert ids[2] == "mine"
    assert [call.tool_call_id for call in other.tool_calls][:2] != ids[:2]
    assert [(call.tool_name, call.arguments) for call in first.tool_calls] == [
        ("lookup_order", '{"order_id": "7"}'),
        ("refund_order", '{"order_id": "7", "amount_cents": 5}'),
        ("lookup_order", '{"order_id": "8"}'),
    ]
    item = first.output[0]
    assert (item.provider, item.api, item.text, item.reasoning) == (
        "scripted",
        "scripted",
        None,
        None,
    )
    assert json.loads(item.item) == {
        "type": "tool_call",
        "call_id": ids[0],
        "name": "lookup_order",
        "arguments": '{"order_id": "7"}',
    }


async def test_calls_of_one_turn_that_compaction_made_alike_get_different_ids() -> None:
    """After a mid-turn summary, two calls of one turn can be as long and end with the same
    ``ContinueTurn`` text; the rounds before that text differ, so the IDs do."""

    def respond(request: ModelRequest) -> ScriptedModelReply:
        return ScriptedModelReply(tool_calls=(ScriptedToolCall("lookup_order", {}),))

    def after(call_id: str, output: str) -> ModelRequest:
        result = ToolResultItem(tool_call_id=call_id, tool_name="lookup_order", output=output)
        items = (UserTextItem(text="summary"), _call_item(call_id), result)
        return ModelRequest(instructions="You help.", items=(*items, UserTextItem(text="go on")))

    client = ScriptedModelClient(respond)
    first = await client.call_model(after("c8", "page 8"), RecordingOutput())
    second = await client.call_model(after("c16", "page 16"), RecordingOutput())
    assert first.tool_calls[0].tool_call_id != second.tool_calls[0].tool_call_id


async def test_async_respond_is_awaited() -> None:
    async def respond(request: ModelRequest) -> ScriptedModelReply:
        return ScriptedModelReply(text=f"async: {request.user_texts[-1]}")

    output = RecordingOutput()
    response = await ScriptedModelClient(respond).call_model(_request("ping"), output)
    assert response.text == "async: ping"
    assert output.writes == [("text", "async: ping")]


@pytest.mark.parametrize(
    ("limit", "calls", "kept"), [(2, 5, ["3", "4"]), (3, 2, ["0", "1"]), (0, 2, [])]
)
async def test_requests_keep_the_latest_max_recorded_requests(
    limit: int, calls: int, kept: list[str]
) -> None:
    model = ScriptedModelClient(reply_as_demo_model, max_recorded_requests=limit)
    for number in range(calls):
        await model.call_model(_request(str(number)), RecordingOutput())
    assert [request.user_texts[-1] for request in model.requests] == kept
    assert model.max_recorded_requests == limit


def test_requests_default_to_the_latest_100() -> None:
    model = ScriptedModelClient(reply_as_demo_model)
    assert DEFAULT_MAX_RECORDED_REQUESTS == 100
    assert model.max_recorded_requests == 100
    assert model.requests == []


@pytest.mark.parametrize(
    "returned",
    [
        pytest.param("text", id="str"),
        pytest.param(None, id="none"),
        pytest.param({"text": "x"}, id="dict"),
    ],
)
async def test_a_respond_function_returning_something_else_raises_type_error(
    returned: object,
) -> None:
    def bad_script(request: ModelRequest) -> Any:
        return returned

    model = ScriptedModelClient(bad_script)
    with pytest.raises(TypeError) as error:
        await model.call_model(_request("hi"), RecordingOutput())
    assert str(error.value) == (
        "scripted model respond function test_a_respond_function_returning_something_else_raises"
        f"_type_error.<locals>.bad_script returned {type(returned).__name__}, "
        "not a ScriptedModelReply"
    )


async def test_usage_is_estimated_without_one_and_kept_when_given() -> None:
    request = _request("hello there", instructions="Be brief.")
    estimated = await ScriptedModelClient(
        lambda r: ScriptedModelReply(text="abcdefg", reasoning="xyz")
    ).call_model(request, RecordingOutput())
    assert estimated.usage == AgentUsage(
        model_calls=1, input_tokens=3 + 4, output_tokens=3 + 1, reasoning_tokens=1
    )
    given = AgentUsage(model_calls=1, input_tokens=10, output_tokens=3)
    reported = await ScriptedModelClient(
        lambda r: ScriptedModelReply(text="abc", usage=given)
    ).call_model(request, RecordingOutput())
    assert reported.usage == given


def test_estimate_input_tokens_counts_every_text_tools_and_images() -> None:
    image = AgentImageReference(uri="mem://a", mime_type="image/png", sha256="a" * 64, size_bytes=1)
    request = ModelRequest(
        instructions="abc",
        items=(
            UserTextItem(text="abcdef", images=(image,)),
            _call_item("c1"),
            ToolResultItem(tool_call_id="c1", tool_name="t", output="abcd", images=(image,)),
        ),
        tools=(ModelToolDefinition(name="t", description="abc", parameters_schema={}),),
    )
    expected = 1 + 2 + estimate_text_tokens(json.dumps({"id": "c1"})) + 2 + 1 + 1 + 1 + 2 * 1600
    assert ScriptedModelClient(reply_as_demo_model).estimate_input_tokens(request) == expected


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(max_size=30), min_size=1, max_size=5), st.text(max_size=30))
def test_estimate_input_tokens_is_deterministic_and_grows_with_text(
    texts: list[str], instructions: str
) -> None:
    model = ScriptedModelClient(reply_as_demo_model)
    request = _request(*texts, instructions=instructions)
    estimate = model.estimate_input_tokens(request)
    assert estimate == model.estimate_input_tokens(_request(*texts, instructions=instructions))
    assert (
        model.estimate_input_tokens(_request(*texts, "more", instructions=instructions)) > estimate
    )


class _CountedSchema(Mapping[str, Any]):
    """A tool schema that counts how often it is read whole."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self._schema = schema
        self.reads = 0

    def __getitem__(self, key: str) -> Any:
        return self._schema[key]

    def __iter__(self) -> Iterator[str]:
        self.reads += 1
        return iter(self._schema)

    def __len__(self) -> int:
        return len(self._schema)


def test_a_tool_definition_offered_in_every_call_is_estimated_once() -> None:
    # Function and listed tools offer one definition object in every model call; its
    # schema was encoded again for each call's estimate.
    plain = {"type": "object", "properties": {"q": {"type": "string"}}}
    schema = _CountedSchema(plain)
    tool = ModelToolDefinition(name="t", description="abc", parameters_schema=schema)
    model = ScriptedModelClient(reply_as_demo_model)

    def estimate(number: int, *tools: ModelToolDefinition) -> int:
        items = (UserTextItem(text=f"turn {number}"),)
        return model.estimate_input_tokens(ModelRequest(instructions="i", items=items, tools=tools))

    fresh = ModelToolDefinition(name="t", description="abc", parameters_schema=dict(plain))
    assert [estimate(number, tool) for number in range(3)] == [
        estimate(number, fresh) for number in range(3)
    ]
    assert schema.reads == 1


def test_sessions_that_began_alike_each_resume_the_walk_of_their_own_requests() -> None:
    # Equal stored items decode to one object: two sessions' requests share their first item.
    first = UserTextItem(text="hi")
    long = (first, *(UserTextItem(text=f"long {number}" * 3) for number in range(1, 41)))
    short = (first, *(UserTextItem(text=f"short {number}") for number in range(1, 11)))
    model = ScriptedModelClient(reply_as_demo_model)

    def estimate(items: tuple[UserTextItem, ...]) -> None:
        tokens = model.estimate_input_tokens(ModelRequest(instructions="", items=items))
        assert tokens == _text_tokens(items)

    for end in range(2, 11):
        estimate(long[: end * 4])
        estimate(short[:end])
    for end in range(11, 21):  # the long one's later walks each take the place of its last
        estimate(long[: end * 2])
    walked = scripted_estimates._ITEMS_WALKED
    assert walked.resume(("scripted", id(first)), long) == (40, (_text_tokens(long[:40]), ()))
    assert walked.resume(("scripted", id(first)), short) == (10, (_text_tokens(short[:10]), ()))


def _text_tokens(items: tuple[UserTextItem, ...]) -> int:
    return sum(estimate_text_tokens(item.text) for item in items)


async def test_missing_image_bytes_raise() -> None:
    image = AgentImageReference(uri="mem://a", mime_type="image/png", sha256="b" * 64, size_bytes=1)
    request = ModelRequest(instructions="", items=(UserTextItem(text="see", images=(image,)),))
    model = ScriptedModelClient(reply_as_demo_model)
    with pytest.raises(
        LookupError, match="image bytes missing from the model request: " + "b" * 64
    ):
        await model.call_model(request, RecordingOutput())
    with_bytes = ModelRequest(
        instructions="", items=request.items, image_bytes={"b" * 64: b"\x89PNG"}
    )
    assert (await model.call_model(with_bytes, RecordingOutput())).text == "Demo reply: see"


def test_it_is_a_model_client_that_accepts_a_forced_tool_choice() -> None:
    model = ScriptedModelClient(reply_as_demo_model)
    assert isinstance(model, ModelClient)
    assert isinstance(model, ForcedToolChoiceSupport)
    assert model.supports_forced_tool_choice({"reasoning_effort": "high"}) is True
    assert model_supports_forced_tool_choice(model, {}) is True


@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        pytest.param(
            lambda: ScriptedToolCall("", {}),
            ValueError,
            "scripted tool call name must be a non-empty string, not ''",
            id="empty-name",
        ),
        pytest.param(
            lambda: ScriptedToolCall("t", _untyped([1])),
            TypeError,
            "arguments of scripted tool call 't' must be a dict or JSON text, not list",
            id="list-arguments",
        ),
        pytest.param(
            lambda: ScriptedToolCall("t", {"x": object()}),
            TypeError,
            "arguments of scripted tool call 't' are not JSON-serializable",
            id="unserializable-arguments",
        ),
        pytest.param(
            lambda: ScriptedToolCall("t", {}, call_id=""),
            ValueError,
            "call_id of scripted tool call 't' must be None or a non-empty string, not ''",
            id="empty-call-id",
        ),
        pytest.param(
            lambda: ScriptedModelReply(tool_calls=_untyped([{"name": "t"}])),
            TypeError,
            "tool_calls of a ScriptedModelReply must be ScriptedToolCall values, not dict",
            id="tool-call-not-scripted",
        ),
        pytest.param(
            lambda: ScriptedModelReply(tool_calls=_untyped(ScriptedToolCall("t", {}))),
            TypeError,
            "tool_calls of a ScriptedModelReply must be a list of ScriptedToolCall values, "
            "not ScriptedToolCall",
            id="one-tool-call-not-in-a-list",
        ),
        pytest.param(
            lambda: ScriptedModelReply(tool_calls=_untyped(None)),
            TypeError,
            "tool_calls of a ScriptedModelReply must be a list of ScriptedToolCall values, "
            "not NoneType",
            id="tool-calls-none",
        ),
        pytest.param(
            lambda: ScriptedModelClient(reply_as_demo_model, max_recorded_requests=-1),
            ValueError,
            "max_recorded_requests must be at least 0, not -1",
            id="negative-limit",
        ),
        pytest.param(
            lambda: ScriptedModelClient(_untyped("not callable")),
            TypeError,
            "respond must be callable, not str",
            id="respond-not-callable",
        ),
    ],
)
def test_bad_input_is_refused_with_a_clear_error(
    build: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as raised:
        build()
    assert str(raised.value).startswith(message)


def test_non_json_argument_text_is_kept_as_given() -> None:
    assert ScriptedToolCall("t", "not json").arguments == "not json"
    assert ScriptedToolCall("t", {"a": 1}).arguments == '{"a": 1}'
