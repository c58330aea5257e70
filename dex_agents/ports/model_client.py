"""Model clients: the one port the built-in loop makes model calls through ("Model clients")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from dex_agents.domain.model_io import ModelRequest, ModelResponse


@runtime_checkable
class ModelOutputWriter(Protocol):
    """Where a client streams live text while a call runs.

    The runner passes the turn's ``AgentEventWriter``, which is one: the text
    becomes ``text_delta`` and ``reasoning_delta`` events. Safe to call from any
    thread; writes after ``call_model`` returns are dropped.
    """

    def write_text_delta(self, text: str) -> None:
        """A piece of the model's answer."""
        ...

    def write_reasoning_delta(self, text: str) -> None:
        """A piece of the model's reasoning summary."""
        ...


@runtime_checkable
class ModelClient(Protocol):
    """Makes one model call per ``call_model``.

    Contract:

    - One request per call, with no retries of its own: ``RunModel``'s retry
      policy repeats the call.
    - The whole input every time, with no provider-side conversation state.
    - Each output item provider-exact: ``ModelOutputItem.item`` is the provider's
      JSON text, replayed unchanged to the same provider and API.
    - Each image reference of the request's items is sent with its bytes from
      ``ModelRequest.image_bytes``; a missing entry raises.
    - ``usage`` reports this call only.
    """

    async def call_model(self, request: ModelRequest, output: ModelOutputWriter) -> ModelResponse:
        """Make the call, streaming text to ``output``, and return every output item."""
        ...

    def estimate_input_tokens(self, request: ModelRequest) -> int:
        """The input tokens of ``request``, without I/O; its ``image_bytes`` are empty."""
        ...


@runtime_checkable
class ForcedToolChoiceSupport(Protocol):
    """Optional for a ``ModelClient``: whether the model accepts a forced tool choice.

    Some models refuse ``tool_choice`` ``"required"``, such as Anthropic models with
    extended thinking; ``AgentDefinition`` checks before it plans with one.
    """

    def supports_forced_tool_choice(self, settings: Mapping[str, Any]) -> bool:
        """Whether a call with these model settings accepts a forced tool choice."""
        ...


def model_supports_forced_tool_choice(client: object, settings: Mapping[str, Any]) -> bool:
    """Ask ``client`` when it implements ``supports_forced_tool_choice``; assume ``True`` otherwise."""
    if isinstance(client, ForcedToolChoiceSupport):
        return client.supports_forced_tool_choice(settings)
    return True
