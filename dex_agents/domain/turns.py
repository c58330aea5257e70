"""Turns: their IDs, the idempotency keys of their tool calls, and whether a turn goes on.

A turn is ``turn-<n>``. Its tool calls are keyed ``<flow_id>/<turn_id>/<tool_call_id>``
("The runner contract"). At the end of each loop iteration, one model call and
the tool calls it requested, ``decide_continuation`` applies the table of
"Ending or continuing a turn" to what ``decide_turn_continuation`` returned.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum
from typing import Literal, TypeAlias

import attrs

from dex_agents.domain.errors import DexAgentsError
from dex_agents.domain.unicode_text import first_lone_surrogate

TURN_ID_PREFIX = "turn-"
"""How every turn ID starts; the turn number follows."""

_TURN_ID = re.compile(r"turn-([1-9][0-9]*)", re.ASCII)


def turn_id(number: int) -> str:
    """The ID of turn ``number``: ``"turn-<n>"``, counting from 1."""
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise ValueError(f"a turn number is an int from 1, not {number!r}")
    return f"{TURN_ID_PREFIX}{number}"


def parse_turn_number(value: str) -> int:
    """The number of turn ID ``value``, the inverse of ``turn_id``."""
    match = _TURN_ID.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"{value!r} is not a turn ID of the form 'turn-<n>' with n from 1")
    return int(match.group(1))


class InvalidToolCallIdError(DexAgentsError, ValueError):
    """A tool call ID that is empty or blank, contains ``/`` or a lone surrogate, or repeats
    within one turn.

    Such an ID fails the turn: the idempotency key could not tell the calls apart.
    """

    def __init__(self, tool_call_id: object, reason: str) -> None:
        super().__init__(f"invalid tool call ID {tool_call_id!r}: {reason}")
        self.tool_call_id = tool_call_id
        """The ID that was refused."""


def validate_tool_call_id(tool_call_id: str) -> str:
    """``tool_call_id`` when it is a non-blank string without ``/`` or a lone surrogate; else
    ``InvalidToolCallIdError``."""
    if not isinstance(tool_call_id, str):
        raise InvalidToolCallIdError(
            tool_call_id, f"a tool call ID is a string, not {type(tool_call_id).__name__}"
        )
    if not tool_call_id:
        raise InvalidToolCallIdError(tool_call_id, "a tool call ID must not be empty")
    if not tool_call_id.strip():
        # Dex refuses a blank AttributeMap instance, and the ID keys AgentToolCalls.
        raise InvalidToolCallIdError(tool_call_id, "a tool call ID must not be blank")
    if "/" in tool_call_id:
        raise InvalidToolCallIdError(tool_call_id, "a tool call ID must not contain '/'")
    surrogate = first_lone_surrogate(tool_call_id)
    if surrogate is not None:
        # It keys AgentToolCalls and names Steps: a key is stored as it is, with no UTF-8
        # form for a surrogate, so the store would refuse RunModel's every commit.
        raise InvalidToolCallIdError(
            tool_call_id,
            "a tool call ID must be valid Unicode text: it has a lone surrogate "
            f"U+{ord(tool_call_id[surrogate]):04X} at index {surrogate}",
        )
    return tool_call_id


def validate_tool_call_ids(
    tool_call_ids: Iterable[str], existing_ids: Iterable[str] = ()
) -> tuple[str, ...]:
    """The tool call IDs of one model response, in order, once each is valid.

    Every ID must be non-blank, contain no ``/`` and no lone surrogate, and be unique
    within the turn:
    within ``tool_call_ids`` and against ``existing_ids``, the IDs of the turn's
    earlier records. IDs may repeat in later turns, because the idempotency key
    includes the turn ID.
    """
    seen = set(existing_ids)
    checked: list[str] = []
    for tool_call_id in tool_call_ids:
        validate_tool_call_id(tool_call_id)
        if tool_call_id in seen:
            raise InvalidToolCallIdError(tool_call_id, "the turn already has a tool call with it")
        seen.add(tool_call_id)
        checked.append(tool_call_id)
    return tuple(checked)


def idempotency_key(flow_id: str, turn_id: str, tool_call_id: str) -> str:
    """The key a tool call passes on: ``"<flow_id>/<turn_id>/<tool_call_id>"``, the same on every attempt."""
    if not isinstance(flow_id, str) or not flow_id:
        raise ValueError(f"an idempotency key needs a non-empty flow ID, not {flow_id!r}")
    if not isinstance(turn_id, str) or not turn_id:
        raise ValueError(f"an idempotency key needs a non-empty turn ID, not {turn_id!r}")
    return f"{flow_id}/{turn_id}/{validate_tool_call_id(tool_call_id)}"


DEFAULT_MAX_MODEL_CALLS_PER_TURN = 100
"""``AgentDefinition.max_model_calls_per_turn`` by default."""


def _positive_limit(max_model_calls_per_turn: int) -> int:
    if (
        isinstance(max_model_calls_per_turn, bool)
        or not isinstance(max_model_calls_per_turn, int)
        or max_model_calls_per_turn < 1
    ):
        raise ValueError(
            f"max_model_calls_per_turn must be an int from 1, not {max_model_calls_per_turn!r}"
        )
    return max_model_calls_per_turn


def model_call_limit_result(max_model_calls_per_turn: int) -> str:
    """The result of a tool call the model makes once the turn reached its model call limit."""
    limit = _positive_limit(max_model_calls_per_turn)
    return f"The tool call was not run: this turn reached its limit of {limit} model calls."


def model_call_offers_tools(model_calls_made: int, max_model_calls_per_turn: int) -> bool:
    """Whether the turn's next model call offers tools.

    ``model_calls_made`` counts the turn's model calls before this one; once it
    reaches ``max_model_calls_per_turn``, the next call offers none.
    """
    limit = _positive_limit(max_model_calls_per_turn)
    if isinstance(model_calls_made, bool) or not isinstance(model_calls_made, int):
        raise ValueError(f"model_calls_made must be an int, not {model_calls_made!r}")
    if model_calls_made < 0:
        raise ValueError(f"model_calls_made must not be negative, not {model_calls_made}")
    return model_calls_made < limit


MAX_CONSECUTIVE_TURN_CONTINUATIONS = 8
"""How many ``ContinueTurn`` continuations in a row may follow answers without tools."""

TURN_CONTINUATION_LIMIT_ERROR = (
    f"the turn ended: decide_turn_continuation continued it {MAX_CONSECUTIVE_TURN_CONTINUATIONS} "
    "times in a row after answers without tools, the limit "
    "(MAX_CONSECUTIVE_TURN_CONTINUATIONS)"
)
"""``last_turn_error`` of a turn whose next continuation would pass the limit."""


@attrs.frozen
class ContinueTurn:
    """Continue the turn with ``message``, which the model reads as user text.

    After tools, the message follows the tool results; after an answer, the answer
    and the message are stored and the model is called again in the same turn. A
    blank message fails the ``RunModel`` attempt (``check_turn_continuation``).
    """

    message: str


TurnContinuation: TypeAlias = Literal["end", "default"] | ContinueTurn
"""What ``decide_turn_continuation`` returns: ``"end"``, ``"default"``, or ``ContinueTurn``."""


class InvalidTurnContinuationError(DexAgentsError, ValueError):
    """``decide_turn_continuation`` returned something else than a ``TurnContinuation``.

    It fails the ``RunModel`` attempt, and its retry policy runs it again.
    """


def check_turn_continuation(value: object) -> TurnContinuation:
    """``value`` as a ``TurnContinuation``, or ``InvalidTurnContinuationError``.

    Any value but ``"end"``, ``"default"`` or a ``ContinueTurn`` whose message is a
    string with text in it is refused.
    """
    if isinstance(value, ContinueTurn):
        if not isinstance(value.message, str):
            raise InvalidTurnContinuationError(
                "decide_turn_continuation returned a ContinueTurn whose message is "
                f"{type(value.message).__name__}, not a string"
            )
        if not value.message.strip():
            raise InvalidTurnContinuationError(
                "decide_turn_continuation returned a ContinueTurn with a blank message"
            )
        return value
    if isinstance(value, str) and value == "end":
        return "end"
    if isinstance(value, str) and value == "default":
        return "default"
    raise InvalidTurnContinuationError(
        f"decide_turn_continuation returned {value!r}; "
        "expected 'end', 'default', or ContinueTurn(message)"
    )


class TurnContinuationAction(StrEnum):
    """What the session does at the end of a loop iteration."""

    END_TURN = "end_turn"
    """The turn completes without another model call."""
    CALL_MODEL_WITH_TOOL_RESULTS = "call_model_with_tool_results"
    """The model is called with the tool results."""
    CONTINUE_WITH_MESSAGE = "continue_with_message"
    """The message is stored as user text of the turn, and the model is called again."""
    LIMIT_REACHED = "limit_reached"
    """The turn ends with its answer stored and ``TURN_CONTINUATION_LIMIT_ERROR``."""


@attrs.frozen(kw_only=True)
class TurnContinuationDecision:
    """What ``decide_continuation`` decided.

    ``message`` is the ``ContinueTurn`` message for ``continue_with_message``;
    ``turn_error`` is ``TURN_CONTINUATION_LIMIT_ERROR`` for ``limit_reached``.
    ``consecutive_continuations`` is the count the run state keeps for the next
    iteration: reset to 0 by a tool call, one more after a continued answer.
    """

    action: TurnContinuationAction = attrs.field(converter=TurnContinuationAction)
    consecutive_continuations: int
    message: str | None = None
    turn_error: str | None = None


def decide_continuation(
    iteration_called_tools: bool,
    decision: object,
    consecutive_continuations: int,
) -> TurnContinuationDecision:
    """Apply "Ending or continuing a turn" to one loop iteration.

    ``decision`` is what ``decide_turn_continuation`` returned, or ``"default"``
    without a hook; ``consecutive_continuations`` counts the continuations in a
    row after answers without tools so far.

    - The model called tools: ``"end"`` gives ``END_TURN`` (no other model
      call); ``ContinueTurn`` gives ``CONTINUE_WITH_MESSAGE`` (the message follows
      the tool results); ``"default"`` gives ``CALL_MODEL_WITH_TOOL_RESULTS``. The
      count resets to 0.
    - The model answered without tools: ``"end"`` and ``"default"`` give
      ``END_TURN``; ``ContinueTurn`` gives ``CONTINUE_WITH_MESSAGE`` and counts one
      more, or ``LIMIT_REACHED`` once ``MAX_CONSECUTIVE_TURN_CONTINUATIONS`` (8)
      continuations in a row already followed answers without tools.

    An invalid ``decision``, a blank message included, raises
    ``InvalidTurnContinuationError`` so the ``RunModel`` attempt fails.
    """
    if not isinstance(iteration_called_tools, bool):
        raise TypeError(
            f"iteration_called_tools must be a bool, not {type(iteration_called_tools).__name__}"
        )
    if (
        isinstance(consecutive_continuations, bool)
        or not isinstance(consecutive_continuations, int)
        or consecutive_continuations < 0
    ):
        raise ValueError(
            f"consecutive_continuations must be an int from 0, not {consecutive_continuations!r}"
        )
    checked = check_turn_continuation(decision)
    count = 0 if iteration_called_tools else consecutive_continuations
    if not isinstance(checked, ContinueTurn):
        action = (
            TurnContinuationAction.CALL_MODEL_WITH_TOOL_RESULTS
            if iteration_called_tools and checked == "default"
            else TurnContinuationAction.END_TURN
        )
        return TurnContinuationDecision(action=action, consecutive_continuations=count)
    if iteration_called_tools:
        return TurnContinuationDecision(
            action=TurnContinuationAction.CONTINUE_WITH_MESSAGE,
            consecutive_continuations=0,
            message=checked.message,
        )
    if count >= MAX_CONSECUTIVE_TURN_CONTINUATIONS:
        return TurnContinuationDecision(
            action=TurnContinuationAction.LIMIT_REACHED,
            consecutive_continuations=count,
            turn_error=TURN_CONTINUATION_LIMIT_ERROR,
        )
    return TurnContinuationDecision(
        action=TurnContinuationAction.CONTINUE_WITH_MESSAGE,
        consecutive_continuations=count + 1,
        message=checked.message,
    )
