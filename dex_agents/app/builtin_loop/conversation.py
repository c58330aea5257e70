"""The model input of one built-in loop call, rebuilt from committed state: the turn's
conversation, its run state, and the results of its recorded tool calls."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import attrs

from dex_agents.app.builtin_loop.compaction import context_summary_items
from dex_agents.app.builtin_loop.items import (
    model_input_item,
)
from dex_agents.app.builtin_loop.request_prefixes import (
    ItemsLineage,
    ItemsPrefix,
    extended_lineage,
)
from dex_agents.app.message_store import MESSAGE_LINEAGE
from dex_agents.app.prefix_cache import PrefixCache
from dex_agents.domain.canonical_json import compact_encoder
from dex_agents.domain.messages import AgentMessage
from dex_agents.domain.model_io import (
    ModelInputItem,
    ModelOutputItem,
    ModelToolCall,
    ToolResultItem,
    UserTextItem,
)
from dex_agents.domain.plans import build_plan_note
from dex_agents.domain.tool_calls import ToolCallStatus
from dex_agents.domain.tool_outcomes import OUTCOME_UNKNOWN_TOOL_RESULT, describe_tool_call_outcome
from dex_agents.ports.runner import AgentTurnContext

# json.dumps(value, separators=(",", ":")): the run state's text as it was always stored.
_compact = compact_encoder(sort_keys=False, ensure_ascii=True, allow_nan=True)


@dataclass(frozen=True)
class RunState:
    """``FrameworkRunState`` of the built-in loop: the turn's model calls and the
    continuations in a row after answers without tools."""

    model_calls: int = 0
    consecutive_continuations: int = 0

    def dumps(self) -> str:
        """The run state as the JSON text the session stores."""
        return _compact(
            {
                "model_calls": self.model_calls,
                "consecutive_continuations": self.consecutive_continuations,
            }
        )

    @classmethod
    def loads(cls, text: str | None) -> RunState:
        """Read a stored run state; ``None`` is the turn's first model call."""
        if text is None:
            return cls()
        try:
            data = json.loads(text)
            return cls(int(data["model_calls"]), int(data.get("consecutive_continuations", 0)))
        except (ValueError, TypeError, KeyError) as error:
            raise ValueError(
                f"framework_run_state {text!r} is not the built-in loop's run state: {error!r}"
            ) from None


@dataclass(frozen=True)
class Conversation:
    """The next model call's input items, and the previous response's output and results."""

    items: list[ModelInputItem]
    previous_results: list[ToolResultItem]
    previous_output: list[ModelOutputItem]
    has_images: bool = False
    """Whether an item carries image references (so a runner without a media store strips them)."""
    prefix: ItemsPrefix | None = field(default=None, compare=False)
    """Where ``items`` hold the kept walk's items, element by element (``request_prefixes.py``):
    how the items were built, not what they are, so two inputs alike compare equal."""


def recorded_result(turn: AgentTurnContext, call: ModelToolCall) -> ToolResultItem:
    """The model-visible result of a stored tool call, from its final record."""
    record = turn.tool_calls.get(call.tool_call_id)
    if record is None or not record.is_final:
        # An orphaned call never reaches a provider: it reads as outcome unknown.
        return ToolResultItem(
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            output=OUTCOME_UNKNOWN_TOOL_RESULT,
        )
    return ToolResultItem(
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
        output=describe_tool_call_outcome(record),
        images=record.images if record.status is ToolCallStatus.SUCCEEDED else (),
    )


def without_images(item: ModelInputItem) -> ModelInputItem:
    """The item without image references, for a runner that has no media store."""
    if isinstance(item, (UserTextItem, ToolResultItem)) and item.images:
        return attrs.evolve(item, images=())
    return item


@attrs.frozen
class _Walked:
    """Where the walk over a session's earlier turns ended: what it built and still holds open."""

    items: tuple[ModelInputItem, ...]
    unanswered: tuple[ModelToolCall, ...]
    trailing_output: tuple[ModelOutputItem, ...]
    turn_ids: frozenset[str]
    has_images: bool
    chars: int
    """The characters of the walked messages' stored items: what the kept items weigh."""
    lineage: ItemsLineage
    """The chain of kept walks whose items each start with the one before (``request_prefixes``)."""


_WALKED: PrefixCache[AgentMessage, _Walked] = PrefixCache(lambda walked: walked.chars)
"""Each session's walk over its earlier turns' messages, resumed by the next model call."""


def turn_conversation(turn: AgentTurnContext) -> Conversation:
    """The model input of the stored messages, every tool call paired with a result.

    Every model call walks every stored message, so the walk over earlier turns
    is remembered per session (``PrefixCache``) and the next call starts after
    it. Only what the messages alone decide is remembered: the walk stops being
    kept at the first message of this turn (where the plan note goes) and at
    the first result it takes from the turn's tool call records.
    """
    note = build_plan_note(turn.plan, turn.interaction_mode)
    messages = tuple(turn.messages)
    items: list[ModelInputItem] = []
    unanswered: list[ModelToolCall] = []
    trailing_output: list[ModelOutputItem] = []
    start = 0
    known_turns: frozenset[str] = frozenset()
    had_images = False
    chars = 0
    # A read of all_messages vouches for itself: its walk resumes with no look at the messages.
    lineage = MESSAGE_LINEAGE.lineage(turn.flow_id, messages)
    resumed = _WALKED.resume(turn.flow_id, messages, lineage=lineage)
    # The kept walk the items start with, and its lineage: the one resumed, or the one kept now.
    prefix_items: tuple[ModelInputItem, ...] = ()
    items_lineage: ItemsLineage | None = None
    if resumed is not None and turn.turn_id not in resumed[1].turn_ids:
        start, walked = resumed
        prefix_items, items_lineage = walked.items, walked.lineage
        items = list(walked.items)
        unanswered = list(walked.unanswered)
        trailing_output = list(walked.trailing_output)
        known_turns = walked.turn_ids
        had_images = walked.has_images
        chars = walked.chars
    resumed_items = len(items)
    keeping = True
    walked_turns: set[str] = set()

    def keep(end: int) -> None:
        nonlocal prefix_items, items_lineage
        if end > start:
            # Only appended to since the walk resumed: the kept items start with the resumed.
            kept = tuple(items)
            items_lineage = extended_lineage(items_lineage, prefix_items, kept)
            prefix_items = kept
            _WALKED.remember(
                turn.flow_id,
                messages,
                _Walked(
                    items=kept,
                    unanswered=tuple(unanswered),
                    trailing_output=tuple(trailing_output),
                    turn_ids=known_turns | walked_turns,
                    has_images=had_images or _any_images(items[resumed_items:]),
                    chars=chars,
                    lineage=items_lineage,
                ),
                walked=end,
                lineage=lineage,
            )

    note_added = False
    for position in range(start, len(messages)):
        message = messages[position]
        item = model_input_item(message.framework_item)
        is_user_text = isinstance(item, UserTextItem)
        if keeping and (message.turn_id == turn.turn_id or (is_user_text and unanswered)):
            keep(position)
            keeping = False
        if is_user_text:
            items.extend(recorded_result(turn, call) for call in unanswered)
            unanswered = []
        if note is not None and not note_added and message.turn_id == turn.turn_id:
            items.append(UserTextItem(text=note))
            note_added = True
        if isinstance(item, ModelOutputItem):
            if not trailing_output or not isinstance(items[-1], ModelOutputItem):
                trailing_output = []
            trailing_output.append(item)
            unanswered.extend(item.tool_calls)
        elif isinstance(item, ToolResultItem):
            unanswered = [call for call in unanswered if call.tool_call_id != item.tool_call_id]
        items.append(item)
        if keeping:
            walked_turns.add(message.turn_id)
            chars += len(message.framework_item)
    if keeping:
        keep(len(messages))
    if note is not None and not note_added:
        items.append(UserTextItem(text=note))
    results = [recorded_result(turn, call) for call in unanswered]
    items.extend(results)
    summary: list[ModelInputItem] = context_summary_items(turn)
    return Conversation(
        summary + items if summary else items,
        results,
        trailing_output if results else [],
        has_images=had_images or _any_images(items[resumed_items:]),
        prefix=None
        if items_lineage is None
        else ItemsPrefix(len(summary), prefix_items, items_lineage),
    )


def _any_images(items: list[ModelInputItem]) -> bool:
    return any(isinstance(item, (UserTextItem, ToolResultItem)) and item.images for item in items)
