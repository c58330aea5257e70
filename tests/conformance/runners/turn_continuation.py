"""Runs ``conformance/turn_continuation.json``: "Ending or continuing a turn" and the model call limit."""

from __future__ import annotations

from typing import Any

from dex_agents.domain.turns import (
    DEFAULT_MAX_MODEL_CALLS_PER_TURN,
    TURN_CONTINUATION_LIMIT_ERROR,
    ContinueTurn,
    InvalidTurnContinuationError,
    TurnContinuationDecision,
    decide_continuation,
    model_call_limit_result,
    model_call_offers_tools,
)

RULE = "turn_continuation"

# The spec names the limit error without giving its text, so cases name the constant.
_NAMED_TEXTS = {TURN_CONTINUATION_LIMIT_ERROR: "TURN_CONTINUATION_LIMIT_ERROR"}


def _decision(value: Any) -> object:
    if value is None:  # no hook
        return "default"
    if isinstance(value, dict) and set(value) == {"continue_turn"}:
        return ContinueTurn(value["continue_turn"])
    return value


def _decide(called_tools: bool, value: Any, count: int) -> TurnContinuationDecision:
    return decide_continuation(called_tools, _decision(value), count)


def _one(case_input: dict[str, Any]) -> dict[str, Any]:
    try:
        decided = _decide(
            case_input["iteration_called_tools"],
            case_input["decision"],
            case_input["consecutive_continuations"],
        )
    except InvalidTurnContinuationError:
        return {"error": "invalid_turn_continuation"}
    turn_error = decided.turn_error
    return {
        "action": decided.action.value,
        "consecutive_continuations": decided.consecutive_continuations,
        "message": decided.message,
        "turn_error": None if turn_error is None else _NAMED_TEXTS.get(turn_error, turn_error),
    }


def _sequence(case_input: dict[str, Any]) -> list[dict[str, Any]]:
    count = 0
    results: list[dict[str, Any]] = []
    for iteration in case_input["iterations"]:
        decided = _decide(iteration["iteration_called_tools"], iteration["decision"], count)
        count = decided.consecutive_continuations
        results.append({"action": decided.action.value, "consecutive_continuations": count})
    return results


def _model_call_limit(case_input: dict[str, Any]) -> dict[str, Any]:
    limit = case_input["max_model_calls_per_turn"]
    if limit is None:
        limit = DEFAULT_MAX_MODEL_CALLS_PER_TURN
    return {
        "offers_tools": model_call_offers_tools(case_input["model_calls_made"], limit),
        "result": model_call_limit_result(limit),
    }


def run(case_input: dict[str, Any]) -> Any:
    """The JSON the case expects, from the public rule functions."""
    kinds = {"decide": _one, "sequence": _sequence, "model_call_limit": _model_call_limit}
    return kinds[case_input["kind"]](case_input)
