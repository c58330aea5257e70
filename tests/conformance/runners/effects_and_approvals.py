"""Runs ``conformance/effects_and_approvals.json``: the "Effects and policies" table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dex_agents.domain.errors import ToolExecutionError, ToolOutcomeUnknownError
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.domain.tool_effects import (
    ToolEffect,
    ToolFailureRoute,
    ToolPolicy,
    is_approval_required,
    max_tool_attempts,
    resolve_tool_policy,
    tool_failure_route,
    tool_step_for_effect,
)
from dex_agents.domain.tool_outcomes import (
    record_tool_error,
    record_tool_failure,
    record_tool_outcome_unknown,
)

RULE = "effects_and_approvals"

_ROUTES: dict[ToolFailureRoute, Callable[[AgentToolCall, str, bool], AgentToolCall]] = {
    ToolFailureRoute.RECORD_TOOL_FAILURE: record_tool_failure,
    ToolFailureRoute.RECORD_TOOL_OUTCOME_UNKNOWN: record_tool_outcome_unknown,
}


def _record(effect: ToolEffect, requires_approval: bool, **overrides: Any) -> AgentToolCall:
    fields: dict[str, Any] = {
        "tool_call_id": "call-1",
        "tool_name": "tool",
        "arguments": "{}",
        "turn_id": "turn-1",
        "effect": effect,
        "requires_approval": requires_approval,
        "status": ToolCallStatus.APPROVED,
        "deferral_order": 0,
    }
    return AgentToolCall(**{**fields, **overrides})


def _outcome(record: AgentToolCall) -> dict[str, Any]:
    return {"status": record.status.value, "error": record.error}


def _policy(case_input: dict[str, Any]) -> dict[str, Any]:
    effect = ToolEffect(case_input["effect"])
    policy = ToolPolicy(effect, case_input["requires_approval"])
    approval = is_approval_required(policy)
    route = tool_failure_route(effect)
    recover = _ROUTES[route]
    detail = case_input["detail"]
    return {
        "step": tool_step_for_effect(effect).value,
        "max_attempts": max_tool_attempts(effect),
        "approval_required": approval,
        "failure_route": route.value,
        "failure": _outcome(recover(_record(effect, approval), detail, False)),
        "never_started": _outcome(recover(_record(effect, approval), detail, True)),
        "never_started_after_a_question": _outcome(
            recover(_record(effect, approval, input_request_count=1), detail, True)
        ),
        "never_started_after_a_task": _outcome(
            recover(
                _record(effect, approval, task_id="task-1", status=ToolCallStatus.WAITING_FOR_TASK),
                detail,
                True,
            )
        ),
    }


def _resolve(case_input: dict[str, Any]) -> dict[str, Any]:
    policies = {
        name: ToolPolicy(ToolEffect(value["effect"]), value["requires_approval"])
        for name, value in case_input["tool_policies"].items()
    }
    framework_effect = case_input["framework_effect"]
    policy = resolve_tool_policy(
        case_input["name"],
        policies,
        None if framework_effect is None else ToolEffect(framework_effect),
        ToolEffect(case_input["default_tool_effect"]),
    )
    return {
        "effect": policy.effect.value,
        "requires_approval": policy.requires_approval,
        "approval_required": is_approval_required(policy),
    }


def _tool_error(case_input: dict[str, Any]) -> dict[str, Any]:
    errors: dict[str, type[ToolExecutionError | ToolOutcomeUnknownError]] = {
        "tool_execution_error": ToolExecutionError,
        "tool_outcome_unknown_error": ToolOutcomeUnknownError,
    }
    error = errors[case_input["error"]](case_input["message"])
    record = _record(ToolEffect(case_input["effect"]), False)
    return _outcome(record_tool_error(record, error))


def run(case_input: dict[str, Any]) -> Any:
    """The JSON the case expects, from the public rule functions."""
    kinds = {"policy": _policy, "resolve_tool_policy": _resolve, "tool_error": _tool_error}
    return kinds[case_input["kind"]](case_input)
