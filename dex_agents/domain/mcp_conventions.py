"""The pure rules of MCP tool calls: the Dex MCP conventions, result outcomes and tasks.

"MCP tools (dex_agents.mcp)": the Dex ``_meta`` keys; a ``tools/call`` result or
JSON-RPC error maps to one recorded outcome, the Dex ``outcome`` key first; a result's
content becomes one text; a task's next poll interval and its input requests follow
fixed rules. A listed tool's effect is ``classify_mcp_tool_effect`` in
``dex_agents.domain.tool_declarations``. The MCP adapter does the I/O; both cores
follow these rules, which ``conformance/mcp_dex_conventions.json`` fixes case by case.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

import attrs

from dex_agents.domain.interrupts import QuestionAnswer, QuestionResolution
from dex_agents.domain.tool_effects import ToolEffect

TOOL_EFFECT_META_KEY = "io.superdurable.dex/effect"
"""Tool definition ``_meta`` key that declares a tool's effect."""

TOOL_APPROVAL_META_KEY = "io.superdurable.dex/approval"
"""Tool definition ``_meta`` key whose value ``recommended`` asks for approval."""

TOOL_OUTCOME_META_KEY = "io.superdurable.dex/outcome"
"""Result ``_meta`` (or ``error.data._meta``) key that reports ``unknown`` or ``rejected``."""

IDEMPOTENCY_KEY_META_KEY = "io.superdurable.dex/idempotencyKey"
"""Request ``_meta`` key of the session's idempotency key ``<flowId>/<turnId>/<toolCallId>``."""

APPROVAL_RECOMMENDED = "recommended"
"""The one known value of ``TOOL_APPROVAL_META_KEY``."""

DECLARABLE_EFFECTS = (ToolEffect.READ, ToolEffect.IDEMPOTENT_WRITE, ToolEffect.NON_IDEMPOTENT_WRITE)
"""The effects a tool may declare; ``unclassified`` is not one of them."""

MCP_RESULT_WITHOUT_TEXT = "The MCP tool returned no text."
"""The text of a result whose content gives no text."""

MCP_INTERRUPTED_ERROR_CODES = (-32603, -32700)
"""JSON-RPC codes that may come after the server ran the call: internal error and parse error."""


def _json_text(value: object) -> str:
    # The project's canonical JSON (compact, sorted keys, non-ASCII unescaped); a
    # server's odd value, such as NaN, still gets a text rather than an exception.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=str)


def _meta(value: object) -> Mapping[str, Any]:
    if isinstance(value, Mapping):
        meta = value.get("_meta")
        if isinstance(meta, Mapping):
            return meta
    return {}


def mcp_image_placeholder(number: int, *, omitted: bool) -> str:
    """The text that stands for the ``number``-th image of a result, counting from 1."""
    return f"[image {number} omitted]" if omitted else f"[image {number}]"


def mcp_content_text(content: object, *, images_uploaded: bool) -> str:
    """The text of a result's ``content``: its blocks joined with newlines.

    A ``text`` block gives its text; an ``image`` block gives ``[image <n>]`` when the
    images were uploaded and ``[image <n> omitted]`` otherwise, counting images from 1;
    any other block gives its compact JSON with sorted keys and non-ASCII unescaped.
    Content that gives no text, such as none at all, gives ``MCP_RESULT_WITHOUT_TEXT``.
    """
    blocks = content if isinstance(content, Sequence) and not isinstance(content, str) else ()
    parts: list[str] = []
    images = 0
    for block in blocks:
        kind = block.get("type") if isinstance(block, Mapping) else None
        block_text = block.get("text") if isinstance(block, Mapping) else None
        if kind == "text" and isinstance(block_text, str):
            parts.append(block_text)
        elif kind == "image":
            images += 1
            parts.append(mcp_image_placeholder(images, omitted=not images_uploaded))
        else:
            parts.append(_json_text(block))
    text = "\n".join(parts)
    return text if text else MCP_RESULT_WITHOUT_TEXT


class McpCallOutcomeKind(StrEnum):
    """What a ``tools/call`` answer records.

    ``interrupted`` is a Step failure (``McpToolCallInterruptedError``): ``read`` and
    ``idempotent_write`` calls send the request again, other effects record
    ``outcome_unknown``.
    """

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    OUTCOME_UNKNOWN = "outcome_unknown"
    INTERRUPTED = "interrupted"


@attrs.frozen(kw_only=True)
class McpCallOutcome:
    """The outcome of one ``tools/call`` answer: its kind, its text, and warnings to log.

    ``text`` is the output of a success and the error otherwise.
    """

    kind: McpCallOutcomeKind = attrs.field(converter=McpCallOutcomeKind)
    text: str
    warnings: tuple[str, ...] = ()


def _declared_outcome(meta: Mapping[str, Any]) -> tuple[McpCallOutcomeKind | None, tuple[str, ...]]:
    if TOOL_OUTCOME_META_KEY not in meta:
        return None, ()
    value = meta[TOOL_OUTCOME_META_KEY]
    if value == "unknown":
        return McpCallOutcomeKind.OUTCOME_UNKNOWN, ()
    if value == "rejected":
        return McpCallOutcomeKind.FAILED, ()
    return None, (f"ignoring the reserved {TOOL_OUTCOME_META_KEY} value {value!r}",)


def classify_mcp_tool_result(
    result: Mapping[str, Any], *, uploads_images: bool = False
) -> McpCallOutcome:
    """Classify a ``tools/call`` result, or a task's completed result.

    The Dex ``outcome`` key wins over ``isError``: ``unknown`` records
    ``outcome_unknown`` and ``rejected`` records ``failed``, each with the result's
    text; other values are reserved, ignored with a warning. Without the key,
    ``isError: true`` records ``failed`` and anything else ``succeeded``. The text
    shows ``[image <n>]`` only for a success of a source that uploads images
    (``uploads_images``), and ``[image <n> omitted]`` otherwise.
    """
    kind, warnings = _declared_outcome(_meta(result))
    if kind is None:
        failed = result.get("isError") is True
        kind = McpCallOutcomeKind.FAILED if failed else McpCallOutcomeKind.SUCCEEDED
    uploaded = uploads_images and kind is McpCallOutcomeKind.SUCCEEDED
    text = mcp_content_text(result.get("content"), images_uploaded=uploaded)
    return McpCallOutcome(kind=kind, text=text, warnings=warnings)


def mcp_error_text(code: object, message: object) -> str:
    """``MCP error <code>: <message>``, the text of a JSON-RPC error response."""
    code_text = (
        str(code) if isinstance(code, int) and not isinstance(code, bool) else _json_text(code)
    )
    message_text = message if isinstance(message, str) else _json_text(message)
    return f"MCP error {code_text}: {message_text}"


def classify_mcp_error_response(error: Mapping[str, Any]) -> McpCallOutcome:
    """Classify the ``error`` object of a JSON-RPC error response to ``tools/call``.

    The Dex ``outcome`` key in ``error.data._meta`` wins over the code, so an internal
    error with the key is not re-issued. Without it, an internal error (``-32603``) or
    a parse error (``-32700``, a body that is not JSON-RPC, which a gateway can return
    after the server ran the call) is ``interrupted``, and any other code ``failed``.
    The text is always ``MCP error <code>: <message>``.
    """
    code = error.get("code")
    text = mcp_error_text(code, error.get("message"))
    kind, warnings = _declared_outcome(_meta(error.get("data")))
    if kind is None:
        interrupted = code in MCP_INTERRUPTED_ERROR_CODES and not isinstance(code, bool)
        kind = McpCallOutcomeKind.INTERRUPTED if interrupted else McpCallOutcomeKind.FAILED
    return McpCallOutcome(kind=kind, text=text, warnings=warnings)


MCP_TASK_FIRST_POLL_INTERVAL_SECONDS = 1
"""The first poll interval of a task whose server suggests none, or a shorter one."""

MCP_TASK_MAX_BACKOFF_SECONDS = 60
"""Doubling stops at a minute; only the server's own ``pollIntervalMs`` can ask for more."""

MCP_TASK_MAX_POLL_INTERVAL_SECONDS = 24 * 60 * 60
"""A poll interval is at most a day, as ``PollToolTask`` rounds it."""


def next_mcp_task_poll_interval(previous_seconds: int | None, poll_interval_ms: object) -> int:
    """The seconds until the next ``tasks/get`` of an MCP task.

    The server's ``pollIntervalMs`` rounded up to whole seconds, or, when that is
    shorter, double ``previous_seconds`` up to a minute: ``max(server, min(2 *
    previous, 60))``. The first interval (``previous_seconds`` ``None``) is the
    server's, or 1 second when it is shorter or missing. A ``pollIntervalMs`` that is
    not a finite number of at least 0 counts as missing. The result is clamped to 1
    second through a day.
    """
    if previous_seconds is not None and (
        isinstance(previous_seconds, bool)
        or not isinstance(previous_seconds, int)
        or previous_seconds < 1
    ):
        raise ValueError(
            f"previous_seconds must be a whole number of at least 1, not {previous_seconds!r}"
        )
    if previous_seconds is None:
        backoff = MCP_TASK_FIRST_POLL_INTERVAL_SECONDS
    else:
        backoff = min(2 * previous_seconds, MCP_TASK_MAX_BACKOFF_SECONDS)
    server: int | None = None
    if isinstance(poll_interval_ms, int) and not isinstance(poll_interval_ms, bool):
        server = -(-poll_interval_ms // 1000) if poll_interval_ms >= 0 else None
    elif isinstance(poll_interval_ms, float) and math.isfinite(poll_interval_ms):
        server = math.ceil(poll_interval_ms / 1000) if poll_interval_ms >= 0 else None
    interval = backoff if server is None else max(server, backoff)
    return max(1, min(interval, MCP_TASK_MAX_POLL_INTERVAL_SECONDS))


MCP_UNANSWERABLE_INPUT_PREFIX = (
    "the MCP server asked for input that this agent session cannot provide yet"
)
"""The start of the error of a call whose server asked for input the session cannot map."""


def mcp_input_request_description(request: object) -> str:
    """How the error names one input request, such as ``an answer to 'Which account?'``."""
    method = request.get("method") if isinstance(request, Mapping) else None
    params = request.get("params") if isinstance(request, Mapping) else None
    if method == "elicitation/create":
        message = params.get("message") if isinstance(params, Mapping) else None
        return f"an answer to '{message}'" if isinstance(message, str) else "an answer to a form"
    if method == "sampling/createMessage":
        return "a model response"
    if method == "roots/list":
        return "the client's roots"
    if isinstance(method, str):
        return f"a response to '{method}'"
    return "a request it could not read"


def mcp_unanswerable_input_text(requests: Mapping[str, Any]) -> str:
    """The recorded error for input requests the session cannot map to a question.

    ``the MCP server asked for input that this agent session cannot provide yet
    (<descriptions>)``, naming each request in the order of its key, joined with
    ``"; "``.
    """
    described = "; ".join(mcp_input_request_description(requests[key]) for key in sorted(requests))
    return f"{MCP_UNANSWERABLE_INPUT_PREFIX} ({described or 'no request'})"


class McpInputFieldType(StrEnum):
    """The one field of a form elicitation that becomes a session question."""

    STRING = "string"
    BOOLEAN = "boolean"


MCP_BOOLEAN_CHOICES = ("yes", "no")
"""The choices of a question for a single ``boolean`` field."""


@attrs.frozen(kw_only=True)
class McpInputQuestion:
    """An input request that becomes a session question (``ToolInputRequested``).

    ``request_key`` and ``fingerprint`` (``mcp_input_request_fingerprint``) identify
    the request, so its answer is sent only while the task still lists that request.
    """

    request_key: str
    fingerprint: str
    question: str
    choices: tuple[str, ...] = ()
    allows_free_text: bool = True
    field_name: str
    field_type: McpInputFieldType = attrs.field(converter=McpInputFieldType)


def mcp_input_request_fingerprint(request: object) -> str:
    """The lowercase hex SHA-256 of a request's compact JSON with sorted keys, as UTF-8."""
    return hashlib.sha256(_json_text(request).encode("utf-8")).hexdigest()


def map_mcp_input_request(requests: Mapping[str, Any]) -> McpInputQuestion | None:
    """The session question for a task's input requests, or ``None`` when none fits.

    Only one form ``elicitation/create`` (``mode`` absent or ``form``) with a non-blank
    string ``message`` whose ``requestedSchema`` has a single property maps: a
    ``string`` field asks with its ``enum`` values (non-empty, all non-blank strings)
    as the only choices, or free text without ``enum``; a ``boolean`` field asks with
    ``yes`` and ``no``.
    """
    if len(requests) != 1:
        return None
    [(key, request)] = requests.items()
    if not isinstance(request, Mapping) or request.get("method") != "elicitation/create":
        return None
    params = request.get("params")
    if not isinstance(params, Mapping) or params.get("mode", "form") != "form":
        return None
    message, schema = params.get("message"), params.get("requestedSchema")
    # A session question needs text, and an answer is never blank: a blank message or
    # choice would make a question no one can see or answer.
    if not isinstance(message, str) or not message.strip() or not isinstance(schema, Mapping):
        return None
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or len(properties) != 1:
        return None
    [(field_name, field)] = properties.items()
    if not isinstance(field, Mapping):
        return None
    field_type = field.get("type")
    choices: tuple[str, ...] = ()
    if field_type == "boolean":
        choices = MCP_BOOLEAN_CHOICES
    elif field_type != "string":
        return None
    elif "enum" in field:
        values = field["enum"]
        if not isinstance(values, list) or not values:
            return None
        if not all(isinstance(value, str) and value.strip() for value in values):
            return None
        choices = tuple(values)
    return McpInputQuestion(
        request_key=key,
        fingerprint=mcp_input_request_fingerprint(request),
        question=message,
        choices=choices,
        allows_free_text=not choices,
        field_name=field_name,
        field_type=McpInputFieldType(field_type),
    )


def mcp_input_response(question: McpInputQuestion, answer: QuestionAnswer) -> dict[str, Any]:
    """The ``tasks/update`` input response for the question's resolution.

    An answer is ``{"action": "accept", "content": {<field>: <value>}}``, with ``yes``
    and ``no`` as ``true`` and ``false`` for a boolean field; a decline is
    ``{"action": "decline"}`` and a passed deadline ``{"action": "cancel"}``.
    """
    if answer.resolution is QuestionResolution.DECLINED:
        return {"action": "decline"}
    if answer.resolution is QuestionResolution.DEADLINE_PASSED:
        return {"action": "cancel"}
    if answer.answer is None:
        raise ValueError("an answered question needs an answer")
    value: str | bool = answer.answer
    if question.field_type is McpInputFieldType.BOOLEAN:
        if answer.answer not in MCP_BOOLEAN_CHOICES:
            raise ValueError(f"a yes/no question needs 'yes' or 'no', not {answer.answer!r}")
        value = answer.answer == "yes"
    return {"action": "accept", "content": {question.field_name: value}}
