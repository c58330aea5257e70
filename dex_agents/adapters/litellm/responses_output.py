"""Responses API output as ``ModelOutputItem`` values, one per output item.

Each item is kept as the provider sent it (its ``response.output_item.done``
JSON), so a reasoning item's ``encrypted_content`` replays byte for byte. A
``message`` item's ``output_text`` and ``refusal`` parts are its ``text``
(``message_text``), a ``function_call`` item is one tool call (with ``{}`` for
empty arguments), and a
``reasoning`` item's summary texts are its ``reasoning``; a call ID the session
cannot record is replaced, as for Chat Completions. LiteLLM rewrites
response IDs to carry its routing; the provider's own ID is read back out of them.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final

from dex_agents.adapters.litellm.call_ids import recordable_call_id
from dex_agents.adapters.litellm.replay import item_json
from dex_agents.adapters.litellm.routing import RESPONSES_API
from dex_agents.domain.model_io import ModelOutputItem, ModelToolCall

_LITELLM_ID_PREFIX: Final = "resp_"
_LITELLM_ID_FIELD: Final = "response_id:"
_MESSAGE_TEXT_FIELDS: Final = {"output_text": "text", "refusal": "refusal"}


def _texts(parts: object, kind: str) -> list[str]:
    if not isinstance(parts, Sequence) or isinstance(parts, str):
        return []
    return [
        part["text"]
        for part in parts
        if isinstance(part, Mapping)
        and part.get("type") == kind
        and isinstance(part.get("text"), str)
    ]


def message_text(content: object) -> str | None:
    """The text of a ``message`` item's ``content``: its ``output_text`` and ``refusal`` parts.

    A refusal is what the model answered; without it the user would read an
    empty answer and another provider would see none.
    """
    if not isinstance(content, Sequence) or isinstance(content, str):
        return None
    texts = []
    for part in content:
        if not isinstance(part, Mapping):
            continue
        field = _MESSAGE_TEXT_FIELDS.get(str(part.get("type")))
        text = part.get(field) if field else None
        if isinstance(text, str):
            texts.append(text)
    return "".join(texts) or None


def responses_output_item(data: Mapping[str, Any], provider: str) -> ModelOutputItem:
    """One output item of the Responses API, provider-exact."""
    kind = data.get("type")
    text: str | None = None
    reasoning: str | None = None
    calls: tuple[ModelToolCall, ...] = ()
    if kind == "message":
        text = message_text(data.get("content"))
    elif kind == "reasoning":
        reasoning = "\n\n".join(_texts(data.get("summary"), "summary_text")) or None
    elif kind == "function_call":
        calls = (
            ModelToolCall(
                tool_call_id=str(data["call_id"]),
                tool_name=str(data["name"]),
                # A call without arguments reads as the empty object, as on Chat
                # Completions: "" is not JSON, and the tool would fail on it.
                arguments=str(data.get("arguments") or "{}"),
            ),
        )
    return ModelOutputItem(
        item=item_json(data),
        provider=provider,
        api=RESPONSES_API,
        text=text,
        tool_calls=calls,
        reasoning=reasoning,
    )


def _text_field(item: Mapping[str, Any], name: str) -> str | None:
    value = item.get(name)
    return value if isinstance(value, str) and value else None


def _matches(
    streamed: Mapping[int, Mapping[str, Any]], final: Sequence[Mapping[str, Any]]
) -> dict[int, int]:
    """The streamed item each item of ``final`` is, by their positions; each at most once.

    First by ``id``, then by ``call_id`` (a call either lists without its
    ``id``), each of the same type, in order where several share one; then, for
    an item still unmatched, the one at its index, of its type, when either has
    no ``id`` and no other item claimed it.
    """
    matches: dict[int, int] = {}
    used: set[int] = set()
    for field in ("id", "call_id"):
        unclaimed: dict[tuple[object, str], list[int]] = {}
        for index in sorted(streamed):
            value = _text_field(streamed[index], field)
            if value is not None and index not in used:
                unclaimed.setdefault((streamed[index].get("type"), value), []).append(index)
        for position, item in enumerate(final):
            value = _text_field(item, field)
            candidates = None if value is None else unclaimed.get((item.get("type"), value))
            if position not in matches and candidates:
                matches[position] = candidates.pop(0)
                used.add(matches[position])
    for position, item in enumerate(final):
        other = streamed.get(position)
        if (
            position not in matches
            and other is not None
            and position not in used
            and other.get("type") == item.get("type")
            and (_text_field(item, "id") is None or _text_field(other, "id") is None)
        ):
            matches[position] = position
            used.add(position)
    return matches


def answer_items(
    streamed: Mapping[int, Mapping[str, Any]], final: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """The answer's items: each item of the completed response, as streamed where it was.

    ``streamed`` holds the items of the ``response.output_item.done`` events by
    their ``output_index``, as the provider sent them; ``final`` the completed
    response's ``output``, a typed copy. An item of ``final`` is the streamed
    item it matches (``_matches``), else itself. A streamed item ``final`` does
    not list (all of them, for an empty ``output``, as ChatGPT's Codex endpoint
    and some gateways send it) keeps its place among the streamed ones: before
    the first matched item streamed after it, else at the end. LiteLLM (1.105),
    answering the Responses API from another provider's Chat Completions,
    streams the items from index 1 and lists them from 0: matched by index
    alone, a call was there twice.
    """
    matches = _matches(streamed, final)
    matched = set(matches.values())
    unlisted = [index for index in sorted(streamed) if index not in matched]
    items: list[Mapping[str, Any]] = []
    for position, item in enumerate(final):
        match = matches.get(position)
        if match is None:
            items.append(item)
            continue
        while unlisted and unlisted[0] < match:
            items.append(streamed[unlisted.pop(0)])
        items.append(streamed[match])
    items.extend(streamed[index] for index in unlisted)
    return items


def responses_output_items(
    items: Sequence[Mapping[str, Any]], provider: str, taken_ids: Collection[str] = ()
) -> tuple[ModelOutputItem, ...]:
    """Every output item, in output order.

    A ``function_call`` without a ``call_id``, with ``/`` in it, or with one of
    ``taken_ids`` or of an earlier call gets ``call_<random hex>``.
    """
    used: set[str] = set()
    output = []
    for item in items:
        if item.get("type") == "function_call":
            # LiteLLM bridges other providers' calls into this API with their IDs.
            call_id = recordable_call_id(item.get("call_id"), used, taken_ids)
            if call_id != item.get("call_id"):
                item = {**item, "call_id": call_id}
        output.append(responses_output_item(item, provider))
    return tuple(output)


def provider_response_id(response_id: str | None) -> str | None:
    """The provider's response ID inside LiteLLM's routing ID, else the ID as it is.

    LiteLLM returns ``resp_<base64 of "litellm:...;response_id:<id>">``.
    """
    if not response_id or not response_id.startswith(_LITELLM_ID_PREFIX):
        return response_id
    encoded = response_id[len(_LITELLM_ID_PREFIX) :]
    try:
        decoded = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return response_id
    if not decoded.startswith("litellm:"):
        return response_id
    for field in decoded.split(";"):
        if field.startswith(_LITELLM_ID_FIELD):
            return field[len(_LITELLM_ID_FIELD) :] or response_id
    return response_id


def responses_finish_reasons(status: str | None, incomplete_reason: str | None) -> tuple[str, ...]:
    """``(status,)`` of a completed response, or the reason an incomplete one stopped."""
    if status == "incomplete" and incomplete_reason:
        return (incomplete_reason,)
    return (status,) if status else ()
