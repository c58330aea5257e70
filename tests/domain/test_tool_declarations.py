"""Declared tools: effect ranking, default approval, MCP effect classification, policy merges."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.domain.tool_declarations import (
    EFFECT_RANK,
    McpToolEffectClassification,
    ToolDeclaration,
    classify_mcp_tool_effect,
    effective_mcp_tool_policy,
    merge_connector_tool_policy,
    merge_declared_tool_policy,
    merge_tool_policies,
    more_conservative_effect,
)
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy, default_requires_approval

READ = ToolEffect.READ
IDEMPOTENT = ToolEffect.IDEMPOTENT_WRITE
NON_IDEMPOTENT = ToolEffect.NON_IDEMPOTENT_WRITE
UNCLASSIFIED = ToolEffect.UNCLASSIFIED
EFFECT = "io.superdurable.dex/effect"
APPROVAL = "io.superdurable.dex/approval"


def test_effects_rank_read_idempotent_non_idempotent_unclassified() -> None:
    assert sorted(ToolEffect, key=EFFECT_RANK.__getitem__) == [
        READ,
        IDEMPOTENT,
        NON_IDEMPOTENT,
        UNCLASSIFIED,
    ]


@pytest.mark.parametrize(
    ("first", "second", "merged"),
    [
        (READ, NON_IDEMPOTENT, NON_IDEMPOTENT),
        (NON_IDEMPOTENT, READ, NON_IDEMPOTENT),
        (IDEMPOTENT, READ, IDEMPOTENT),
        (IDEMPOTENT, UNCLASSIFIED, UNCLASSIFIED),
        (UNCLASSIFIED, NON_IDEMPOTENT, UNCLASSIFIED),
        (READ, READ, READ),
    ],
)
def test_more_conservative_effect(
    first: ToolEffect, second: ToolEffect, merged: ToolEffect
) -> None:
    assert more_conservative_effect(first, second) is merged


@settings(max_examples=50, deadline=None)
@given(first=st.sampled_from(ToolEffect), second=st.sampled_from(ToolEffect))
def test_more_conservative_effect_is_symmetric_and_never_lower(
    first: ToolEffect, second: ToolEffect
) -> None:
    merged = more_conservative_effect(first, second)
    assert merged == more_conservative_effect(second, first)
    assert EFFECT_RANK[merged] >= max(EFFECT_RANK[first], EFFECT_RANK[second])


@pytest.mark.parametrize(
    ("effect", "asks"),
    [(READ, False), (IDEMPOTENT, False), (NON_IDEMPOTENT, True), (UNCLASSIFIED, True)],
)
def test_default_approval_of_each_effect(effect: ToolEffect, asks: bool) -> None:
    assert default_requires_approval(effect) is asks


def _tool(annotations: Any = None, meta: Any = None) -> dict[str, Any]:
    tool: dict[str, Any] = {"name": "send_payment", "inputSchema": {"type": "object"}}
    if annotations is not None:
        tool["annotations"] = annotations
    if meta is not None:
        tool["_meta"] = meta
    return tool


@pytest.mark.parametrize(
    ("tool", "effect", "requires_approval"),
    [
        (_tool({"readOnlyHint": True}), READ, False),
        (_tool({"idempotentHint": True}), IDEMPOTENT, False),
        (_tool({"idempotentHint": True, "destructiveHint": True}), IDEMPOTENT, False),
        (_tool({"readOnlyHint": True, "idempotentHint": True}), READ, False),
        (_tool({"readOnlyHint": False, "destructiveHint": False}), UNCLASSIFIED, True),
        (_tool({"readOnlyHint": "true"}), UNCLASSIFIED, True),
        (_tool(), UNCLASSIFIED, True),
        (_tool("not an object"), UNCLASSIFIED, True),
        (_tool({"readOnlyHint": True}, {APPROVAL: "recommended"}), READ, False),
    ],
    ids=[
        "readOnlyHint",
        "idempotentHint",
        "idempotentHint whatever destructiveHint says",
        "readOnlyHint first",
        "other hints",
        "a hint that is not true",
        "no annotations",
        "annotations that are not an object",
        "approval without effect is ignored",
    ],
)
def test_undeclared_tools_follow_their_annotations(
    tool: dict[str, Any], effect: ToolEffect, requires_approval: bool
) -> None:
    classification = classify_mcp_tool_effect(tool)
    assert classification == McpToolEffectClassification(
        effect=effect,
        declared=False,
        approval_recommended=False,
        requires_approval=requires_approval,
    )
    assert classification.declaration is None


def test_anything_else_gets_the_sessions_default_effect() -> None:
    classification = classify_mcp_tool_effect(_tool(), default_tool_effect=IDEMPOTENT)
    assert classification.effect is IDEMPOTENT
    assert classification.requires_approval is False


@pytest.mark.parametrize(
    ("meta", "effect", "asks", "warned"),
    [
        ({EFFECT: "read"}, READ, False, False),
        ({EFFECT: "idempotent_write"}, IDEMPOTENT, False, False),
        ({EFFECT: "non_idempotent_write"}, NON_IDEMPOTENT, False, False),
        ({EFFECT: "read", APPROVAL: "recommended"}, READ, True, False),
        ({EFFECT: "idempotent_write", APPROVAL: None}, IDEMPOTENT, True, True),
        ({EFFECT: "read", APPROVAL: "required"}, READ, True, True),
        ({EFFECT: "read", APPROVAL: False}, READ, True, True),
    ],
    ids=[
        "read",
        "idempotent_write",
        "non_idempotent_write runs without approval",
        "approval recommended",
        "approval null fails closed",
        "unknown approval fails closed",
        "approval false fails closed",
    ],
)
def test_a_declared_effect_wins_over_the_annotations(
    meta: dict[str, Any], effect: ToolEffect, asks: bool, warned: bool
) -> None:
    classification = classify_mcp_tool_effect(_tool({"readOnlyHint": True}, meta))
    assert classification.effect is effect
    assert classification.declared is True
    assert classification.approval_recommended is asks
    assert classification.requires_approval is asks
    assert bool(classification.warnings) is warned
    assert classification.declaration == ToolDeclaration(effect=effect, approval_recommended=asks)


@pytest.mark.parametrize("value", ["unclassified", "write", None, 3])
def test_an_unknown_effect_value_gets_the_default_and_ignores_annotations(value: Any) -> None:
    tool = _tool({"readOnlyHint": True}, {EFFECT: value, APPROVAL: "recommended"})
    classification = classify_mcp_tool_effect(tool, default_tool_effect=NON_IDEMPOTENT)
    assert classification.effect is NON_IDEMPOTENT
    assert classification.declared is False
    assert classification.requires_approval is True
    assert len(classification.warnings) == 1
    assert "send_payment" in classification.warnings[0]
    assert EFFECT in classification.warnings[0]


@pytest.mark.parametrize(
    "tool",
    [
        _tool({"readOnlyHint": True}),
        _tool(None, {EFFECT: "read"}),
        _tool({"idempotentHint": True}, {EFFECT: "idempotent_write", APPROVAL: "recommended"}),
    ],
)
def test_an_untrusted_server_keeps_the_session_default(tool: dict[str, Any]) -> None:
    classification = classify_mcp_tool_effect(tool, trusts_tool_annotations=False)
    assert classification == McpToolEffectClassification(
        effect=UNCLASSIFIED, declared=False, approval_recommended=False, requires_approval=True
    )


@pytest.mark.parametrize(
    ("declared", "recommended", "policy", "merged"),
    [
        (READ, False, None, ToolPolicy(READ, requires_approval=False)),
        (NON_IDEMPOTENT, False, None, ToolPolicy(NON_IDEMPOTENT, requires_approval=False)),
        (IDEMPOTENT, True, None, ToolPolicy(IDEMPOTENT, requires_approval=True)),
        (
            READ,
            False,
            ToolPolicy(NON_IDEMPOTENT),
            ToolPolicy(NON_IDEMPOTENT, requires_approval=True),
        ),
        (
            NON_IDEMPOTENT,
            False,
            ToolPolicy(READ),
            ToolPolicy(NON_IDEMPOTENT, requires_approval=False),
        ),
        (
            NON_IDEMPOTENT,
            True,
            ToolPolicy(READ),
            ToolPolicy(NON_IDEMPOTENT, requires_approval=True),
        ),
        (READ, False, ToolPolicy(UNCLASSIFIED), ToolPolicy(UNCLASSIFIED, requires_approval=True)),
        (
            READ,
            True,
            ToolPolicy(READ, requires_approval=False),
            ToolPolicy(READ, requires_approval=False),
        ),
        (
            IDEMPOTENT,
            False,
            ToolPolicy(READ, requires_approval=True),
            ToolPolicy(IDEMPOTENT, requires_approval=True),
        ),
    ],
    ids=[
        "no policy: declared read",
        "no policy: declared non_idempotent_write runs without approval",
        "no policy: recommended asks",
        "a NON_IDEMPOTENT_WRITE policy raises a read and asks",
        "a READ policy never lowers a non_idempotent_write",
        "recommended still asks under a READ policy",
        "an UNCLASSIFIED policy asks by default",
        "the policy's requires_approval False wins over recommended",
        "the policy's requires_approval True wins",
    ],
)
def test_merge_declared_tool_policy(
    declared: ToolEffect, recommended: bool, policy: ToolPolicy | None, merged: ToolPolicy
) -> None:
    assert merge_declared_tool_policy(declared, recommended, policy) == merged


@settings(max_examples=100, deadline=None)
@given(
    declared=st.sampled_from(ToolEffect),
    recommended=st.booleans(),
    effect=st.sampled_from(ToolEffect),
    requires_approval=st.none() | st.booleans(),
)
def test_a_policy_never_lowers_a_declared_effect(
    declared: ToolEffect, recommended: bool, effect: ToolEffect, requires_approval: bool | None
) -> None:
    merged = merge_declared_tool_policy(
        declared, recommended, ToolPolicy(effect, requires_approval)
    )
    assert EFFECT_RANK[merged.effect] >= EFFECT_RANK[declared]
    assert merged.requires_approval is not None


def test_merge_tool_policies_keeps_declarations_and_passes_other_policies() -> None:
    merged = merge_tool_policies(
        {
            "pay__send": ToolDeclaration(effect=NON_IDEMPOTENT),
            "pay__get": ToolDeclaration(effect=READ, approval_recommended=True),
        },
        {"pay__send": ToolPolicy(READ), "local_tool": ToolPolicy(IDEMPOTENT)},
        base={"files__list": ToolPolicy(READ), "local_tool": ToolPolicy(UNCLASSIFIED)},
    )
    assert merged == {
        "pay__send": ToolPolicy(NON_IDEMPOTENT, requires_approval=False),
        "pay__get": ToolPolicy(READ, requires_approval=True),
        "local_tool": ToolPolicy(IDEMPOTENT),
        "files__list": ToolPolicy(READ),
    }


@pytest.mark.parametrize(
    ("classification", "policy", "effective"),
    [
        (classify_mcp_tool_effect(_tool({"readOnlyHint": True})), None, ToolPolicy(READ, False)),
        (classify_mcp_tool_effect(_tool()), None, ToolPolicy(UNCLASSIFIED, True)),
        (
            classify_mcp_tool_effect(_tool({"readOnlyHint": True})),
            ToolPolicy(NON_IDEMPOTENT),
            ToolPolicy(NON_IDEMPOTENT, True),
        ),
        (classify_mcp_tool_effect(_tool()), ToolPolicy(READ), ToolPolicy(READ, False)),
        (
            classify_mcp_tool_effect(_tool(None, {EFFECT: "non_idempotent_write"})),
            ToolPolicy(READ),
            ToolPolicy(NON_IDEMPOTENT, False),
        ),
    ],
    ids=[
        "annotation read",
        "no annotations",
        "a policy wins over annotations",
        "a policy may lower an undeclared tool",
        "a policy never lowers a declared tool",
    ],
)
def test_effective_mcp_tool_policy(
    classification: McpToolEffectClassification, policy: ToolPolicy | None, effective: ToolPolicy
) -> None:
    assert effective_mcp_tool_policy(classification, policy) == effective


@pytest.mark.parametrize(
    ("effect", "tool_asks", "policy", "merged"),
    [
        (NON_IDEMPOTENT, False, None, ToolPolicy(NON_IDEMPOTENT, False)),
        (READ, True, None, ToolPolicy(READ, True)),
        (NON_IDEMPOTENT, False, ToolPolicy(READ), ToolPolicy(NON_IDEMPOTENT, False)),
        (READ, False, ToolPolicy(UNCLASSIFIED), ToolPolicy(READ, True)),
        (READ, True, ToolPolicy(READ, requires_approval=False), ToolPolicy(READ, False)),
        (IDEMPOTENT, False, ToolPolicy(READ, requires_approval=True), ToolPolicy(IDEMPOTENT, True)),
    ],
    ids=[
        "no policy: a Mutation runs without approval",
        "no policy: recommended asks",
        "a policy never changes the effect",
        "a policy effect that asks by default asks",
        "requires_approval False wins",
        "requires_approval True wins",
    ],
)
def test_a_connector_policy_changes_only_approval(
    effect: ToolEffect, tool_asks: bool, policy: ToolPolicy | None, merged: ToolPolicy
) -> None:
    assert merge_connector_tool_policy(effect, tool_asks, policy) == merged
