"""Messages: what a runner returns, what the session stores, and what a user sends."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from enum import StrEnum

import attrs

from dex_agents.domain.images import AgentImageReference


class MessageRole(StrEnum):
    """Who a stored message is from."""

    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


def _message_role(value: MessageRole | str) -> MessageRole:
    # A member as it is, by its type: calling the enum class on Python 3.11 runs
    # EnumType.__call__ and its slow attribute hook, about three times the instructions,
    # and a turn builds this value's fields several times.
    return value if type(value) is MessageRole else MessageRole(value)


def image_tuple(value: Iterable[AgentImageReference]) -> tuple[AgentImageReference, ...]:
    """Convert any iterable of image references to the tuple a frozen value holds."""
    return tuple(value)


@attrs.frozen(kw_only=True)
class FrameworkMessage:
    """A message as a runner builds it, before the session gives it a sequence.

    ``framework_item`` is the framework's own replay data (opaque JSON text); ``text``
    and the ``tool_*`` fields are the provider-neutral projection that snapshots,
    spans and notes read.
    """

    role: MessageRole = attrs.field(converter=_message_role)
    framework_item: str
    text: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    tool_arguments: str | None = None
    tool_output: str | None = None
    images: tuple[AgentImageReference, ...] = attrs.field(default=(), converter=image_tuple)


@attrs.frozen(kw_only=True)
class AgentMessage:
    """A stored message of the session, numbered by ``sequence`` from 1."""

    sequence: int
    turn_id: str
    role: MessageRole = attrs.field(converter=_message_role)
    framework_item: str
    text: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    tool_arguments: str | None = None
    tool_output: str | None = None
    images: tuple[AgentImageReference, ...] = attrs.field(default=(), converter=image_tuple)
    created_at: datetime | None = None

    @classmethod
    def from_framework_message(
        cls,
        message: FrameworkMessage,
        *,
        sequence: int,
        turn_id: str,
        created_at: datetime | None = None,
    ) -> AgentMessage:
        """Number a runner's message for storage."""
        return cls(
            sequence=sequence,
            turn_id=turn_id,
            role=message.role,
            framework_item=message.framework_item,
            text=message.text,
            tool_call_id=message.tool_call_id,
            tool_name=message.tool_name,
            tool_arguments=message.tool_arguments,
            tool_output=message.tool_output,
            images=message.images,
            created_at=created_at,
        )


@attrs.frozen(kw_only=True)
class AgentUserMessage:
    """A user message sent to a session (the ``QueuedUserMessages`` Channel value)."""

    text: str
    plan_mode: bool = False
    images: tuple[AgentImageReference, ...] = attrs.field(default=(), converter=image_tuple)


@attrs.frozen(kw_only=True)
class QueuedUserMessage:
    """A queued or steered user message as a snapshot lists it, with its Channel message ID."""

    message_id: str
    text: str
    plan_mode: bool = False
    images: tuple[AgentImageReference, ...] = attrs.field(default=(), converter=image_tuple)
