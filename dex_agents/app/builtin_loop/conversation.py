"""The model input of one built-in loop call, rebuilt from committed state: the turn's
conversation, its run state, and the results of its recorded tool calls."""

from __future__ import annotations

import json
from dataclasses import dataclass

import attrs

from dex_agents.app.builtin_loop.compaction import context_summary_items
from dex_agents.app.builtin_loop.items import (
    model_input_item,
)
from dex_agents.domain.model_io import (
    ModelInputItem,
    ModelOutputItem,
    ModelToolCall,
    ToolResultItem,
    UserTextItem,
)
from dex_agents.domain.plans import build_plan_note
from dex_agents.domain.tool_calls import ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from dex_agents.domain.tool_outcomes import OUTCOME_UNKNOWN_TOOL_RESULT, describe_tool_call_outcome
from dex_agents.ports.runner import AgentTurnContext

UNKNOWN_TOOL_POLICY = ToolPolicy(ToolEffect.UNCLASSIFIED, requires_approval=False)
"""The policy of a call whose name no tool offers: it fails as ``unknown tool <name>``, unapproved."""


@dataclass(frozen=True)
class RunState:
    """``FrameworkRunState`` of the built-in loop: the turn's model calls and the
    continuations in a row after answers without tools."""

    model_calls: int = 0
    consecutive_continuations: int = 0

    def dumps(self) -> str:
        """The run state as the JSON text the session stores."""
        return json.dumps(
            {
                "model_calls": self.model_calls,
                "consecutive_continuations": self.consecutive_continuations,
            },
            separators=(",", ":"),
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


def turn_conversation(turn: AgentTurnContext) -> Conversation:
    """The model input of the stored messages, every tool call paired with a result."""
    note = build_plan_note(turn.plan, turn.interaction_mode)
    items: list[ModelInputItem] = context_summary_items(turn)
    unanswered: list[ModelToolCall] = []
    trailing_output: list[ModelOutputItem] = []
    note_added = False
    for message in turn.messages:
        item = model_input_item(message.framework_item)
        if isinstance(item, UserTextItem):
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
    if note is not None and not note_added:
        items.append(UserTextItem(text=note))
    results = [recorded_result(turn, call) for call in unanswered]
    items.extend(results)
    return Conversation(items, results, trailing_output if results else [])
