"""Compaction: when to summarize, where to cut, and the texts of a summary request.

``RunModel`` compares the runner's input estimate with the policy's trigger, asks
the runner for a cutoff, and moves to ``CompactContext`` when the cutoff is past
the current summary. The shared rules here serve both the built-in loop
(``select_model_response_cutoff``) and framework adapters, which cannot see the
framework's own request (``estimate_stored_input_tokens``,
``select_turn_boundary_cutoff``, ``build_context_summary_prompt``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from typing import Protocol

from dex_agents.domain.context_summary import ContextSummary, ContextSummaryRequest
from dex_agents.domain.messages import AgentMessage, MessageRole

DEFAULT_TRIGGER_RATIO = 0.85
"""``CompactionPolicy.trigger_ratio``: compact at this share of the context window."""

DEFAULT_KEEP_RATIO = 0.3
"""``CompactionPolicy.keep_ratio``: keep the newest messages up to this share of the window."""

UTF8_BYTES_PER_TOKEN = 3
"""``estimate_text_tokens`` counts three UTF-8 bytes per token, which errs high for English."""

CONTEXT_SUMMARY_NOTE_HEADER = "[Dex] Summary of the earlier conversation:"
"""The first line of the model input that carries the context summary."""

CONTEXT_SUMMARY_TRANSCRIPT_HEADER = "[Dex] Transcript of the earlier conversation to summarize:"
"""The first line of ``build_context_summary_prompt``'s prompt."""

CONTEXT_SUMMARY_INSTRUCTIONS = (
    "[Dex] You are summarizing the earlier part of a conversation between a user and an AI"
    " agent, so that the agent can continue the conversation without the original messages."
    " If the transcript includes an earlier summary, fold it into the new one. Keep what the"
    " agent needs to continue: the user's goals, requests, preferences and constraints;"
    " decisions made and their reasons; facts learned and tool results, with exact names,"
    " identifiers, numbers, paths and URLs; the work done and the work still open; and any"
    " question still waiting for an answer. Leave out greetings and repetition. Write plain"
    " text in the conversation's language, as concisely as completeness allows, and do not"
    " address the user or call tools."
)
"""The instructions of a summary call; the built-in loop summarizes with them and no tools."""


def build_context_summary_omission_note(omitted_count: int) -> str:
    """``[Dex] <n> earlier messages did not fit in this request and are left out.``"""
    if isinstance(omitted_count, bool) or not isinstance(omitted_count, int) or omitted_count < 1:
        raise ValueError(f"omitted_count must be a positive int, not {omitted_count!r}")
    return f"[Dex] {omitted_count} earlier messages did not fit in this request and are left out."


def build_context_summary_note(summary: ContextSummary) -> str:
    """The model input text of a summary: ``CONTEXT_SUMMARY_NOTE_HEADER``, a newline, the text."""
    return f"{CONTEXT_SUMMARY_NOTE_HEADER}\n{summary.text}"


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


def estimate_text_tokens(text: str) -> int:
    """Tokens of ``text`` at three UTF-8 bytes per token, rounding up.

    A lone surrogate (from a tool's result) counts as the three bytes it would take.
    """
    return -(-_utf8_len(text) // UTF8_BYTES_PER_TOKEN)


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


def render_transcript_message(message: AgentMessage) -> str | None:
    """One message as a transcript block of ``build_context_summary_prompt``.

    Renders the provider-neutral projection (``text`` and the ``tool_*``
    fields), never the opaque ``framework_item``; ``None`` for a message with
    none, such as a reasoning item.
    """
    lines: list[str] = []
    if message.role is MessageRole.TOOL:
        name = message.tool_name or "a tool"
        output = message.tool_output if message.tool_output is not None else message.text
        if output is not None:
            lines.append(f"tool result of {name}: {output}")
    else:
        if message.text is not None:
            lines.append(f"{message.role}: {message.text}")
        if message.role is MessageRole.ASSISTANT and (
            message.tool_call_id is not None or message.tool_name is not None
        ):
            name = message.tool_name or "a tool"
            lines.append(f"assistant called {name}: {message.tool_arguments or '{}'}")
    if not lines:
        return None
    if message.images:
        lines.append(f"[{len(message.images)} image(s) not shown]")
    return "\n".join(lines)


_BLOCK_SEPARATOR = "\n\n"


def _utf8_len(text: str) -> int:
    # Every model call estimates the whole conversation again, so short texts (most
    # messages) are remembered; long ones are measured anew, so the cache stays small.
    if len(text) <= _REMEMBERED_TEXT_LENGTH:
        return _remembered_utf8_len(text)
    return _encoded_len(text)


_REMEMBERED_TEXT_LENGTH = 8192


@functools.lru_cache(maxsize=8192)
def _remembered_utf8_len(text: str) -> int:
    return _encoded_len(text)


def _encoded_len(text: str) -> int:
    # surrogatepass: a tool's text may hold lone surrogates, which only estimates see raw.
    return len(text.encode("utf-8", "surrogatepass"))


def build_context_summary_prompt(request: ContextSummaryRequest) -> str:
    """The summary request as one plain text prompt that fits ``request.input_token_budget``.

    It starts with ``CONTEXT_SUMMARY_TRANSCRIPT_HEADER``, then the previous
    summary (after ``CONTEXT_SUMMARY_NOTE_HEADER``), then one block per message,
    and ends with ``CONTEXT_SUMMARY_INSTRUCTIONS``, so it works as a call's only
    input. When it would exceed the budget (``estimate_text_tokens``), the oldest
    messages are left out and ``build_context_summary_omission_note`` says how
    many; if even the header, previous summary, and instructions exceed it, every
    message is left out.
    """
    head = [CONTEXT_SUMMARY_TRANSCRIPT_HEADER]
    if request.previous_summary is not None:
        head.append(build_context_summary_note(request.previous_summary))
    tail = [CONTEXT_SUMMARY_INSTRUCTIONS]
    blocks = [render_transcript_message(message) for message in request.messages]
    max_bytes = max(request.input_token_budget, 0) * UTF8_BYTES_PER_TOKEN
    separator = _utf8_len(_BLOCK_SEPARATOR)
    fixed = sum(_utf8_len(part) + separator for part in head) + _utf8_len(tail[0])
    suffix = [0] * (len(blocks) + 1)
    for position in range(len(blocks) - 1, -1, -1):
        block = blocks[position]
        suffix[position] = suffix[position + 1] + (
            0 if block is None else _utf8_len(block) + separator
        )
    omitted = len(blocks)
    for count in range(len(blocks) + 1):
        note = _utf8_len(build_context_summary_omission_note(count)) + separator if count else 0
        if fixed + note + suffix[count] <= max_bytes:
            omitted = count
            break
    parts = [*head]
    if omitted:
        parts.append(build_context_summary_omission_note(omitted))
    parts.extend(block for block in blocks[omitted:] if block is not None)
    parts.extend(tail)
    return _BLOCK_SEPARATOR.join(parts)


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
