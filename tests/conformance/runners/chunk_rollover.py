"""Runner of ``conformance/chunk_rollover.json``: the store-messages commit plan."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dex_agents.domain.chunking import plan_store_messages
from dex_agents.domain.message_index import AgentMessageIndex
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.windowing import MessageStorageOptions, parse_message_sequence_key
from dex_agents.domain.wire import from_wire, to_wire

RULE = "chunk_rollover"


def _message(sequence: int) -> AgentMessage:
    return AgentMessage(
        sequence=sequence, turn_id="turn-1", role=MessageRole.USER, framework_item="{}"
    )


def _span(sequences: Sequence[int]) -> list[int] | None:
    """``[first, last]`` of consecutive sequences, ``None`` for none."""
    if not sequences:
        return None
    assert list(sequences) == list(range(sequences[0], sequences[-1] + 1)), sequences
    return [sequences[0], sequences[-1]]


def run(case_input: dict[str, Any]) -> Any:
    """Plan one commit from the case's window, new messages, and sizes; return it as JSON."""
    raw_index = case_input["index"]
    index = None if raw_index is None else from_wire(raw_index, AgentMessageIndex)
    first = index.window_first_sequence if index is not None else 1
    window_count, new_count = case_input["window_count"], case_input["new_count"]
    sizes = {int(sequence): size for sequence, size in case_input["sizes"].items()}
    default_size = case_input["message_size_bytes"]
    plan = plan_store_messages(
        index=index,
        window=[_message(first + offset) for offset in range(window_count)],
        new_messages=[_message(first + window_count + offset) for offset in range(new_count)],
        options=MessageStorageOptions(**case_input["options"], retained_message_limit=None),
        message_size=lambda message: sizes.get(message.sequence, default_size),
    )
    return {
        "window_messages": _span([message.sequence for message in plan.window_messages]),
        "chunks": [[chunk.first_sequence, chunk.last_sequence] for chunk in plan.chunks],
        "deleted_window_sequences": _span(
            [parse_message_sequence_key(key) for key in plan.deleted_window_keys]
        ),
        "index": None if plan.index is None else to_wire(plan.index),
        "index_changed": plan.index_changed,
    }
