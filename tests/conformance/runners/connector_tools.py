"""Runs ``conformance/connector_tools.json``: connector tool names, effects, approval, results."""

from __future__ import annotations

from typing import Any

from dex_agents.domain.connector_naming import (
    DEFAULT_CONNECTOR_RESULT_MAX_BYTES,
    ConnectorOperationKind,
    classify_connector_branch,
    classify_connector_retry,
    connector_requires_approval,
    connector_snake_case,
    connector_tool_effect,
    connector_tool_name,
    truncate_connector_result,
)
from dex_agents.domain.tool_calls import ToolCallStatus
from dex_agents.domain.tool_declarations import merge_connector_tool_policy
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy

RULE = "connector_tools"


def _names(case_input: dict[str, Any]) -> Any:
    try:
        if case_input["op"] == "snake_case":
            return connector_snake_case(case_input["operation"])
        return connector_tool_name(case_input["connector_id"], case_input["operation"])
    except ValueError as error:
        return {"error": type(error).__name__}


def _approval(case_input: dict[str, Any]) -> dict[str, Any]:
    asks = connector_requires_approval(
        approval_recommended=case_input["approval_recommended"],
        requires_approval=case_input["requires_approval"],
    )
    data = case_input["policy"]
    policy = None if data is None else ToolPolicy(data["effect"], data["requires_approval"])
    merged = merge_connector_tool_policy(ToolEffect.NON_IDEMPOTENT_WRITE, asks, policy)
    return {"effect": merged.effect.value, "requires_approval": merged.requires_approval}


def run(case_input: dict[str, Any]) -> Any:
    """Dispatch on ``op`` to the public rule it names."""
    op = case_input["op"]
    if op in ("snake_case", "tool_name"):
        return _names(case_input)
    if op == "effect":
        kind = ConnectorOperationKind(case_input["kind"])
        return connector_tool_effect(kind, retry_safe=case_input["retry_safe"]).value
    if op == "approval":
        return _approval(case_input)
    if op == "truncate":
        max_bytes = case_input["max_bytes"] or DEFAULT_CONNECTOR_RESULT_MAX_BYTES
        text, full = truncate_connector_result(case_input["text"], max_bytes)
        return {"text": text, "truncated_output_bytes": full}
    if op == "branch":
        outcome = classify_connector_branch(
            connector=case_input["connector"],
            operation=case_input["operation"],
            kind=ConnectorOperationKind(case_input["kind"]),
            branch=case_input["branch"],
            required_branches=case_input["required_branches"],
            listed_branches=case_input["listed_branches"],
            may_have_sent=case_input["may_have_sent"],
            value=case_input["value"],
            error_kind=case_input["error_kind"],
            message=case_input["message"],
        )
        return {"status": outcome.status.value, "output": outcome.output, "error": outcome.error}
    if op == "retry":
        retry = classify_connector_retry(
            ToolEffect(case_input["effect"]),
            fence_proved_not_sent=case_input["fence_proved_not_sent"],
        )
        if retry is None:
            return None
        if retry.status is ToolCallStatus.FAILED:
            return {"status": retry.status.value, "error": retry.error}
        # The error text of an unknown outcome is this core's own; only the status is shared.
        return {"status": retry.status.value}
    raise ValueError(f"unknown op {op!r}")
