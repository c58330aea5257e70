"""Streams as the providers send them, for ``ProviderServer`` to answer with.

``responses_stream`` speaks the OpenAI Responses API streaming events,
``chat_stream`` OpenAI Chat Completions chunks, ``anthropic_stream`` the
Anthropic Messages streaming events, and ``gemini_stream`` the Gemini API's
``streamGenerateContent`` chunks. Text streams in word-sized pieces, so a
test can see several deltas.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from tests.adapters.litellm.provider_server import Reply, json_reply, sse_reply

Event = tuple[str | None, Any]


def pieces(text: str) -> list[str]:
    """``text`` in word-sized pieces that join back to it."""
    return re.findall(r"\S+\s*|\s+", text) or [text]


# ---------------------------------------------------------------------------
# OpenAI Responses API


def reasoning_item(item_id: str, summary: str, encrypted: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": summary}],
        "encrypted_content": encrypted,
    }


def message_item(item_id: str, text: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def refusal_item(item_id: str, refusal: str) -> dict[str, Any]:
    """A message whose only part is a refusal, as OpenAI refuses a request."""
    return {
        "id": item_id,
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "refusal", "refusal": refusal}],
    }


def function_call_item(item_id: str, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "function_call",
        "status": "completed",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }


RESPONSES_USAGE: Mapping[str, Any] = {
    "input_tokens": 120,
    "input_tokens_details": {"cached_tokens": 20},
    "output_tokens": 30,
    "output_tokens_details": {"reasoning_tokens": 12},
    "total_tokens": 150,
}


def responses_stream(
    items: Sequence[Mapping[str, Any]],
    *,
    response_id: str = "resp_1",
    model: str = "gpt-5-mini-2025-08-07",
    usage: Mapping[str, Any] = RESPONSES_USAGE,
) -> list[Event]:
    """The events of a response whose output is ``items``, ending in ``response.completed``."""
    response = {
        "id": response_id,
        "object": "response",
        "created_at": 1_700_000_000,
        "status": "in_progress",
        "model": model,
        "output": [],
    }
    events: list[Event] = []

    def add(kind: str, **fields: Any) -> None:
        events.append((kind, {"type": kind, "sequence_number": len(events), **fields}))

    add("response.created", response=response)
    for index, item in enumerate(items):
        add(
            "response.output_item.added",
            output_index=index,
            item={**item, "summary": []} if item["type"] == "reasoning" else item,
        )
        if item["type"] == "reasoning":
            for summary_index, part in enumerate(item["summary"]):
                for piece in pieces(part["text"]):
                    add(
                        "response.reasoning_summary_text.delta",
                        item_id=item["id"],
                        output_index=index,
                        summary_index=summary_index,
                        delta=piece,
                    )
        elif item["type"] == "message":
            part = item["content"][0]
            refused = part["type"] == "refusal"
            for piece in pieces(part["refusal"] if refused else part["text"]):
                add(
                    "response.refusal.delta" if refused else "response.output_text.delta",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    delta=piece,
                )
        add("response.output_item.done", output_index=index, item=item)
    add(
        "response.completed",
        response={**response, "status": "completed", "output": list(items), "usage": dict(usage)},
    )
    return events


def responses_reply(items: Sequence[Mapping[str, Any]], **options: Any) -> Reply:
    return sse_reply(responses_stream(items, **options))


def incomplete_responses_reply(items: Sequence[Mapping[str, Any]], reason: str) -> Reply:
    """``responses_stream(items)`` ending in ``response.incomplete`` for ``reason``
    (``max_output_tokens``, ``content_filter``) in place of ``response.completed``."""
    events = responses_stream(items)
    _, last = events[-1]
    response = {**last["response"], "status": "incomplete"}
    response["incomplete_details"] = {"reason": reason}
    events[-1] = (
        "response.incomplete",
        {**last, "type": "response.incomplete", "response": response},
    )
    return sse_reply(events)


# ---------------------------------------------------------------------------
# OpenAI Chat Completions


CHAT_USAGE: Mapping[str, Any] = {
    "prompt_tokens": 80,
    "completion_tokens": 9,
    "total_tokens": 89,
    "prompt_tokens_details": {"cached_tokens": 16},
}


def chat_stream(
    text: str | None = None,
    tool_calls: Sequence[tuple[str, str, str]] = (),
    *,
    model: str = "gpt-4.1-2025-04-14",
    usage: Mapping[str, Any] = CHAT_USAGE,
) -> list[Event]:
    """Chunks of an answer with ``text`` and ``(id, name, arguments)`` tool calls, then ``[DONE]``."""

    def chunk(delta: Mapping[str, Any] | None, finish: str | None = None) -> Event:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
        data: dict[str, Any] = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": model,
            "choices": choices,
        }
        if delta is None:
            data["usage"] = dict(usage)
        return (None, data)

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": piece}) for piece in pieces(text)] if text else []
    for index, (call_id, name, arguments) in enumerate(tool_calls):
        start = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        events.append(chunk({"tool_calls": [start]}))
        half = len(arguments) // 2
        for part in (arguments[:half], arguments[half:]):
            events.append(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
            )
    events.append(chunk({}, "tool_calls" if tool_calls else "stop"))
    events.append(chunk(None))
    events.append((None, "[DONE]"))
    return events


def chat_reply(text: str | None = None, tool_calls: Sequence[tuple[str, str, str]] = ()) -> Reply:
    return sse_reply(chat_stream(text, tool_calls))


def chat_reply_finishing(text: str | None, finish_reason: str) -> Reply:
    """``chat_reply(text)`` whose last choice ends with ``finish_reason``, not ``stop``."""
    events: list[Event] = []
    for name, data in chat_stream(text):
        choices = data["choices"] if isinstance(data, dict) else []
        if choices and choices[0]["finish_reason"] == "stop":
            data = {**data, "choices": [{**choices[0], "finish_reason": finish_reason}]}
        events.append((name, data))
    return sse_reply(events)


def openai_error(status: int, message: str, code: str | None = None) -> Reply:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return json_reply(status, {"error": {"message": message, "type": kind, "code": code}})


# ---------------------------------------------------------------------------
# Anthropic Messages


ANTHROPIC_USAGE: Mapping[str, Any] = {
    "input_tokens": 50,
    "output_tokens": 1,
    "cache_read_input_tokens": 10,
    "cache_creation_input_tokens": 0,
}


def anthropic_stream(
    blocks: Sequence[Mapping[str, Any]],
    *,
    stop_reason: str | None = None,
    model: str = "claude-sonnet-4-5-20250929",
    output_tokens: int = 25,
) -> list[Event]:
    """The events of a message whose content is ``blocks``, ending in ``message_stop``."""
    events: list[Event] = []

    def add(kind: str, **fields: Any) -> None:
        events.append((kind, {"type": kind, **fields}))

    add(
        "message_start",
        message={
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": dict(ANTHROPIC_USAGE),
        },
    )
    for index, block in enumerate(blocks):
        kind = block["type"]
        if kind == "thinking":
            add(
                "content_block_start",
                index=index,
                content_block={"type": "thinking", "thinking": "", "signature": ""},
            )
            for piece in pieces(block["thinking"]):
                add(
                    "content_block_delta",
                    index=index,
                    delta={"type": "thinking_delta", "thinking": piece},
                )
            add(
                "content_block_delta",
                index=index,
                delta={"type": "signature_delta", "signature": block["signature"]},
            )
        elif kind == "redacted_thinking":
            add("content_block_start", index=index, content_block=dict(block))
        elif kind == "text":
            add("content_block_start", index=index, content_block={"type": "text", "text": ""})
            for piece in pieces(block["text"]):
                add("content_block_delta", index=index, delta={"type": "text_delta", "text": piece})
        elif kind == "tool_use":
            add(
                "content_block_start",
                index=index,
                content_block={
                    "type": "tool_use",
                    "id": block["id"],
                    "name": block["name"],
                    "input": {},
                },
            )
            add(
                "content_block_delta",
                index=index,
                delta={"type": "input_json_delta", "partial_json": json.dumps(block["input"])},
            )
        add("content_block_stop", index=index)
    stop = stop_reason or (
        "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    )
    add(
        "message_delta",
        delta={"stop_reason": stop, "stop_sequence": None},
        usage={"output_tokens": output_tokens},
    )
    add("message_stop")
    return events


def anthropic_reply(blocks: Sequence[Mapping[str, Any]], **options: Any) -> Reply:
    return sse_reply(anthropic_stream(blocks, **options))


def anthropic_error(status: int, kind: str, message: str) -> Reply:
    return json_reply(status, {"type": "error", "error": {"type": kind, "message": message}})


# ---------------------------------------------------------------------------
# Gemini API


def gemini_stream(
    parts: Sequence[Mapping[str, Any]], *, model: str = "gemini-3-pro-preview"
) -> list[Event]:
    """``streamGenerateContent`` chunks of an answer whose content is ``parts``.

    A text part streams in word-sized pieces; the last chunk carries the finish
    reason and the usage, as Gemini sends them.
    """
    chunks: list[dict[str, Any]] = []
    for part in parts:
        if "text" in part:
            chunks += [{**part, "text": piece} for piece in pieces(part["text"])]
        else:
            chunks.append(dict(part))
    events: list[Event] = []
    for index, part in enumerate(chunks):
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": [part]}, "index": 0}
        data: dict[str, Any] = {"candidates": [candidate], "modelVersion": model}
        if index == len(chunks) - 1:
            candidate["finishReason"] = "STOP"
            data["usageMetadata"] = {
                "promptTokenCount": 40,
                "candidatesTokenCount": 12,
                "totalTokenCount": 52,
            }
        events.append((None, data))
    return events


def gemini_reply(parts: Sequence[Mapping[str, Any]]) -> Reply:
    return sse_reply(gemini_stream(parts))
