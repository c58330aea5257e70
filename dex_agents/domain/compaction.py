"""Compaction: when to summarize and where to cut.

``RunModel`` compares the runner's input estimate with the policy's trigger, asks
the runner for a cutoff, and moves to ``CompactContext`` when the cutoff is past
the current summary. The shared rules here serve both the built-in loop
(``select_model_response_cutoff``) and framework adapters, which cannot see the
framework's own request (``estimate_stored_input_tokens``,
``select_turn_boundary_cutoff``). The estimate per text is in
``token_estimates.py``, and the texts of a summary request (its prompt, the
summary note) in ``context_summary_prompt.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from typing import Protocol

from dex_agents.domain.context_summary import ContextSummary
from dex_agents.domain.context_summary_prompt import build_context_summary_note
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.token_estimates import estimate_text_tokens

DEFAULT_TRIGGER_RATIO = 0.85
"""``CompactionPolicy.trigger_ratio``: compact at this share of the context window."""

DEFAULT_KEEP_RATIO = 0.3
"""``CompactionPolicy.keep_ratio``: keep the newest messages up to this share of the window."""


def _ratio(value: float) -> Fraction:
    # The ratio as written in decimal, so 0.85 * 400_000 is exactly 340_000 in every core.
    return Fraction(repr(float(value)))


@dataclass(frozen=True, kw_only=True)
class CompactionPolicy:
    """When to compact: at ``trigger_ratio`` of ``context_window_tokens``, keeping ``keep_ratio``.

    ``reserved_input_tokens`` adds what an adapter's estimate cannot see, such as
    a framework's system prompt, to every estimate. Raises ``ValueError`` naming
    the field: a window of at least 1 token, ``0 < trigger_ratio <= 1``,
    ``0 <= keep_ratio < trigger_ratio``, and ``0 <= reserved_input_tokens <
    context_window_tokens``.
    """

    context_window_tokens: int
    trigger_ratio: float = DEFAULT_TRIGGER_RATIO
    keep_ratio: float = DEFAULT_KEEP_RATIO
    reserved_input_tokens: int = 0

    def __post_init__(self) -> None:
        for name in ("context_window_tokens", "reserved_input_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, not {type(value).__name__}")
        for name in ("trigger_ratio", "keep_ratio"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{name} must be a number, not {type(value).__name__}")
            if not math.isfinite(value):
                raise ValueError(f"{name} must be finite, not {value}")
        if self.context_window_tokens < 1:
            raise ValueError(
                f"context_window_tokens must be at least 1, not {self.context_window_tokens}"
            )
        if not 0 < self.trigger_ratio <= 1:
            raise ValueError(
                f"trigger_ratio must be above 0 and at most 1, not {self.trigger_ratio}"
            )
        if not 0 <= self.keep_ratio < self.trigger_ratio:
            raise ValueError(
                f"keep_ratio must be at least 0 and below trigger_ratio ({self.trigger_ratio}),"
                f" not {self.keep_ratio}"
            )
        if not 0 <= self.reserved_input_tokens < self.context_window_tokens:
            raise ValueError(
                "reserved_input_tokens must be at least 0 and below context_window_tokens"
                f" ({self.context_window_tokens}), not {self.reserved_input_tokens}"
            )

    @property
    def retained_token_budget(self) -> int:
        """The tokens of newest messages a cutoff keeps: ``keep_ratio`` of the window, rounded down."""
        return math.floor(_ratio(self.keep_ratio) * self.context_window_tokens)

    def is_triggered(self, estimated_input_tokens: int) -> bool:
        """Whether the estimate plus ``reserved_input_tokens`` reaches ``trigger_ratio`` of the window."""
        total = estimated_input_tokens + self.reserved_input_tokens
        return total >= _ratio(self.trigger_ratio) * self.context_window_tokens


def is_new_compaction_cutoff(cutoff: int | None, summary: ContextSummary | None) -> bool:
    """Whether ``cutoff`` is past the current summary, so ``RunModel`` moves to ``CompactContext``."""
    if cutoff is None:
        return False
    return summary is None or cutoff > summary.last_sequence


class CompactionTurn(Protocol):
    """What the compaction rules read of a turn; ``AgentTurnContext`` satisfies it."""

    @property
    def messages(self) -> Sequence[AgentMessage]:
        """The stored messages the runner receives, in sequence order."""

    @property
    def context_summary(self) -> ContextSummary | None:
        """The current summary, ``None`` before the first compaction."""

    @property
    def framework_run_state(self) -> str | None:
        """The run state of a resumed model call, ``None`` for the turn's first call."""


def estimate_stored_input_tokens(turn: CompactionTurn, fixed_input_tokens: int = 0) -> int:
    """An adapter's input estimate: each stored ``framework_item``, the summary note, and fixed tokens."""
    if fixed_input_tokens < 0:
        raise ValueError(f"fixed_input_tokens must be at least 0, not {fixed_input_tokens}")
    total = fixed_input_tokens + sum(
        estimate_text_tokens(message.framework_item) for message in turn.messages
    )
    if turn.context_summary is not None:
        total += estimate_text_tokens(build_context_summary_note(turn.context_summary))
    return total


def _unsummarized(turn: CompactionTurn) -> list[AgentMessage]:
    summary = turn.context_summary
    floor = 0 if summary is None else summary.last_sequence
    return [message for message in turn.messages if message.sequence > floor]


def _choose_cut(
    messages: Sequence[AgentMessage], cuts: Sequence[int], retained_token_budget: int
) -> int | None:
    """The last sequence to summarize: the earliest allowed cut whose kept messages fit the budget.

    A cut ``j`` summarizes ``messages[:j]`` and keeps ``messages[j:]``. When no
    cut fits, the latest allowed one keeps as little as the rule allows. When
    every unsummarized message already fits, there is no new cutoff: a second
    estimate that is still high right after a compaction must not compact again,
    so ``RunModel`` and ``CompactContext`` cannot loop.
    """
    if not cuts:
        return None
    kept = [0] * (len(messages) + 1)
    for position in range(len(messages) - 1, -1, -1):
        kept[position] = kept[position + 1] + estimate_text_tokens(
            messages[position].framework_item
        )
    if kept[0] <= retained_token_budget:
        return None
    fitting = [cut for cut in cuts if kept[cut] <= retained_token_budget]
    cut = min(fitting) if fitting else max(cuts)
    return messages[cut - 1].sequence


def select_turn_boundary_cutoff(turn: CompactionTurn, retained_token_budget: int) -> int | None:
    """The last sequence to summarize, cutting only between turns and never inside the running one.

    The running turn is the last message's turn. Keeps the newest messages that
    fit ``retained_token_budget``; ``None`` while ``turn.framework_run_state`` is
    set (a resumed call continues from that state), when every message after
    the current summary already fits the budget, or when no turn boundary after
    the current summary precedes the running turn.
    """
    if turn.framework_run_state is not None:
        return None
    messages = _unsummarized(turn)
    if len(messages) < 2:
        return None
    running = messages[-1].turn_id
    cuts: list[int] = []
    for position in range(1, len(messages)):
        if messages[position - 1].turn_id == running:
            break
        if messages[position].turn_id != messages[position - 1].turn_id:
            cuts.append(position)
    return _choose_cut(messages, cuts, retained_token_budget)


def model_response_cuts(
    messages: Sequence[AgentMessage], *, running_turn_id: str | None = None
) -> tuple[int, ...]:
    """Positions ``j`` (1 to ``len - 1``) where cutting before ``messages[j]`` keeps calls whole.

    A cut never falls between two assistant messages of one turn (one model
    response), and never between a tool call (an assistant message with
    ``tool_call_id``) and its result (a tool message with the same turn and
    ``tool_call_id``). A call of ``running_turn_id`` with no stored result yet is
    still open, so nothing after it is cut; a call of an ended turn that never got
    a result is not, as its result will never be stored. A result whose call no
    assistant message names (a message that holds several calls, as one Chat
    Completions output item does, names none) stays with the last assistant
    message of its turn before it: its call is in that model response.
    """
    result_at: dict[tuple[str, str], int] = {}
    named_calls: set[tuple[str, str]] = set()
    for position, message in enumerate(messages):
        if message.tool_call_id is None:
            continue
        if message.role is MessageRole.TOOL:
            result_at.setdefault((message.turn_id, message.tool_call_id), position)
        elif message.role is MessageRole.ASSISTANT:
            named_calls.add((message.turn_id, message.tool_call_id))
    open_until = 0
    last_assistant: int | None = None
    cuts: list[int] = []
    for position in range(1, len(messages)):
        previous, current = messages[position - 1], messages[position]
        if previous.role is MessageRole.ASSISTANT:
            last_assistant = position - 1
            if previous.tool_call_id is not None:
                result = result_at.get((previous.turn_id, previous.tool_call_id))
                if result is None and previous.turn_id == running_turn_id:
                    open_until = len(messages)
                elif result is not None:
                    open_until = max(open_until, result)
        if (
            current.role is MessageRole.TOOL
            and current.tool_call_id is not None
            and (current.turn_id, current.tool_call_id) not in named_calls
            and last_assistant is not None
            and messages[last_assistant].turn_id == current.turn_id
        ):
            while cuts and cuts[-1] > last_assistant:
                cuts.pop()
            continue
        same_response = (
            previous.role is MessageRole.ASSISTANT
            and current.role is MessageRole.ASSISTANT
            and previous.turn_id == current.turn_id
        )
        if position > open_until and not same_response:
            cuts.append(position)
    return tuple(cuts)


def select_model_response_cutoff(turn: CompactionTurn, retained_token_budget: int) -> int | None:
    """The built-in loop's cutoff: only between model responses whose tool calls all have results.

    It may cut inside the running turn (the last message's turn), so a turn with
    many tool calls compacts mid-turn. Keeps the newest messages that fit
    ``retained_token_budget``; ``None`` when every message after the summary
    already fits it, or when no such cut lies after the summary.
    """
    messages = _unsummarized(turn)
    if len(messages) < 2:
        return None
    cuts = model_response_cuts(messages, running_turn_id=messages[-1].turn_id)
    return _choose_cut(messages, cuts, retained_token_budget)


def next_context_summary(
    previous: ContextSummary | None, *, last_sequence: int, text: str, now: datetime
) -> ContextSummary:
    """The ``ContextSummary`` that ``CompactContext`` stores: the next generation, from sequence 1.

    Raises ``ValueError`` for blank text or a ``last_sequence`` not past the
    previous summary's.
    """
    if not text.strip():
        raise ValueError("a context summary needs non-blank text")
    floor = 0 if previous is None else previous.last_sequence
    if last_sequence <= floor:
        raise ValueError(
            f"a new context summary's last_sequence must be past {floor}, not {last_sequence}"
        )
    return ContextSummary(
        generation=1 if previous is None else previous.generation + 1,
        first_sequence=1,
        last_sequence=last_sequence,
        text=text,
        created_at=now,
    )
