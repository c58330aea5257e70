"""A model client that answers from a script, so an agent runs without a model key.

``ScriptedModelClient(respond)`` calls ``respond(request)`` once per model call and
turns its ``ScriptedModelReply`` into provider-exact output items of the fixed
``scripted`` provider and API: a local demo mode, a tutorial, or a test. The client
adds no randomness and reads no clock: a crashed ``RunModel`` reruns the same
request, and the same request gives the same items, tool call IDs included.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final, TypeAlias

import attrs

from dex_agents.app.builtin_loop.scripted_estimates import (
    ESTIMATED_IMAGE_INPUT_TOKENS,
    tool_tokens,
    walk_items,
)
from dex_agents.domain.canonical_json import compact_encoder, dumps
from dex_agents.domain.model_io import (
    ModelOutputItem,
    ModelRequest,
    ModelResponse,
    ModelToolCall,
    ToolResultItem,
    UserTextItem,
)
from dex_agents.domain.token_estimates import estimate_text_tokens
from dex_agents.domain.usage import AgentUsage
from dex_agents.domain.wire import to_wire
from dex_agents.ports.model_client import ModelOutputWriter

SCRIPTED_PROVIDER: Final = "scripted"
"""The ``provider`` of every output item a ``ScriptedModelClient`` returns."""

SCRIPTED_API: Final = "scripted"
"""The ``api`` of every output item a ``ScriptedModelClient`` returns."""

DEFAULT_MAX_RECORDED_REQUESTS: Final = 100
"""How many of the latest requests ``ScriptedModelClient.requests`` keeps by default."""


def _arguments_json(name: str, arguments: object) -> str:
    if isinstance(arguments, str):
        # Kept as given, so a script can send arguments that are not JSON.
        return arguments
    if not isinstance(arguments, Mapping):
        raise TypeError(
            f"arguments of scripted tool call {name!r} must be a dict or JSON text, "
            f"not {type(arguments).__name__}"
        )
    try:
        return json.dumps(dict(arguments), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise TypeError(
            f"arguments of scripted tool call {name!r} are not JSON-serializable: {error}"
        ) from error


@attrs.frozen(init=False)
class ScriptedToolCall:
    """``ScriptedToolCall(name, arguments, call_id=None)``: a tool call of a scripted reply.

    ``arguments`` is a dict, encoded as JSON, or JSON text, kept as given (text that
    is not JSON reaches the tool as the model's invalid arguments). Without a
    ``call_id`` the client derives one from the request and the call's position.
    """

    name: str
    arguments: str
    call_id: str | None

    def __init__(
        self, name: str, arguments: Mapping[str, Any] | str, call_id: str | None = None
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"scripted tool call name must be a non-empty string, not {name!r}")
        if call_id is not None and (not isinstance(call_id, str) or not call_id):
            raise ValueError(
                f"call_id of scripted tool call {name!r} must be None or a non-empty string, "
                f"not {call_id!r}"
            )
        self.__attrs_init__(name=name, arguments=_arguments_json(name, arguments), call_id=call_id)


def _tool_call_tuple(value: Iterable[ScriptedToolCall]) -> tuple[ScriptedToolCall, ...]:
    # One call given bare, or None, failed as "'ScriptedToolCall' object is not iterable".
    given: object = value
    if not isinstance(given, Iterable) or isinstance(given, str | bytes):
        raise TypeError(
            "tool_calls of a ScriptedModelReply must be a list of ScriptedToolCall values, "
            f"not {type(given).__name__}"
        )
    calls = tuple(value)
    for call in calls:
        if not isinstance(call, ScriptedToolCall):
            raise TypeError(
                f"tool_calls of a ScriptedModelReply must be ScriptedToolCall values, "
                f"not {type(call).__name__}"
            )
    return calls


@attrs.frozen(kw_only=True)
class ScriptedModelReply:
    """What a scripted model answers: ``text``, ``tool_calls`` and ``reasoning``.

    ``usage`` reports the call; without it the client estimates the call's usage
    from the request and the reply's text.
    """

    text: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(str))
    )
    tool_calls: tuple[ScriptedToolCall, ...] = attrs.field(default=(), converter=_tool_call_tuple)
    reasoning: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(str))
    )
    usage: AgentUsage | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(AgentUsage))
    )


ScriptedRespond: TypeAlias = Callable[
    [ModelRequest], "ScriptedModelReply | Awaitable[ScriptedModelReply]"
]
"""The script: a sync or async function of the ``ModelRequest`` to its reply."""


def _request_digest(request: ModelRequest) -> str:
    """A digest of the request's latest rounds, the same for the same request in any process.

    It covers the number of items and the items from the user text before the
    last one on: the same for a rerun of the same call (so a crashed ``RunModel``
    derives the same IDs), and O(turn) rather than O(history) to compute. Tool
    call IDs need only be unique within a turn, and two calls of one turn differ
    within that span even when compaction made them as long and both end with
    the same continuation text (``ContinueTurn``): each holds the round before
    that text, whose tool calls have IDs unique in the turn.
    """
    items = request.items
    user_texts = (i for i in range(len(items) - 1, -1, -1) if isinstance(items[i], UserTextItem))
    next(user_texts, None)
    start = next(user_texts, 0)
    wire_items = [[type(item).__name__, to_wire(item)] for item in items[start:]]
    text = dumps([len(items), wire_items])
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


# json.dumps(data, ensure_ascii=False, separators=(",", ":")): the items' text as stored.
_item_json = compact_encoder(sort_keys=False, ensure_ascii=False, allow_nan=True)


def _respond_name(respond: object) -> str:
    return getattr(respond, "__qualname__", None) or type(respond).__name__


class ScriptedModelClient:
    """``ScriptedModelClient(respond, *, max_recorded_requests=100)``: a ``ModelClient``
    that answers each call with ``respond(request)``, sync or async.

    Output items carry the ``scripted`` provider and API: one for the reasoning,
    one for the text, and one per tool call, in that order. Reasoning and text
    stream to the output writer as ``reasoning_delta`` and ``text_delta``.
    ``requests`` keeps the latest ``max_recorded_requests`` requests. Keep
    ``respond`` deterministic, because a crashed ``RunModel`` reruns it.
    """

    def __init__(
        self,
        respond: ScriptedRespond,
        *,
        max_recorded_requests: int = DEFAULT_MAX_RECORDED_REQUESTS,
    ) -> None:
        if not callable(respond):
            raise TypeError(f"respond must be callable, not {type(respond).__name__}")
        if isinstance(max_recorded_requests, bool) or not isinstance(max_recorded_requests, int):
            raise TypeError(
                f"max_recorded_requests must be an int, not {type(max_recorded_requests).__name__}"
            )
        if max_recorded_requests < 0:
            raise ValueError(
                f"max_recorded_requests must be at least 0, not {max_recorded_requests}"
            )
        self._respond = respond
        self._requests: deque[ModelRequest] = deque(maxlen=max_recorded_requests)

    @property
    def max_recorded_requests(self) -> int:
        """How many of the latest requests ``requests`` keeps."""
        maxlen = self._requests.maxlen
        assert maxlen is not None  # always set in __init__
        return maxlen

    @property
    def requests(self) -> list[ModelRequest]:
        """The latest ``max_recorded_requests`` requests, oldest first (a copy)."""
        return list(self._requests)

    @staticmethod
    def user_texts(request: ModelRequest) -> tuple[str, ...]:
        """The text of every ``UserTextItem`` of ``request``, in order."""
        return request.user_texts

    @staticmethod
    def tool_results(request: ModelRequest) -> tuple[ToolResultItem, ...]:
        """The tool results the model is being given now: those after the last user text."""
        results: list[ToolResultItem] = []
        # From the end: the results of this call are after the conversation's last user text.
        for item in reversed(request.items):
            if isinstance(item, UserTextItem):
                break
            if isinstance(item, ToolResultItem):
                results.append(item)
        return tuple(reversed(results))

    def supports_forced_tool_choice(self, settings: Mapping[str, Any]) -> bool:
        """A script can always call a tool, so a forced tool choice is accepted."""
        return True

    def estimate_input_tokens(self, request: ModelRequest) -> int:
        """The instructions, items, tool definitions and images of ``request``, estimated.

        Text counts as ``estimate_text_tokens``; each image counts 1600 tokens, as
        the LiteLLM client's ``ESTIMATED_IMAGE_INPUT_TOKENS``.
        """
        item_tokens, images = walk_items(request.items)
        return (
            estimate_text_tokens(request.instructions)
            + sum(tool_tokens(tool) for tool in request.tools)
            + item_tokens
            + len(images) * ESTIMATED_IMAGE_INPUT_TOKENS
        )

    async def call_model(self, request: ModelRequest, output: ModelOutputWriter) -> ModelResponse:
        """Record ``request``, ask the script, stream its text, and return its items."""
        self._requests.append(request)
        missing = sorted(
            {
                image.sha256
                for image in walk_items(request.items)[1]
                if image.sha256 not in request.image_bytes
            }
        )
        if missing:
            raise LookupError(f"image bytes missing from the model request: {', '.join(missing)}")
        result: object = self._respond(request)
        if inspect.isawaitable(result):
            result = await result
        if not isinstance(result, ScriptedModelReply):
            raise TypeError(
                f"scripted model respond function {_respond_name(self._respond)} returned "
                f"{type(result).__name__}, not a ScriptedModelReply"
            )
        if result.reasoning:
            output.write_reasoning_delta(result.reasoning)
        if result.text:
            output.write_text_delta(result.text)
        return ModelResponse(
            output=self._output_items(request, result), usage=self._usage(request, result)
        )

    def _output_items(
        self, request: ModelRequest, reply: ScriptedModelReply
    ) -> list[ModelOutputItem]:
        items: list[ModelOutputItem] = []
        if reply.reasoning:
            items.append(
                self._item(
                    {"type": "reasoning", "text": reply.reasoning}, reasoning=reply.reasoning
                )
            )
        if reply.text:
            items.append(
                self._item(
                    {"type": "message", "role": "assistant", "text": reply.text}, text=reply.text
                )
            )
        # Only a call without an ID of its own needs the derived one.
        needs_digest = any(call.call_id is None for call in reply.tool_calls)
        digest = _request_digest(request) if needs_digest else ""
        for index, call in enumerate(reply.tool_calls):
            call_id = call.call_id or f"call_{digest}_{index}"
            data = {
                "type": "tool_call",
                "call_id": call_id,
                "name": call.name,
                "arguments": call.arguments,
            }
            tool_call = ModelToolCall(
                tool_call_id=call_id, tool_name=call.name, arguments=call.arguments
            )
            items.append(self._item(data, tool_calls=(tool_call,)))
        return items

    @staticmethod
    def _item(
        data: Mapping[str, Any],
        *,
        text: str | None = None,
        reasoning: str | None = None,
        tool_calls: tuple[ModelToolCall, ...] = (),
    ) -> ModelOutputItem:
        return ModelOutputItem(
            item=_item_json(data),
            provider=SCRIPTED_PROVIDER,
            api=SCRIPTED_API,
            text=text,
            tool_calls=tool_calls,
            reasoning=reasoning,
        )

    def _usage(self, request: ModelRequest, reply: ScriptedModelReply) -> AgentUsage:
        if reply.usage is not None:
            return reply.usage
        reasoning_tokens = estimate_text_tokens(reply.reasoning or "")
        output_texts = [reply.text or ""] + [
            call.name + call.arguments for call in reply.tool_calls
        ]
        return AgentUsage(
            model_calls=1,
            input_tokens=self.estimate_input_tokens(request),
            output_tokens=sum(estimate_text_tokens(text) for text in output_texts)
            + reasoning_tokens,
            reasoning_tokens=reasoning_tokens,
        )


__all__ = [
    "DEFAULT_MAX_RECORDED_REQUESTS",
    "SCRIPTED_API",
    "SCRIPTED_PROVIDER",
    "ScriptedModelClient",
    "ScriptedModelReply",
    "ScriptedRespond",
    "ScriptedToolCall",
]
