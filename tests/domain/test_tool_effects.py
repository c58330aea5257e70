"""The "Effects and policies" table, default approval, and how a tool's policy is resolved."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.domain.tool_calls import ToolCallStatus
from dex_agents.domain.tool_effects import (
    DEFAULT_TOOL_EFFECT,
    ToolEffect,
    ToolFailureRoute,
    ToolPolicy,
    ToolStepType,
    is_approval_required,
    max_tool_attempts,
    resolve_tool_policy,
    start_mark_may_be_lost,
    tool_effect_rules,
    tool_failure_route,
    tool_failure_status,
    tool_step_for_effect,
)

# effect, step, attempts, failure route, failure status, crash reruns, default approval
EFFECTS_TABLE = [
    (
        ToolEffect.READ,
        "CallTool",
        3,
        "RecordToolFailure",
        "failed",
        True,
        False,
    ),
    (
        ToolEffect.IDEMPOTENT_WRITE,
        "CallTool",
        3,
        "RecordToolFailure",
        "outcome_unknown",
        True,
        False,
    ),
    (
        ToolEffect.NON_IDEMPOTENT_WRITE,
        "CallSingleAttemptTool",
        1,
        "RecordToolOutcomeUnknown",
        "outcome_unknown",
        False,
        True,
    ),
    (
        ToolEffect.UNCLASSIFIED,
        "CallSingleAttemptTool",
        1,
        "RecordToolOutcomeUnknown",
        "outcome_unknown",
        False,
        True,
    ),
]


@pytest.mark.parametrize(
    ("effect", "step", "attempts", "route", "status", "reruns", "approval"), EFFECTS_TABLE
)
def test_each_row_of_the_effects_table(
    effect: ToolEffect,
    step: str,
    attempts: int,
    route: str,
    status: str,
    reruns: bool,
    approval: bool,
) -> None:
    rules = tool_effect_rules(effect)
    assert rules.effect is effect
    assert rules.step == step
    assert rules.max_attempts == attempts
    assert rules.failure_route == route
    assert rules.failure_status == status
    assert rules.reruns_after_crash is reruns
    assert rules.requires_approval_by_default is approval
    assert tool_step_for_effect(effect) is ToolStepType(step)
    assert max_tool_attempts(effect) == attempts
    assert tool_failure_route(effect) is ToolFailureRoute(route)
    assert tool_failure_status(effect) is ToolCallStatus(status)
    assert is_approval_required(ToolPolicy(effect)) is approval


def test_the_table_covers_every_effect() -> None:
    assert {row[0] for row in EFFECTS_TABLE} == set(ToolEffect)


@pytest.mark.parametrize(
    ("member", "wire"),
    [
        (ToolStepType.CALL_TOOL, "CallTool"),
        (ToolStepType.CALL_SINGLE_ATTEMPT_TOOL, "CallSingleAttemptTool"),
        (ToolFailureRoute.RECORD_TOOL_FAILURE, "RecordToolFailure"),
        (ToolFailureRoute.RECORD_TOOL_OUTCOME_UNKNOWN, "RecordToolOutcomeUnknown"),
    ],
)
def test_step_names_are_the_flow_step_names(member: str, wire: str) -> None:
    assert member == wire


def test_effects_given_as_wire_strings_are_accepted() -> None:
    assert tool_step_for_effect("idempotent_write") is ToolStepType.CALL_TOOL
    assert max_tool_attempts("unclassified") == 1


def test_an_unknown_effect_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"unknown tool effect 'write'; expected one of read, "):
        tool_effect_rules("write")


def test_the_default_tool_effect_is_unclassified() -> None:
    assert DEFAULT_TOOL_EFFECT is ToolEffect.UNCLASSIFIED


@settings(max_examples=50, deadline=None)
@given(effect=st.sampled_from(ToolEffect), requires_approval=st.booleans())
def test_an_explicit_requires_approval_wins_over_the_effect(
    effect: ToolEffect, requires_approval: bool
) -> None:
    assert is_approval_required(ToolPolicy(effect, requires_approval)) is requires_approval


POLICIES = {
    "refund": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False),
    "lookup": ToolPolicy(ToolEffect.READ),
}


@pytest.mark.parametrize(
    ("name", "framework_effect", "default_effect", "expected"),
    [
        pytest.param(
            "refund",
            ToolEffect.READ,
            ToolEffect.READ,
            ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False),
            id="an explicit policy wins over framework metadata",
        ),
        pytest.param(
            "lookup", None, DEFAULT_TOOL_EFFECT, ToolPolicy(ToolEffect.READ), id="explicit policy"
        ),
        pytest.param(
            "search",
            ToolEffect.READ,
            DEFAULT_TOOL_EFFECT,
            ToolPolicy(ToolEffect.READ),
            id="framework metadata without a policy",
        ),
        pytest.param(
            "upsert",
            ToolEffect.IDEMPOTENT_WRITE,
            ToolEffect.READ,
            ToolPolicy(ToolEffect.IDEMPOTENT_WRITE),
            id="framework metadata wins over the default effect",
        ),
        pytest.param(
            "anything",
            None,
            DEFAULT_TOOL_EFFECT,
            ToolPolicy(ToolEffect.UNCLASSIFIED),
            id="the default effect is unclassified",
        ),
        pytest.param(
            "anything",
            None,
            ToolEffect.IDEMPOTENT_WRITE,
            ToolPolicy(ToolEffect.IDEMPOTENT_WRITE),
            id="a session default effect",
        ),
    ],
)
def test_resolve_tool_policy(
    name: str,
    framework_effect: ToolEffect | None,
    default_effect: ToolEffect,
    expected: ToolPolicy,
) -> None:
    assert resolve_tool_policy(name, POLICIES, framework_effect, default_effect) == expected


def test_a_resolved_policy_without_an_explicit_one_uses_the_effect_default_approval() -> None:
    assert is_approval_required(resolve_tool_policy("x", {})) is True
    assert is_approval_required(resolve_tool_policy("x", {}, ToolEffect.READ)) is False


def test_a_policy_value_that_is_not_a_tool_policy_is_refused_by_tool_name() -> None:
    policies: dict[str, ToolPolicy] = {"lookup": "read"}  # type: ignore[dict-item]
    with pytest.raises(TypeError, match=r"the tool policy for 'lookup' must be a ToolPolicy"):
        resolve_tool_policy("lookup", policies)


@pytest.mark.parametrize(("value", "shown"), [("no", "str ('no')"), (0, "int (0)"), (1, "int (1)")])
def test_a_requires_approval_that_is_not_a_bool_is_refused_by_name(
    value: object, shown: str
) -> None:
    # Before, "no" was kept and read by truth, so the calls waited for approval.
    expected = f"ToolPolicy: requires_approval must be a bool or None, not {shown}"
    with pytest.raises(TypeError, match=re.escape(expected)):
        ToolPolicy(ToolEffect.READ, requires_approval=value)  # type: ignore[arg-type]


def test_tool_policy_is_positional_and_converts_wire_strings() -> None:
    policy = ToolPolicy("read")
    assert policy == ToolPolicy(ToolEffect.READ, None)
    assert policy.effect is ToolEffect.READ


@pytest.mark.parametrize(
    ("effect", "may_be_lost"),
    [
        (ToolEffect.READ, True),
        (ToolEffect.IDEMPOTENT_WRITE, False),
        (ToolEffect.NON_IDEMPOTENT_WRITE, False),
        (ToolEffect.UNCLASSIFIED, False),
        ("read", True),
    ],
)
def test_only_a_reads_start_mark_may_skip_the_disk(effect: ToolEffect, may_be_lost: bool) -> None:
    assert start_mark_may_be_lost(effect) is may_be_lost
