"""Runs ``conformance/mcp_dex_conventions.json``: MCP effects, outcomes, task polls and input."""

from __future__ import annotations

from typing import Any

from dex_agents.domain.interrupts import QuestionAnswer
from dex_agents.domain.mcp_conventions import (
    McpCallOutcome,
    McpInputQuestion,
    classify_mcp_error_response,
    classify_mcp_tool_result,
    map_mcp_input_request,
    mcp_input_response,
    mcp_unanswerable_input_text,
    next_mcp_task_poll_interval,
)
from dex_agents.domain.tool_declarations import classify_mcp_tool_effect, effective_mcp_tool_policy
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy

RULE = "mcp_dex_conventions"


def _outcome(outcome: McpCallOutcome) -> dict[str, Any]:
    return {"kind": outcome.kind.value, "text": outcome.text, "warned": bool(outcome.warnings)}


def _policy(data: dict[str, Any] | None) -> ToolPolicy | None:
    if data is None:
        return None
    return ToolPolicy(ToolEffect(data["effect"]), requires_approval=data["requires_approval"])


def _question(question: McpInputQuestion | None) -> dict[str, Any] | None:
    if question is None:
        return None
    return {
        "request_key": question.request_key,
        "question": question.question,
        "choices": list(question.choices),
        "allows_free_text": question.allows_free_text,
        "field_name": question.field_name,
        "field_type": question.field_type.value,
    }


def run(case_input: dict[str, Any]) -> Any:
    """Dispatch on ``op`` to the public rule it names."""
    op = case_input["op"]
    if op == "classify_tool":
        classification = classify_mcp_tool_effect(
            case_input["tool"],
            default_tool_effect=ToolEffect(case_input["default_tool_effect"]),
            trusts_tool_annotations=case_input["trusts_tool_annotations"],
        )
        return {
            "effect": classification.effect.value,
            "declared": classification.declared,
            "approval_recommended": classification.approval_recommended,
            "requires_approval": classification.requires_approval,
            "warned": bool(classification.warnings),
        }
    if op == "tool_policy":
        policy = effective_mcp_tool_policy(
            classify_mcp_tool_effect(case_input["tool"]), _policy(case_input["policy"])
        )
        return {"effect": policy.effect.value, "requires_approval": policy.requires_approval}
    if op == "result":
        return _outcome(
            classify_mcp_tool_result(
                case_input["result"], uploads_images=case_input["uploads_images"]
            )
        )
    if op == "error":
        return _outcome(classify_mcp_error_response(case_input["error"]))
    if op == "poll_interval":
        return next_mcp_task_poll_interval(
            case_input["previous_seconds"], case_input["poll_interval_ms"]
        )
    if op == "input_request":
        return _question(map_mcp_input_request(case_input["requests"]))
    if op == "unanswerable_text":
        return mcp_unanswerable_input_text(case_input["requests"])
    if op == "input_response":
        question = McpInputQuestion(
            request_key="request",
            fingerprint="",
            question="",
            field_name=case_input["field_name"],
            field_type=case_input["field_type"],
        )
        answer = QuestionAnswer(resolution=case_input["resolution"], answer=case_input["answer"])
        return mcp_input_response(question, answer)
    raise ValueError(f"unknown op {op!r}")
