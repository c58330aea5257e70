"""Connector tools: snake case names, effects, approval, result size, and branch outcomes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.domain.connector_naming import (
    CONNECTOR_NOT_SENT_RETRY_LATER,
    CONNECTOR_RESULT_TRUNCATED_NOTE,
    DEFAULT_CONNECTOR_RESULT_MAX_BYTES,
    ConnectorBranchOutcome,
    ConnectorOperationKind,
    classify_connector_branch,
    classify_connector_retry,
    connector_branch_text,
    connector_requires_approval,
    connector_snake_case,
    connector_tool_effect,
    connector_tool_name,
    truncate_connector_result,
)
from dex_agents.domain.tool_calls import ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect

QUERY = ConnectorOperationKind.QUERY
MUTATION = ConnectorOperationKind.MUTATION
SUCCEEDED = ToolCallStatus.SUCCEEDED
FAILED = ToolCallStatus.FAILED
UNKNOWN = ToolCallStatus.OUTCOME_UNKNOWN


@pytest.mark.parametrize(
    ("operation", "snake"),
    [
        ("listStoryIDs", "list_story_ids"),
        ("createRefund", "create_refund"),
        ("postThreadReply", "post_thread_reply"),
        ("HTTPServerError", "http_server_error"),
        ("getV2Items", "get_v2_items"),
        ("base64Encode", "base64_encode"),
        ("HTTP2Server", "http2_server"),
        ("getIDsByName", "get_ids_by_name"),
        ("HTTPSServer", "https_server"),
        ("exportCSVsToS3", "export_csvs_to_s3"),
        ("getUser2FA", "get_user2_fa"),
        ("ID", "id"),
        ("URLs", "urls"),
        ("get", "get"),
        ("already_snake", "already_snake"),
        ("double__underscore", "double_underscore"),
    ],
)
def test_snake_case(operation: str, snake: str) -> None:
    assert connector_snake_case(operation) == snake


@pytest.mark.parametrize("operation", ["", "create-refund", "créer", "a b", "_"])
def test_a_bad_operation_name_is_refused(operation: str) -> None:
    with pytest.raises(ValueError, match="operation name"):
        connector_snake_case(operation)


@settings(max_examples=100, deadline=None)
@given(st.from_regex(r"[a-z][A-Za-z0-9]{0,30}", fullmatch=True))
def test_snake_case_is_lowercase_and_idempotent(operation: str) -> None:
    snake = connector_snake_case(operation)
    assert snake == snake.lower()
    assert connector_snake_case(snake) == snake
    assert snake.replace("_", "") == operation.lower()


@pytest.mark.parametrize(
    ("connector_id", "operation", "name"),
    [
        ("stripe", "createRefund", "stripe_create_refund"),
        ("slack", "postThreadReply", "slack_post_thread_reply"),
        ("shortcut", "listStoryIDs", "shortcut_list_story_ids"),
        ("google-drive", "getV2Items", "google-drive_get_v2_items"),
    ],
)
def test_tool_names(connector_id: str, operation: str, name: str) -> None:
    assert connector_tool_name(connector_id, operation) == name


@pytest.mark.parametrize(
    ("connector_id", "operation", "message"),
    [
        ("", "createRefund", "connector ID"),
        ("my stripe", "createRefund", "connector ID"),
        ("stripe", "c" * 58, "longer than 64"),
    ],
)
def test_bad_tool_names_are_refused(connector_id: str, operation: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        connector_tool_name(connector_id, operation)


def test_a_64_character_name_is_kept() -> None:
    assert connector_tool_name("stripe", "c" * 57) == "stripe_" + "c" * 57


@pytest.mark.parametrize(
    ("kind", "retry_safe", "effect"),
    [
        (QUERY, False, ToolEffect.READ),
        (QUERY, True, ToolEffect.READ),
        (MUTATION, True, ToolEffect.IDEMPOTENT_WRITE),
        (MUTATION, False, ToolEffect.NON_IDEMPOTENT_WRITE),
    ],
)
def test_effects(kind: ConnectorOperationKind, retry_safe: bool, effect: ToolEffect) -> None:
    assert connector_tool_effect(kind, retry_safe=retry_safe) is effect


@pytest.mark.parametrize(
    ("recommended", "override", "asks"),
    [
        (True, None, True),
        (False, None, False),
        (False, True, True),
        (True, False, False),
    ],
    ids=["recommended asks", "other runs without approval", "True overrides", "False overrides"],
)
def test_approval(recommended: bool, override: bool | None, asks: bool) -> None:
    assert (
        connector_requires_approval(approval_recommended=recommended, requires_approval=override)
        is asks
    )


def test_truncation_constants() -> None:
    assert DEFAULT_CONNECTOR_RESULT_MAX_BYTES == 65536
    assert CONNECTOR_RESULT_TRUNCATED_NOTE == (
        "\n[Dex] The connector result was cut here because it is longer than the tool's "
        "max_result_bytes."
    )
    assert CONNECTOR_NOT_SENT_RETRY_LATER == (
        "the connector asked to retry and its fence shows the request was not sent, "
        "so it is safe to call the tool again later"
    )


@pytest.mark.parametrize(
    ("text", "max_bytes", "kept", "full"),
    [
        ("hello", 5, "hello", None),
        ("hello!", 5, "hello" + CONNECTOR_RESULT_TRUNCATED_NOTE, 6),
        ("aé", 2, "a" + CONNECTOR_RESULT_TRUNCATED_NOTE, 3),
        ("aé", 3, "aé", None),
        ("€€", 4, "€" + CONNECTOR_RESULT_TRUNCATED_NOTE, 6),
        ("😀", 3, CONNECTOR_RESULT_TRUNCATED_NOTE, 4),
        ("", 1, "", None),
    ],
    ids=[
        "fits exactly",
        "one byte over",
        "cut before a two-byte character",
        "a two-byte character that fits",
        "cut inside a three-byte character",
        "nothing fits",
        "empty",
    ],
)
def test_truncate(text: str, max_bytes: int, kept: str, full: int | None) -> None:
    assert truncate_connector_result(text, max_bytes) == (kept, full)


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=40), max_bytes=st.integers(min_value=1, max_value=60))
def test_a_cut_result_fits_and_is_a_prefix(text: str, max_bytes: int) -> None:
    cut, full = truncate_connector_result(text, max_bytes)
    if full is None:
        assert cut == text
    else:
        assert full == len(text.encode("utf-8")) > max_bytes
        kept = cut.removesuffix(CONNECTOR_RESULT_TRUNCATED_NOTE)
        assert text.startswith(kept)
        assert len(kept.encode("utf-8")) <= max_bytes


@pytest.mark.parametrize("max_bytes", [0, -1, True, 1.5])
def test_a_bad_max_bytes_is_refused(max_bytes: Any) -> None:
    with pytest.raises(ValueError, match="max_result_bytes"):
        truncate_connector_result("x", max_bytes)


def _classify(
    kind: ConnectorOperationKind,
    branch: str,
    listed: dict[str, str] | None = None,
    *,
    may_have_sent: bool = False,
) -> ConnectorBranchOutcome:
    return classify_connector_branch(
        connector="stripe",
        operation="createRefund",
        kind=kind,
        branch=branch,
        required_branches=("ok",),
        listed_branches=listed or {},
        may_have_sent=may_have_sent,
        value={"refund": {"id": "re_1", "amount": 500}, "note": "ü"},
        error_kind="card_error",
        message="declined",
    )


TEXT = "stripe createRefund returned {}: card_error: declined"
OK_JSON = '{"note":"ü","refund":{"amount":500,"id":"re_1"}}'


@pytest.mark.parametrize(
    ("kind", "branch", "listed", "may_have_sent", "status", "output", "error"),
    [
        (QUERY, "uncertain", {"uncertain": "rejected"}, False, UNKNOWN, None, "uncertain"),
        (MUTATION, "uncertain", {}, False, UNKNOWN, None, "uncertain"),
        (MUTATION, "defect", {"defect": "rejected"}, False, UNKNOWN, None, "defect"),
        (QUERY, "ok", {}, False, SUCCEEDED, OK_JSON, None),
        (MUTATION, "ok", {}, True, SUCCEEDED, OK_JSON, None),
        (MUTATION, "declined", {"declined": "rejected"}, True, UNKNOWN, None, "declined"),
        (MUTATION, "declined", {"declined": "rejected"}, False, FAILED, None, "declined"),
        (QUERY, "notFound", {"notFound": "rejected"}, True, FAILED, None, "notFound"),
        (QUERY, "lost", {"lost": "unknown"}, False, UNKNOWN, None, "lost"),
        (MUTATION, "lost", {"lost": "unknown"}, False, UNKNOWN, None, "lost"),
        (MUTATION, "surprise", {}, False, UNKNOWN, None, "surprise"),
        (QUERY, "surprise", {}, False, FAILED, None, "surprise"),
        (QUERY, "defect", {}, False, FAILED, None, "defect"),
        (QUERY, "defect", {"defect": "unknown"}, False, UNKNOWN, None, "defect"),
    ],
    ids=[
        "uncertain whatever the listing says",
        "uncertain of a Mutation",
        "a Mutation's defect whatever the listing says",
        "a required branch succeeds",
        "a required branch succeeds even when it may have been sent",
        "a listed rejection when the fence cannot prove nothing was sent",
        "a listed rejection fails",
        "a Query ignores may_have_sent",
        "a listed unknown of a Query",
        "a listed unknown of a Mutation",
        "an unlisted Mutation branch",
        "an unlisted Query branch",
        "a Query's unlisted defect fails",
        "a Query's defect follows its listing",
    ],
)
def test_branch_table(
    kind: ConnectorOperationKind,
    branch: str,
    listed: dict[str, str],
    may_have_sent: bool,
    status: ToolCallStatus,
    output: str | None,
    error: str | None,
) -> None:
    outcome = _classify(kind, branch, listed, may_have_sent=may_have_sent)
    expected_error = None if error is None else TEXT.format(error)
    assert outcome == ConnectorBranchOutcome(status=status, output=output, error=expected_error)


def test_a_required_defect_is_not_a_success() -> None:
    outcome = classify_connector_branch(
        connector="linear",
        operation="listIssues",
        kind=QUERY,
        branch="defect",
        required_branches=("ok", "defect"),
        listed_branches={},
        error_kind="panic",
        message="nil",
    )
    assert outcome == ConnectorBranchOutcome(
        status=FAILED, error="linear listIssues returned defect: panic: nil"
    )


def test_a_bad_listing_is_refused() -> None:
    with pytest.raises(ValueError, match="'rejected' or 'unknown'"):
        _classify(QUERY, "ok", {"declined": "failed"})


@pytest.mark.parametrize(
    ("kind", "message", "text"),
    [
        ("card_error", "declined", "stripe createRefund returned declined: card_error: declined"),
        (None, "declined", "stripe createRefund returned declined: declined"),
        (None, None, "stripe createRefund returned declined"),
    ],
)
def test_branch_text(kind: str | None, message: str | None, text: str) -> None:
    assert connector_branch_text("stripe", "createRefund", "declined", kind, message) == text


@pytest.mark.parametrize(
    ("effect", "proved", "outcome"),
    [
        (ToolEffect.READ, False, None),
        (ToolEffect.IDEMPOTENT_WRITE, True, None),
        (
            ToolEffect.NON_IDEMPOTENT_WRITE,
            True,
            ConnectorBranchOutcome(status=FAILED, error=CONNECTOR_NOT_SENT_RETRY_LATER),
        ),
    ],
)
def test_retry_outcomes(
    effect: ToolEffect, proved: bool, outcome: ConnectorBranchOutcome | None
) -> None:
    assert classify_connector_retry(effect, fence_proved_not_sent=proved) == outcome


def test_a_single_attempt_write_that_may_have_been_sent_is_unknown() -> None:
    outcome = classify_connector_retry(ToolEffect.NON_IDEMPOTENT_WRITE, fence_proved_not_sent=False)
    assert outcome is not None
    assert outcome.status is UNKNOWN
