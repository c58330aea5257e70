"""Decoding the JSON text of a model's tool call arguments before any schema check.

``decode_tool_arguments`` is ``json.loads`` that refuses what no tool can take:
text that is not JSON, ``NaN`` and ``Infinity``, a number past float's range such
as ``1e400`` (which ``json.loads`` reads as infinity), and nesting past the
interpreter's recursion limit. Each raises ``ArgumentsNotDecoded`` with the reason
the model reads, so a refused call fails before its tool runs and never records
``outcome_unknown``.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["ArgumentsNotDecoded", "decode_tool_arguments"]


class ArgumentsNotDecoded(ValueError):
    """Arguments text that is refused before the schema check; the message is the reason."""


class _NumberOutOfRange(ValueError):
    pass


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NumberOutOfRange(text)
    return value


def _refuse_constant(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def decode_tool_arguments(arguments_json: str) -> Any:
    """The decoded ``arguments_json``; ``ArgumentsNotDecoded`` names why it is refused."""
    try:
        return json.loads(
            arguments_json, parse_constant=_refuse_constant, parse_float=_finite_float
        )
    except _NumberOutOfRange as error:
        raise ArgumentsNotDecoded(f"number {error} is out of range") from None
    except RecursionError:
        raise ArgumentsNotDecoded("arguments are nested too deeply") from None
    except (TypeError, ValueError):
        raise ArgumentsNotDecoded("arguments are not valid JSON") from None
