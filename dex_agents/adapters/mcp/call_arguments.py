"""A tool call's arguments text as the JSON object an MCP ``tools/call`` sends.

Refused with ``ToolExecutionError`` before a request, so a write whose arguments
cannot be sent fails instead of recording ``outcome_unknown``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from dex_agents.domain.errors import ToolExecutionError


def _refuse_constant(constant: str) -> Any:
    # json.loads takes NaN and Infinity, which are not JSON; the request would carry them
    # to the server as something else (null), so the call is refused before it is sent.
    raise ValueError(f"{constant} is not a JSON value")


def _finite_float(text: str) -> float:
    # json.loads reads a number past float's range, such as 1e400, as infinity.
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text} is out of range")
    return value


def parse_call_arguments(text: str) -> dict[str, Any]:
    """A call's stored arguments as the JSON object sent in ``tools/call``; ``""`` is ``{}``.

    Raises ``ToolExecutionError`` for text that is not a JSON object, holds NaN or
    Infinity or a number past float's range, or is nested too deeply, before any
    request is sent.
    """
    try:
        value = json.loads(text or "{}", parse_constant=_refuse_constant, parse_float=_finite_float)
    except ValueError as error:
        raise ToolExecutionError(f"the tool arguments are not JSON: {error}") from error
    except RecursionError:
        # Refused before any request, so a write fails instead of recording outcome_unknown.
        raise ToolExecutionError("the tool arguments are nested too deeply") from None
    if not isinstance(value, dict):
        raise ToolExecutionError("the tool arguments must be a JSON object")
    return value
