"""The Dex MCP conventions: keys, result outcomes and texts, task polling and input requests."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.domain.interrupts import QuestionAnswer, QuestionResolution
from dex_agents.domain.mcp_conventions import (
    IDEMPOTENCY_KEY_META_KEY,
    MCP_RESULT_WITHOUT_TEXT,
    TOOL_APPROVAL_META_KEY,
    TOOL_EFFECT_META_KEY,
    TOOL_OUTCOME_META_KEY,
    McpCallOutcome,
    McpCallOutcomeKind,
    McpInputFieldType,
    McpInputQuestion,
    classify_mcp_error_response,
    classify_mcp_tool_result,
    map_mcp_input_request,
    mcp_content_text,
    mcp_error_text,
    mcp_image_placeholder,
    mcp_input_request_fingerprint,
    mcp_input_response,
    mcp_unanswerable_input_text,
    next_mcp_task_poll_interval,
)

SUCCEEDED = McpCallOutcomeKind.SUCCEEDED
FAILED = McpCallOutcomeKind.FAILED
UNKNOWN = McpCallOutcomeKind.OUTCOME_UNKNOWN
INTERRUPTED = McpCallOutcomeKind.INTERRUPTED
IMAGE = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}


def test_meta_keys() -> None:
    assert TOOL_EFFECT_META_KEY == "io.superdurable.dex/effect"
    assert TOOL_APPROVAL_META_KEY == "io.superdurable.dex/approval"
    assert TOOL_OUTCOME_META_KEY == "io.superdurable.dex/outcome"
    assert IDEMPOTENCY_KEY_META_KEY == "io.superdurable.dex/idempotencyKey"


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


@pytest.mark.parametrize(
    ("content", "uploaded", "text"),
    [
        ([_text("one"), _text("two")], False, "one\ntwo"),
        ([_text("é")], False, "é"),
        (
            [_text("see"), {"type": "resource_link", "uri": "file:///a", "name": "ä"}],
            False,
            'see\n{"name":"ä","type":"resource_link","uri":"file:///a"}',
        ),
        ([_text("a"), IMAGE, _text("b"), IMAGE], True, "a\n[image 1]\nb\n[image 2]"),
        ([IMAGE, _text("b"), IMAGE], False, "[image 1 omitted]\nb\n[image 2 omitted]"),
        ([{"type": "text", "text": 5}], False, '{"text":5,"type":"text"}'),
        ([], False, MCP_RESULT_WITHOUT_TEXT),
        (None, False, MCP_RESULT_WITHOUT_TEXT),
        ([_text("")], False, MCP_RESULT_WITHOUT_TEXT),
    ],
    ids=[
        "text blocks joined with newlines",
        "non-ASCII kept",
        "other content as compact JSON with sorted keys",
        "uploaded images counted from 1",
        "omitted images counted from 1",
        "a text block without string text is other content",
        "no content",
        "content missing",
        "only empty text",
    ],
)
def test_content_text(content: Any, uploaded: bool, text: str) -> None:
    assert mcp_content_text(content, images_uploaded=uploaded) == text


def test_image_placeholders_and_fixed_text() -> None:
    assert mcp_image_placeholder(3, omitted=False) == "[image 3]"
    assert mcp_image_placeholder(1, omitted=True) == "[image 1 omitted]"
    assert MCP_RESULT_WITHOUT_TEXT == "The MCP tool returned no text."


def _result(*content: Any, is_error: Any = None, outcome: Any = "absent") -> dict[str, Any]:
    result: dict[str, Any] = {"content": list(content)}
    if is_error is not None:
        result["isError"] = is_error
    if outcome != "absent":
        result["_meta"] = {TOOL_OUTCOME_META_KEY: outcome, "other": 1}
    return result


@pytest.mark.parametrize(
    ("result", "kind", "text"),
    [
        (_result(_text("ok")), SUCCEEDED, "ok"),
        (_result(_text("ok"), is_error=False), SUCCEEDED, "ok"),
        (_result(_text("bad input"), is_error=True), FAILED, "bad input"),
        (_result(_text("timed out"), is_error=True, outcome="unknown"), UNKNOWN, "timed out"),
        (_result(_text("timed out"), is_error=False, outcome="unknown"), UNKNOWN, "timed out"),
        (_result(_text("declined"), is_error=True, outcome="rejected"), FAILED, "declined"),
        (_result(_text("declined"), outcome="rejected"), FAILED, "declined"),
        (_result(is_error=True, outcome="unknown"), UNKNOWN, MCP_RESULT_WITHOUT_TEXT),
        (_result(_text("x"), is_error="yes"), SUCCEEDED, "x"),
    ],
    ids=[
        "a result succeeds",
        "isError false succeeds",
        "isError fails",
        "outcome unknown",
        "outcome unknown wins over isError false",
        "outcome rejected",
        "outcome rejected without isError",
        "a result without text gets the fixed text",
        "isError that is not true is ignored",
    ],
)
def test_tool_result_outcomes(result: dict[str, Any], kind: McpCallOutcomeKind, text: str) -> None:
    assert classify_mcp_tool_result(result) == McpCallOutcome(kind=kind, text=text)


@pytest.mark.parametrize(
    ("is_error", "kind"), [(True, FAILED), (None, SUCCEEDED)], ids=["isError", "success"]
)
@pytest.mark.parametrize("value", ["succeeded", "", None, 1], ids=repr)
def test_reserved_outcome_values_are_ignored_with_a_warning(
    value: Any, is_error: bool | None, kind: McpCallOutcomeKind
) -> None:
    outcome = classify_mcp_tool_result(_result(_text("t"), is_error=is_error, outcome=value))
    assert outcome.kind is kind
    assert outcome.text == "t"
    assert len(outcome.warnings) == 1
    assert TOOL_OUTCOME_META_KEY in outcome.warnings[0]


@pytest.mark.parametrize(
    ("result", "uploads", "text"),
    [
        (_result(_text("a"), IMAGE), True, "a\n[image 1]"),
        (_result(_text("a"), IMAGE), False, "a\n[image 1 omitted]"),
        (_result(_text("a"), IMAGE, is_error=True), True, "a\n[image 1 omitted]"),
        (_result(IMAGE, is_error=True, outcome="rejected"), True, "[image 1 omitted]"),
        (_result(IMAGE, outcome="unknown"), True, "[image 1 omitted]"),
    ],
    ids=[
        "a success with a store",
        "a success without a store",
        "isError with a store",
        "rejected with a store",
        "unknown with a store",
    ],
)
def test_only_a_stored_success_shows_uploaded_images(
    result: dict[str, Any], uploads: bool, text: str
) -> None:
    assert classify_mcp_tool_result(result, uploads_images=uploads).text == text


@pytest.mark.parametrize(
    ("error", "kind", "text"),
    [
        ({"code": -32602, "message": "Invalid params"}, FAILED, "MCP error -32602: Invalid params"),
        ({"code": -32603, "message": "boom"}, INTERRUPTED, "MCP error -32603: boom"),
        ({"code": -32700, "message": "Parse error"}, INTERRUPTED, "MCP error -32700: Parse error"),
        (
            {
                "code": -32603,
                "message": "boom",
                "data": {"_meta": {TOOL_OUTCOME_META_KEY: "unknown"}},
            },
            UNKNOWN,
            "MCP error -32603: boom",
        ),
        (
            {
                "code": -32603,
                "message": "no",
                "data": {"_meta": {TOOL_OUTCOME_META_KEY: "rejected"}},
            },
            FAILED,
            "MCP error -32603: no",
        ),
        (
            {"code": 1, "message": "lost", "data": {"_meta": {TOOL_OUTCOME_META_KEY: "unknown"}}},
            UNKNOWN,
            "MCP error 1: lost",
        ),
        ({"code": -32603, "message": "x", "data": "text"}, INTERRUPTED, "MCP error -32603: x"),
        ({"code": "E1", "message": None}, FAILED, 'MCP error "E1": null'),
    ],
    ids=[
        "another code fails",
        "internal error is interrupted",
        "parse error is interrupted",
        "the key wins over -32603: unknown",
        "the key wins over -32603: rejected",
        "the key wins over another code",
        "data without _meta",
        "odd code and message shown as JSON",
    ],
)
def test_error_response_outcomes(
    error: dict[str, Any], kind: McpCallOutcomeKind, text: str
) -> None:
    assert classify_mcp_error_response(error) == McpCallOutcome(kind=kind, text=text)


def test_a_reserved_value_in_an_error_falls_back_to_the_code() -> None:
    outcome = classify_mcp_error_response(
        {"code": -32603, "message": "m", "data": {"_meta": {TOOL_OUTCOME_META_KEY: "later"}}}
    )
    assert outcome.kind is INTERRUPTED
    assert len(outcome.warnings) == 1


def test_error_text() -> None:
    assert mcp_error_text(-32000, "Tool failed") == "MCP error -32000: Tool failed"


@pytest.mark.parametrize(
    ("previous", "poll_interval_ms", "interval"),
    [
        (None, None, 1),
        (None, 5000, 5),
        (None, 4001, 5),
        (None, 1, 1),
        (None, 0, 1),
        (1, None, 2),
        (2, None, 4),
        (32, None, 60),
        (60, None, 60),
        (4, 5000, 8),
        (4, 9000, 9),
        (60, 1000, 60),
        (60, 300_000, 300),
        (300, 1000, 60),
        (None, 2.5, 1),
        (None, 1500.5, 2),
        (1, -5, 2),
        (1, float("nan"), 2),
        (1, True, 2),
        (1, "5000", 2),
        (None, 10**12, 86400),
    ],
)
def test_next_task_poll_interval(
    previous: int | None, poll_interval_ms: Any, interval: int
) -> None:
    assert next_mcp_task_poll_interval(previous, poll_interval_ms) == interval


@pytest.mark.parametrize("previous", [0, -1, True, 1.5])
def test_a_bad_previous_interval_is_refused(previous: Any) -> None:
    with pytest.raises(ValueError, match="previous_seconds"):
        next_mcp_task_poll_interval(previous, None)


@settings(max_examples=100, deadline=None)
@given(
    previous=st.none() | st.integers(min_value=1, max_value=86400),
    ms=st.none() | st.integers(min_value=0, max_value=10**9),
)
def test_the_interval_never_shrinks_below_the_backoff_nor_the_server(
    previous: int | None, ms: int | None
) -> None:
    interval = next_mcp_task_poll_interval(previous, ms)
    assert 1 <= interval <= 86400
    if previous is not None:
        assert interval >= min(2 * previous, 60)
    if ms is not None:
        assert interval >= min(-(-ms // 1000), 86400)


def _elicit(schema: Any, message: Any = "Which account?", **params: Any) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {"message": message, "requestedSchema": schema, **params},
    }


def _schema(**field: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"account": field}, "required": ["account"]}


@pytest.mark.parametrize(
    ("request_", "choices", "free_text", "field_type"),
    [
        (_elicit(_schema(type="string")), (), True, McpInputFieldType.STRING),
        (
            _elicit(_schema(type="string", enum=["checking", "savings"])),
            ("checking", "savings"),
            False,
            McpInputFieldType.STRING,
        ),
        (_elicit(_schema(type="boolean")), ("yes", "no"), False, McpInputFieldType.BOOLEAN),
        (_elicit(_schema(type="string"), mode="form"), (), True, McpInputFieldType.STRING),
    ],
    ids=["free string", "string enum", "boolean", "explicit form mode"],
)
def test_one_simple_form_elicitation_becomes_a_question(
    request_: dict[str, Any],
    choices: tuple[str, ...],
    free_text: bool,
    field_type: McpInputFieldType,
) -> None:
    question = map_mcp_input_request({"req-1": request_})
    assert question == McpInputQuestion(
        request_key="req-1",
        fingerprint=mcp_input_request_fingerprint(request_),
        question="Which account?",
        choices=choices,
        allows_free_text=free_text,
        field_name="account",
        field_type=field_type,
    )


@pytest.mark.parametrize(
    "requests",
    [
        {},
        {"a": _elicit(_schema(type="string")), "b": _elicit(_schema(type="string"))},
        {"a": _elicit(_schema(type="number"))},
        {"a": _elicit(_schema(type="string", enum=[]))},
        {"a": _elicit(_schema(type="string", enum=["x", 1]))},
        {"a": _elicit({"type": "object", "properties": {}})},
        {
            "a": _elicit(
                {"type": "object", "properties": {"x": {"type": "string"}, "y": {"type": "string"}}}
            )
        },
        {"a": _elicit(_schema(type="string"), mode="url", url="https://example.com")},
        {"a": _elicit(_schema(type="string"), message=None)},
        {"a": _elicit(_schema(type="string"), message=" \n")},
        {"a": _elicit(_schema(type="string", enum=["checking", " "]))},
        {"a": {"method": "sampling/createMessage", "params": {}}},
        {"a": {"method": "roots/list"}},
        {"a": "not a request"},
    ],
    ids=[
        "no request",
        "two requests",
        "a number field",
        "an empty enum",
        "a non-string enum value",
        "no field",
        "two fields",
        "url mode",
        "no message",
        # A blank question failed the poll with a ValueError from the ToolInputRequested
        # check, so the task was never cancelled; a blank choice can never be answered.
        "a blank message",
        "a blank enum value",
        "sampling",
        "roots",
        "not an object",
    ],
)
def test_anything_else_is_not_mappable(requests: dict[str, Any]) -> None:
    assert map_mcp_input_request(requests) is None


def test_the_fingerprint_is_the_sha256_of_the_canonical_json() -> None:
    request = {"params": {"b": "é", "a": 1}, "method": "elicitation/create"}
    expected = hashlib.sha256(
        '{"method":"elicitation/create","params":{"a":1,"b":"é"}}'.encode()
    ).hexdigest()
    assert mcp_input_request_fingerprint(request) == expected


def _question(field_type: McpInputFieldType) -> McpInputQuestion:
    return McpInputQuestion(
        request_key="k",
        fingerprint="f",
        question="q",
        field_name="account",
        field_type=field_type,
    )


@pytest.mark.parametrize(
    ("field_type", "answer", "response"),
    [
        (
            McpInputFieldType.STRING,
            QuestionAnswer(resolution=QuestionResolution.ANSWERED, answer="savings"),
            {"action": "accept", "content": {"account": "savings"}},
        ),
        (
            McpInputFieldType.BOOLEAN,
            QuestionAnswer(resolution=QuestionResolution.ANSWERED, answer="yes"),
            {"action": "accept", "content": {"account": True}},
        ),
        (
            McpInputFieldType.BOOLEAN,
            QuestionAnswer(resolution=QuestionResolution.ANSWERED, answer="no"),
            {"action": "accept", "content": {"account": False}},
        ),
        (
            McpInputFieldType.STRING,
            QuestionAnswer(resolution=QuestionResolution.DECLINED),
            {"action": "decline"},
        ),
        (
            McpInputFieldType.BOOLEAN,
            QuestionAnswer(resolution=QuestionResolution.DEADLINE_PASSED),
            {"action": "cancel"},
        ),
    ],
)
def test_input_responses(
    field_type: McpInputFieldType, answer: QuestionAnswer, response: dict[str, Any]
) -> None:
    assert mcp_input_response(_question(field_type), answer) == response


@pytest.mark.parametrize(
    ("field_type", "answer", "message"),
    [
        (McpInputFieldType.BOOLEAN, "maybe", "'yes' or 'no'"),
        (McpInputFieldType.STRING, None, "needs an answer"),
    ],
)
def test_a_bad_answer_is_refused(field_type: McpInputFieldType, answer: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        mcp_input_response(
            _question(field_type),
            QuestionAnswer(resolution=QuestionResolution.ANSWERED, answer=answer),
        )


@pytest.mark.parametrize(
    ("requests", "text"),
    [
        (
            {"r": _elicit(_schema(type="number"))},
            "the MCP server asked for input that this agent session cannot provide yet "
            "(an answer to 'Which account?')",
        ),
        (
            {
                "b": {"method": "sampling/createMessage", "params": {}},
                "a": _elicit(_schema(type="number"), message="Which card?"),
                "c": {"method": "roots/list"},
                "d": {"method": "custom/ask"},
                "e": 7,
                "f": {"method": "elicitation/create", "params": {}},
            },
            "the MCP server asked for input that this agent session cannot provide yet "
            "(an answer to 'Which card?'; a model response; the client's roots; "
            "a response to 'custom/ask'; a request it could not read; an answer to a form)",
        ),
        (
            {},
            "the MCP server asked for input that this agent session cannot provide yet "
            "(no request)",
        ),
    ],
    ids=["one elicitation", "every kind, in key order", "none"],
)
def test_unanswerable_input_text(requests: dict[str, Any], text: str) -> None:
    assert mcp_unanswerable_input_text(requests) == text
