"""Reading LiteLLM's streams: text and reasoning go to the output writer as they arrive.

A stream is read to its end before anything is returned, and one that ends
without the provider finishing the answer raises ``ModelStreamInterruptedError``,
so a broken stream never leaves half an answer. The values are read by
attribute, as LiteLLM's stream objects expose them, and handed to the pure
assemblers as plain values.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterable, Collection, Coroutine, Mapping, Sequence
from typing import Any

import attrs

from dex_agents.adapters.litellm.answered_errors import (
    answered_error,
    answered_failure,
    is_retryable_kind,
)
from dex_agents.adapters.litellm.chat_stream import ChatStreamAssembler, ToolCallDelta
from dex_agents.adapters.litellm.errors import ModelProviderError, ModelStreamInterruptedError
from dex_agents.adapters.litellm.responses_output import (
    answer_items,
    provider_response_id,
    responses_finish_reasons,
    responses_output_items,
)
from dex_agents.adapters.litellm.usage import chat_completions_usage, responses_usage
from dex_agents.domain.model_io import ModelOutputItem
from dex_agents.domain.usage import AgentUsage
from dex_agents.ports.model_client import ModelOutputWriter


@attrs.frozen(kw_only=True)
class StreamedAnswer:
    """What one stream returned: the output items, usage and what names the call."""

    output: tuple[ModelOutputItem, ...]
    usage: AgentUsage
    response_model: str | None
    response_id: str | None
    """The ID the stream named the answer with, which may be LiteLLM's own (``answer_ids``)."""
    finish_reasons: tuple[str, ...]
    answer_url: str | None = None
    """The URL LiteLLM sent the request to, as its Chat Completions stream names it."""


def as_dict(value: Any, *, exclude_none: bool = False) -> dict[str, Any]:
    """A LiteLLM object (a pydantic model or a mapping) as a plain ``dict``."""
    if isinstance(value, Mapping):
        return dict(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        data = dump(mode="json", exclude_none=exclude_none)
        if isinstance(data, dict):
            return data
    raise TypeError(f"LiteLLM returned {type(value).__name__} where an object was expected")


def _failure(provider: str, error: Any, what: str) -> ModelProviderError:
    data = as_dict(error) if error is not None else {}
    code = data.get("code")
    message = data.get("message") or what
    return ModelProviderError(
        f"{provider} model call failed: {message}",
        provider=provider,
        status_code=None,
        retryable=is_retryable_kind((code,) if isinstance(code, str) and code else ()),
    )


def _event_without_type(provider: str, event: Any) -> ModelProviderError:
    """The error of a Responses event that names no ``type``: the error it holds, if any.

    LiteLLM (1.105) fails on such an event itself, with a bare
    ``AttributeError`` while it reads the type, or passes it on when its type
    is ``null``. No rule says what it means, so the call fails, naming the
    event's fields but not their values; a gateway's error chunk
    (``{"error": {...}}``) is that error (``answered_failure``).
    """
    data = dict(fields(event))
    answered = answered_error(data, in_stream=True)
    if answered is not None:
        return answered_failure(answered, provider=provider, secrets=())
    names = ", ".join(sorted(str(name) for name in data)[:_NAMED_FIELDS]) or "none"
    return ModelProviderError(
        f"{provider} model call failed: the provider sent a Responses API stream event "
        f"without a type (its fields: {names})",
        provider=provider,
        status_code=None,
        retryable=False,  # the same provider sends the same shape again
    )


_NAMED_FIELDS = 10
"""The most field names the error of an event without a type shows."""


async def close_stream(stream: object) -> None:
    """Release the connection of a stream that was not read to its end (best effort)."""
    close = getattr(stream, "aclose", None)
    if close is None:
        close = getattr(getattr(stream, "response", None), "aclose", None)
    if callable(close):
        with contextlib.suppress(Exception):
            await close()


async def _closed_on_failure(
    stream: object, reading: Coroutine[Any, Any, StreamedAnswer]
) -> StreamedAnswer:
    """What ``reading`` returns; a read that raises or is cancelled closes ``stream`` first."""
    try:
        return await reading
    except BaseException:
        await close_stream(stream)
        raise


async def read_responses_stream(
    stream: AsyncIterable[Any],
    output: ModelOutputWriter,
    provider: str,
    taken_ids: Collection[str] = (),
) -> StreamedAnswer:
    """Read a Responses API stream to its ``response.completed`` (or ``response.incomplete``).

    A tool call whose ID is one of ``taken_ids`` gets a new one (``responses_output_items``).
    """
    return await _closed_on_failure(stream, _read_responses(stream, output, provider, taken_ids))


async def read_chat_stream(
    stream: AsyncIterable[Any],
    output: ModelOutputWriter,
    provider: str,
    taken_ids: Collection[str] = (),
    refusal: Sequence[str] = (),
) -> StreamedAnswer:
    """Read a Chat Completions stream to its end; the answer needs the provider's finish reason.

    A tool call whose ID is one of ``taken_ids`` gets a new one (``ChatStreamAssembler``).
    ``refusal`` holds, once the stream has ended, the pieces of the model's refusal
    (``delta.refusal``), which LiteLLM (1.105) drops from its chunks: the body
    watch's (``BodyWatch.refusal``).
    """
    reading = _read_chat(stream, output, provider, taken_ids, refusal)
    return await _closed_on_failure(stream, reading)


async def _read_responses(
    stream: AsyncIterable[Any], output: ModelOutputWriter, provider: str, taken_ids: Collection[str]
) -> StreamedAnswer:
    done: dict[int, Any] = {}
    final: Any = None
    summary_part: tuple[object, object] | None = None
    try:
        async for event in stream:
            kind = getattr(event, "type", None)
            if not isinstance(kind, str) or not kind:
                raise _event_without_type(provider, event)
            if kind in ("response.output_text.delta", "response.refusal.delta"):
                if event.delta:
                    output.write_text_delta(event.delta)
            elif kind == "response.reasoning_summary_text.delta":
                if event.delta:
                    part = (
                        getattr(event, "output_index", None),
                        getattr(event, "summary_index", None),
                    )
                    if summary_part is not None and part != summary_part:
                        # Summary parts are paragraphs, stored joined by a blank line:
                        # streamed without it, one ran into the next ("...order.**Checking**").
                        output.write_reasoning_delta("\n\n")
                    summary_part = part
                    output.write_reasoning_delta(event.delta)
            elif kind == "response.output_item.done":
                done[event.output_index] = event.item
            elif kind in ("response.completed", "response.incomplete"):
                final = event.response
            elif kind == "response.failed":
                raise _failure(
                    provider, getattr(event.response, "error", None), "the response failed"
                )
            elif kind == "error":
                raise _failure(
                    provider,
                    {
                        "code": getattr(event, "code", None),
                        "message": getattr(event, "message", None),
                    },
                    "stream error",
                )
    except AttributeError as error:
        # LiteLLM (1.105) reads the type of each event itself before it yields it.
        if error.name != "type" or error.obj is None:
            raise
        raise _event_without_type(provider, error.obj) from error
    if final is None:
        raise ModelStreamInterruptedError(
            f"the {provider} stream ended before the response completed", provider=provider
        )
    # The done events hold each item as the provider sent it; the final response's
    # typed copy stands in for an item whose done event did not come (answer_items).
    items = answer_items(
        {index: as_dict(item) for index, item in done.items()},
        [as_dict(item, exclude_none=True) for item in final.output or ()],
    )
    usage = final.usage
    incomplete = getattr(final, "incomplete_details", None)
    return StreamedAnswer(
        output=responses_output_items(items, provider, taken_ids),
        usage=responses_usage(None if usage is None else as_dict(usage)),
        response_model=getattr(final, "model", None),
        response_id=provider_response_id(getattr(final, "id", None)),
        finish_reasons=responses_finish_reasons(
            getattr(final, "status", None),
            None if incomplete is None else as_dict(incomplete).get("reason"),
        ),
    )


def fields(value: Any) -> Mapping[str, Any]:
    """The attributes a LiteLLM object has, read without ``getattr``.

    LiteLLM deletes the optional fields a chunk lacks, and pydantic's missing
    attribute path costs microseconds on every chunk; its instance ``__dict__``
    and ``__pydantic_extra__`` hold every field that is there.
    """
    try:
        values: dict[str, Any] = value.__dict__
    except AttributeError:
        return value if isinstance(value, Mapping) else {}
    extra = getattr(value, "__pydantic_extra__", None)
    return {**values, **extra} if extra else values


def provider_response_model(chunk: Any) -> str | None:
    """The model the provider's chunk named, as LiteLLM keeps it, or ``None``.

    LiteLLM's stream wrapper (1.105) names every chunk after the model it was asked
    for (Azure's after the deployment); the provider's own name is left in the
    chunk's ``_hidden_params`` (``provider_response_model``).
    """
    hidden = getattr(chunk, "_hidden_params", None)
    model = hidden.get("provider_response_model") if isinstance(hidden, Mapping) else None
    return model if isinstance(model, str) and model else None


def answer_url(chunk: Any) -> str | None:
    """The URL LiteLLM sent the request to, as it keeps it on each chunk, or ``None``.

    LiteLLM (1.105) may send one model's requests to different APIs, request by
    request (Bedrock's Converse or its native Chat Completions); the chunk's
    ``_hidden_params["api_base"]`` is the URL of the one that answered.
    """
    hidden = getattr(chunk, "_hidden_params", None)
    url = hidden.get("api_base") if isinstance(hidden, Mapping) else None
    return url if isinstance(url, str) and url else None


def _tool_call_deltas(calls: Any) -> list[ToolCallDelta]:
    deltas = []
    for call in calls:
        call_fields = fields(call)
        function = fields(call_fields.get("function") or {})
        deltas.append(
            ToolCallDelta(
                index=call_fields.get("index"),
                id=call_fields.get("id"),
                name=function.get("name"),
                arguments=function.get("arguments"),
                provider_specific_fields=call_fields.get("provider_specific_fields"),
            )
        )
    return deltas


async def _read_chat(
    stream: AsyncIterable[Any],
    output: ModelOutputWriter,
    provider: str,
    taken_ids: Collection[str],
    refusal: Sequence[str],
) -> StreamedAnswer:
    assembler = ChatStreamAssembler()
    usage: Any = None
    response_id: str | None = None
    intermittent: str | None = None
    response_model: str | None = None
    url: str | None = None
    async for chunk in stream:
        # The same on every chunk that has it: read until one has.
        response_model = response_model or provider_response_model(chunk)
        url = url or answer_url(chunk)
        # Gemini's (and Vertex AI's) finish reason is kept only here, as LiteLLM reads
        # their streams to the end, and a later chunk (usage alone) clears it.
        intermittent = intermittent or getattr(stream, "intermittent_finish_reason", None)
        chunk_fields = fields(chunk)
        response_id = chunk_fields.get("id") or response_id
        usage = chunk_fields.get("usage") or usage
        for choice in chunk_fields.get("choices") or ():
            choice_fields = fields(choice)
            # LiteLLM reads a choice without an index as None: a provider's one answer.
            if (choice_fields.get("index") or 0) != 0:
                continue
            delta = fields(choice_fields.get("delta") or {})
            content = delta.get("content")
            reasoning = delta.get("reasoning_content")
            if reasoning:
                output.write_reasoning_delta(reasoning)
            if content:
                output.write_text_delta(content)
            calls = delta.get("tool_calls")
            assembler.add(
                content=content,
                reasoning=reasoning,
                thinking_blocks=delta.get("thinking_blocks"),
                tool_calls=_tool_call_deltas(calls) if calls else (),
                provider_specific_fields=delta.get("provider_specific_fields"),
                finish_reason=choice_fields.get("finish_reason"),
            )
    refused = "".join(refusal)
    if refused:
        output.write_text_delta(refused)
        assembler.add(refusal=refused)
    # LiteLLM ends a stream that stopped early with a finish reason of its own;
    # its stream wrapper keeps whether the provider sent one, as received or, for
    # Gemini, as intermittent: without that every Gemini answer was refused.
    provider_finished = getattr(stream, "received_finish_reason", assembler.finish_reason)
    provider_finished = (
        provider_finished or intermittent or getattr(stream, "intermittent_finish_reason", None)
    )
    if not assembler.finished or provider_finished is None:
        raise ModelStreamInterruptedError(
            f"the {provider} stream ended before the answer finished", provider=provider
        )
    assert assembler.finish_reason is not None
    return StreamedAnswer(
        output=(assembler.output_item(provider, taken_ids),),
        usage=chat_completions_usage(None if usage is None else as_dict(usage)),
        response_model=response_model,
        response_id=response_id,
        finish_reasons=(assembler.finish_reason,),
        answer_url=url,
    )
