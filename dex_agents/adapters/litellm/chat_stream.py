"""A streamed Chat Completions answer assembled into one provider-exact output item.

``ChatStreamAssembler`` takes each chunk's delta as plain values and builds the
assistant message as LiteLLM presents it: ``content``, ``tool_calls``,
Anthropic ``thinking_blocks`` with their ``signature``, OpenAI's ``refusal``,
``reasoning_content``,
and other ``provider_specific_fields`` (such as Gemini thought signatures). The
message replays unchanged to the same provider. A call whose ID the session
cannot record (none, one with ``/``, or one the conversation already has, as
providers that number their calls per answer send) gets a new ID. LiteLLM
streams a thinking block's text in pieces and then the whole block with its
signature; a ``redacted_thinking`` block arrives whole. Text and arguments
are read with a surrogate pair split across pieces joined into its character.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import attrs

from dex_agents.adapters.litellm.call_ids import recordable_call_id
from dex_agents.adapters.litellm.replay import item_json
from dex_agents.adapters.litellm.routing import CHAT_COMPLETIONS_API
from dex_agents.domain.model_io import (
    ModelOutputItem,
    ModelToolCall,
)
from dex_agents.domain.unicode_text import join_surrogate_pairs


@attrs.frozen(kw_only=True)
class ToolCallDelta:
    """A piece of one tool call: ``index`` orders the calls; later pieces add ``arguments``."""

    index: int | None
    id: str | None = None
    name: str | None = None
    arguments: str | None = None
    provider_specific_fields: Mapping[str, Any] | None = None


@attrs.define
class _ToolCall:
    id: str | None
    name: str = ""
    arguments: str = ""
    provider_specific_fields: dict[str, Any] = attrs.field(factory=dict)

    def wire(self) -> dict[str, Any]:
        call: dict[str, Any] = {
            "id": self.id,
            "type": "function",
            # A call without arguments gets an empty object, which every provider reads again.
            "function": {
                "name": self.name,
                "arguments": join_surrogate_pairs(self.arguments) or "{}",
            },
        }
        if self.provider_specific_fields:
            call["provider_specific_fields"] = self.provider_specific_fields
        return call


class ChatStreamAssembler:
    """Collects one streamed answer; ``finished`` once a chunk gave a finish reason."""

    def __init__(self) -> None:
        self._content: list[str] = []
        self._refusal: list[str] = []
        self._reasoning: list[str] = []
        self._thinking: list[str] = []
        self._blocks: list[dict[str, Any]] = []
        self._calls: list[_ToolCall] = []
        self._slots: dict[int, int] = {}
        self._provider_fields: dict[str, Any] = {}
        self.finish_reason: str | None = None

    @property
    def finished(self) -> bool:
        """Whether the provider said the answer ended."""
        return self.finish_reason is not None

    def add(
        self,
        *,
        content: str | None = None,
        refusal: str | None = None,
        reasoning: str | None = None,
        thinking_blocks: Sequence[Mapping[str, Any]] | None = None,
        tool_calls: Sequence[ToolCallDelta] = (),
        provider_specific_fields: Mapping[str, Any] | None = None,
        finish_reason: str | None = None,
    ) -> None:
        """Add one chunk's delta."""
        if content:
            self._content.append(content)
        if refusal:
            self._refusal.append(refusal)
        if reasoning:
            self._reasoning.append(reasoning)
        for block in thinking_blocks or ():
            self._add_block(block)
        for call in tool_calls:
            self._add_call(call)
        if provider_specific_fields:
            self._provider_fields.update(
                (key, value)
                for key, value in provider_specific_fields.items()
                if key != "thinking_blocks" and value is not None
            )
        if finish_reason:
            self.finish_reason = finish_reason

    def _add_block(self, block: Mapping[str, Any]) -> None:
        if block.get("type") == "thinking" and not block.get("signature"):
            self._thinking.append(str(block.get("thinking") or ""))
            return
        complete = dict(block)
        if complete.get("type") == "thinking":
            # The signed block repeats the text streamed so far; keep what streamed.
            streamed = join_surrogate_pairs("".join(self._thinking))
            complete["thinking"] = streamed or str(complete.get("thinking") or "")
        self._thinking = []
        self._blocks.append(complete)

    def _add_call(self, delta: ToolCallDelta) -> None:
        slot = self._slots.get(delta.index) if delta.index is not None else None
        call = None if slot is None else self._calls[slot]
        if call is None or (delta.id and call.id and delta.id != call.id):
            call = _ToolCall(id=delta.id)
            self._calls.append(call)
            if delta.index is not None:
                self._slots[delta.index] = len(self._calls) - 1
        if delta.id and not call.id:
            call.id = delta.id
        if delta.name and delta.name != call.name:
            # Some providers (MiniMax on NVIDIA NIM, Kimi on Fireworks) send the whole
            # name again in every chunk of the call, which read "lookuplookup".
            call.name += delta.name
        if delta.arguments:
            call.arguments += delta.arguments
        if delta.provider_specific_fields:
            call.provider_specific_fields.update(delta.provider_specific_fields)

    def message(self, taken_ids: Collection[str] = ()) -> dict[str, Any]:
        """The assistant message as LiteLLM presents it, for the same provider to read again.

        A call without an ID, with ``/`` in it, or with one of ``taken_ids`` or of an
        earlier call gets ``call_<random hex>``.
        """
        blocks = list(self._blocks)
        if self._thinking:
            thinking = join_surrogate_pairs("".join(self._thinking))
            blocks.append({"type": "thinking", "thinking": thinking})
        used: set[str] = set()
        for call in self._calls:
            call.id = recordable_call_id(call.id, used, taken_ids)
        # Pieces are joined before their surrogate pairs, which a provider may split.
        content = join_surrogate_pairs("".join(self._content))
        message: dict[str, Any] = {"role": "assistant", "content": content or None}
        if self._refusal:
            message["refusal"] = join_surrogate_pairs("".join(self._refusal))
        if self._calls:
            message["tool_calls"] = [call.wire() for call in self._calls]
        if blocks:
            message["thinking_blocks"] = blocks
        if self._reasoning:
            message["reasoning_content"] = join_surrogate_pairs("".join(self._reasoning))
        if self._provider_fields:
            message["provider_specific_fields"] = dict(self._provider_fields)
        return message

    def output_item(self, provider: str, taken_ids: Collection[str] = ()) -> ModelOutputItem:
        """The answer as one output item of ``provider``'s Chat Completions; see ``message``."""
        message = self.message(taken_ids)
        reasoning = message.get("reasoning_content") or "".join(
            str(block.get("thinking") or "") for block in message.get("thinking_blocks", ())
        )
        return ModelOutputItem(
            item=item_json(message),
            provider=provider,
            api=CHAT_COMPLETIONS_API,
            # A refusal is what the model answered, as in a Responses message's text.
            text=(message["content"] or "") + message.get("refusal", "") or None,
            tool_calls=tuple(
                ModelToolCall(
                    tool_call_id=call["id"],
                    tool_name=call["function"]["name"],
                    arguments=call["function"]["arguments"],
                )
                for call in message.get("tool_calls", ())
            ),
            reasoning=reasoning or None,
        )
