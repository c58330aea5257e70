"""What goes into and comes out of one model call of the built-in loop (``ModelClient``).

A ``ModelRequest`` carries the whole input every time: the instructions, the input
items, the offered tools, and the image bytes its items reference. User text and
tool results are provider-neutral; a model output item is provider-exact, its
``item`` the provider's JSON text, replayed unchanged to the same provider and API.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final, TypeAlias

import attrs

from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.messages import image_tuple
from dex_agents.domain.runner_outcomes import ModelCallMetadata
from dex_agents.domain.usage import AgentUsage

CONTENT_FILTER_FINISH_REASON: Final = "content_filter"
"""The finish reason of an answer that a provider's content filter stopped.

OpenAI's name, which LiteLLM gives every provider's (Anthropic's ``refusal``,
Gemini's ``SAFETY``), and OpenTelemetry's ``gen_ai.response.finish_reasons`` value.
"""

CONTENT_FILTER_TURN_ERROR: Final = (
    "the provider's content filter stopped the model's answer (finish reason content_filter)"
)
"""``last_turn_error`` of a turn whose answer the provider's content filter stopped."""

OUTPUT_LIMIT_FINISH_REASONS: Final = frozenset({"length", "max_output_tokens"})
"""Finish reasons of an answer cut at its output token limit.

Chat Completions' ``length`` (LiteLLM's name for Anthropic's ``max_tokens`` and
Gemini's ``MAX_TOKENS``) and the reason of an incomplete Responses API answer.
"""


def output_limit_turn_error(finish_reason: str) -> str:
    """``last_turn_error`` of a turn whose answer the output token limit cut before any
    text or tool call (``finish_reason`` one of ``OUTPUT_LIMIT_FINISH_REASONS``)."""
    return (
        "the model's answer reached its output token limit before any text or tool call "
        f"(finish reason {finish_reason})"
    )


def _model_tool_call_tuple(value: Iterable[ModelToolCall]) -> tuple[ModelToolCall, ...]:
    return tuple(value)


def _output_item_tuple(value: Iterable[ModelOutputItem]) -> tuple[ModelOutputItem, ...]:
    return tuple(value)


class ModelToolChoice(StrEnum):
    """Whether the model may, must, or must not call one of the offered tools."""

    AUTO = "auto"
    REQUIRED = "required"
    NONE = "none"


@attrs.frozen(kw_only=True)
class ModelToolDefinition:
    """A tool offered to the model: its name, description and JSON Schema of arguments."""

    name: str
    description: str
    parameters_schema: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ModelToolCall:
    """A tool call inside a model output item; ``arguments`` is the model's JSON text."""

    tool_call_id: str
    tool_name: str
    arguments: str


@attrs.frozen(kw_only=True)
class UserTextItem:
    """User text in the model input, provider-neutral, with the images it shows."""

    text: str
    images: tuple[AgentImageReference, ...] = attrs.field(default=(), converter=image_tuple)


@attrs.frozen(kw_only=True)
class ModelOutputItem:
    """One output item of a model response, provider-exact.

    ``item`` is the provider's JSON text: opaque fields such as encrypted reasoning
    and thinking signatures are kept byte for byte and replayed unchanged to the same
    ``provider`` and ``api``. An item from another provider or API replays as its
    ``text`` and ``tool_calls``, and its reasoning is dropped. ``reasoning`` is the
    readable reasoning summary, when the provider gave one.
    """

    item: str
    provider: str
    api: str
    text: str | None = None
    tool_calls: tuple[ModelToolCall, ...] = attrs.field(
        default=(), converter=_model_tool_call_tuple
    )
    reasoning: str | None = None


@attrs.frozen(kw_only=True)
class ToolResultItem:
    """A tool call's result in the model input, provider-neutral, with its images."""

    tool_call_id: str
    tool_name: str
    output: str
    images: tuple[AgentImageReference, ...] = attrs.field(default=(), converter=image_tuple)


ModelInputItem: TypeAlias = UserTextItem | ModelOutputItem | ToolResultItem
"""One item of the model input, in conversation order."""


@dataclass(frozen=True, kw_only=True)
class ModelRequest:
    """The whole input of one model call.

    ``image_bytes`` maps the SHA-256 of every image that ``items`` reference to its
    bytes, read right before the call; a client raises when one is missing.
    ``estimate_input_tokens`` gets requests without image bytes. ``settings`` are
    the agent's model settings, passed to the provider as they are. Lists given for
    ``items`` and ``tools`` are kept as tuples.
    """

    instructions: str
    items: tuple[ModelInputItem, ...]
    tools: tuple[ModelToolDefinition, ...] = ()
    tool_choice: ModelToolChoice = ModelToolChoice.AUTO
    # Settings may hold a provider's key, and image bytes are large: the repr leaves both out.
    settings: Mapping[str, Any] = field(default_factory=dict, repr=False)
    image_bytes: Mapping[str, bytes] = field(default_factory=dict, repr=False)
    max_output_tokens: int | None = None

    def __post_init__(self) -> None:
        # Frozen: the only way to normalize a field is object.__setattr__ in __post_init__.
        object.__setattr__(self, "items", tuple(self.items))
        object.__setattr__(self, "tools", tuple(self.tools))
        object.__setattr__(self, "tool_choice", ModelToolChoice(self.tool_choice))
        if self.max_output_tokens is not None and self.max_output_tokens < 1:
            raise ValueError(
                f"max_output_tokens must be None or at least 1, not {self.max_output_tokens}"
            )

    @property
    def user_texts(self) -> tuple[str, ...]:
        """The text of every ``UserTextItem``, in order."""
        return tuple(item.text for item in self.items if isinstance(item, UserTextItem))

    @property
    def tool_results(self) -> tuple[ToolResultItem, ...]:
        """Every ``ToolResultItem``, in order."""
        return tuple(item for item in self.items if isinstance(item, ToolResultItem))

    @property
    def image_references(self) -> tuple[AgentImageReference, ...]:
        """The images of every item that carries them, in order, repeats included."""
        # Every model call reads this over the whole conversation: a tuple of
        # types tests faster than the union.
        return tuple(
            image
            for item in self.items
            if isinstance(item, (UserTextItem, ToolResultItem))
            for image in item.images
        )


@attrs.frozen(kw_only=True)
class ModelResponse:
    """What one model call returned: its output items, in order, and its usage."""

    output: tuple[ModelOutputItem, ...] = attrs.field(converter=_output_item_tuple)
    usage: AgentUsage
    model_call_metadata: ModelCallMetadata | None = None

    @property
    def text(self) -> str:
        """The text of every output item, joined."""
        return "".join(item.text or "" for item in self.output)

    @property
    def tool_calls(self) -> tuple[ModelToolCall, ...]:
        """Every tool call of the response, in model order."""
        return tuple(call for item in self.output for call in item.tool_calls)

    @property
    def filtered(self) -> bool:
        """Whether the provider's content filter stopped the answer (``content_filter``)."""
        metadata = self.model_call_metadata
        reasons = () if metadata is None else metadata.finish_reasons or ()
        return CONTENT_FILTER_FINISH_REASON in reasons

    @property
    def stopped_error(self) -> str | None:
        """The ``last_turn_error`` of an answer without tool calls that is no answer, or ``None``.

        One the content filter stopped (``CONTENT_FILTER_TURN_ERROR``), or one the
        output token limit cut before any text (``output_limit_turn_error``): the
        user would otherwise read an empty answer as the model's.
        """
        if self.tool_calls:
            return None
        if self.filtered:
            return CONTENT_FILTER_TURN_ERROR
        metadata = self.model_call_metadata
        reasons = () if metadata is None else metadata.finish_reasons or ()
        limit = next((reason for reason in reasons if reason in OUTPUT_LIMIT_FINISH_REASONS), None)
        # Line breaks alone, as a model may send before its answer, are no text.
        if limit is None or self.text.strip():
            return None
        return output_limit_turn_error(limit)
