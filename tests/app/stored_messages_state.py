"""A StateReader of one session's stored messages in memory (its index, chunks and window),
and builders of the messages, chunks and index it holds."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from dex_agents.domain.message_index import AgentMessageChunk, AgentMessageIndex, MessageChunkInfo
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.windowing import message_sequence_key
from dex_agents.ports.persistence import AttributeDef, AttributeMapDef, ChannelDef, ChannelMessage
from dex_agents.ports.session_schema import (
    AGENT_MESSAGE_CHUNKS,
    AGENT_MESSAGE_INDEX,
    AGENT_MESSAGES,
)

T = TypeVar("T")


def stored_message(sequence: int, text: str = "{}") -> AgentMessage:
    """A user message of ``turn-1`` at ``sequence`` whose stored item is ``text``."""
    return AgentMessage(
        sequence=sequence, turn_id="turn-1", role=MessageRole.USER, framework_item=text
    )


def message_chunk(first: int, last: int, text: str = "{}") -> AgentMessageChunk:
    """The chunk of messages ``first`` to ``last``."""
    messages = tuple(stored_message(sequence, text) for sequence in range(first, last + 1))
    return AgentMessageChunk(first_sequence=first, last_sequence=last, messages=messages)


def message_index(*spans: tuple[int, int], size: int = 1) -> AgentMessageIndex:
    """The index of chunks spanning ``spans`` (each ``size`` bytes), the window after the last."""
    infos = tuple(
        MessageChunkInfo(
            first_sequence=a, last_sequence=b, message_count=b - a + 1, size_bytes=size
        )
        for a, b in spans
    )
    return AgentMessageIndex(chunks=infos, window_first_sequence=spans[-1][1] + 1)


class StoredMessagesState:
    """The message Attributes of a session of its own (a new ID, so its own entries in the
    process's caches); ``store`` adds window messages and ``roll_over`` moves some to a chunk."""

    def __init__(
        self,
        index: AgentMessageIndex | None,
        chunks: Iterable[AgentMessageChunk],
        window: Iterable[AgentMessage],
    ) -> None:
        self.session_id = f"session-{uuid.uuid4()}"
        self.values: dict[str, Any] = {AGENT_MESSAGE_INDEX.name: index}
        self.maps: dict[str, dict[str, Any]] = {
            AGENT_MESSAGE_CHUNKS.name: {
                message_sequence_key(chunk.first_sequence): chunk for chunk in chunks
            },
            AGENT_MESSAGES.name: {},
        }
        self.store(*window)

    def store(self, *messages: AgentMessage) -> None:
        """Put ``messages`` in the window."""
        for message in messages:
            self.maps[AGENT_MESSAGES.name][message_sequence_key(message.sequence)] = message

    def roll_over(self, index: AgentMessageIndex, chunk: AgentMessageChunk) -> None:
        """Move ``chunk``'s messages out of the window into it, under the new ``index``."""
        self.values[AGENT_MESSAGE_INDEX.name] = index
        self.maps[AGENT_MESSAGE_CHUNKS.name][message_sequence_key(chunk.first_sequence)] = chunk
        for message in chunk.messages:
            del self.maps[AGENT_MESSAGES.name][message_sequence_key(message.sequence)]

    @property
    def flow_id(self) -> str:
        return self.session_id

    def get(self, attribute: AttributeDef[T]) -> T | None:
        value: T | None = self.values.get(attribute.name)
        return value

    def get_instance(self, attribute_map: AttributeMapDef[T], key: str) -> T | None:
        value: T | None = self.maps.get(attribute_map.name, {}).get(key)
        return value

    def instance_keys(self, attribute_map: AttributeMapDef[Any]) -> tuple[str, ...]:
        return tuple(sorted(self.maps.get(attribute_map.name, {})))

    def instances(self, attribute_map: AttributeMapDef[T]) -> tuple[tuple[str, T], ...]:
        return tuple(sorted(self.maps.get(attribute_map.name, {}).items()))

    def channel_size(self, channel: ChannelDef[Any]) -> int:
        return 0

    def pending_messages(self, channel: ChannelDef[T]) -> Sequence[ChannelMessage[T]]:
        return ()
