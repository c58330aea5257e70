"""One ``tools/call`` on a new connection and what it records ("What a call does").

The request carries the session's idempotency key in ``_meta`` under
``IDEMPOTENCY_KEY_META_KEY``, which wins over the caller's ``request_meta``.
``notifications/progress`` become ``mcp.tool_progress`` events. The answer is
mapped by ``classify_mcp_tool_result`` and ``classify_mcp_error_response``; an
answer that never came after the request was sent is ``McpToolCallInterruptedError``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from datetime import timedelta
from typing import Any, cast

from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from dex_agents.adapters.mcp.config import McpServerConfig
from dex_agents.adapters.mcp.connection import close_quietly, open_client
from dex_agents.adapters.mcp.errors import McpConnectionError, McpToolCallInterruptedError
from dex_agents.adapters.mcp.images import upload_images
from dex_agents.domain.errors import ToolExecutionError, ToolOutcomeUnknownError
from dex_agents.domain.mcp_conventions import (
    IDEMPOTENCY_KEY_META_KEY,
    McpCallOutcome,
    McpCallOutcomeKind,
    classify_mcp_error_response,
    classify_mcp_tool_result,
)
from dex_agents.domain.runner_outcomes import ToolExecutionResult
from dex_agents.ports.media_store import MediaStore

logger = logging.getLogger(__name__)

ProgressWriter = Callable[[float, float | None, str | None], Awaitable[None]]
"""Receives each ``notifications/progress`` of the call."""

TOOL_PROGRESS_EVENT = "mcp.tool_progress"
"""The event type of a call's progress notification."""


def _error_outcome(error: MCPError) -> McpCallOutcome:
    if error.code in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
        # Raised by the SDK itself: the stream closed or the answer never came.
        return McpCallOutcome(kind=McpCallOutcomeKind.INTERRUPTED, text=f"MCP error: {error}")
    data = error.data
    payload: dict[str, Any] = {"code": error.code, "message": error.message}
    if data is not None:
        payload["data"] = data
    return classify_mcp_error_response(payload)


async def _record(
    outcome: McpCallOutcome, result: Mapping[str, Any] | None, media_store: MediaStore | None
) -> ToolExecutionResult:
    for warning in outcome.warnings:
        logger.warning("%s", warning)
    if outcome.kind is McpCallOutcomeKind.SUCCEEDED:
        images = (
            ()
            if media_store is None or result is None
            else await upload_images(media_store, result.get("content"))
        )
        return ToolExecutionResult(outcome.text, images=images)
    if outcome.kind is McpCallOutcomeKind.FAILED:
        raise ToolExecutionError(outcome.text)
    if outcome.kind is McpCallOutcomeKind.OUTCOME_UNKNOWN:
        raise ToolOutcomeUnknownError(outcome.text)
    raise McpToolCallInterruptedError(outcome.text)


async def call_mcp_tool(
    config: McpServerConfig,
    tool: str,
    arguments: Mapping[str, Any],
    *,
    idempotency_key: str | None,
    request_meta: Mapping[str, Any] | None = None,
    media_store: MediaStore | None,
    connection_timeout: timedelta,
    connection_attempts: int,
    request_timeout: timedelta,
    progress: ProgressWriter | None = None,
) -> ToolExecutionResult:
    """Send one ``tools/call`` to ``config`` and return or raise what it records.

    ``ToolExecutionError`` when no connection opened (never sent), for an ``isError``
    or ``rejected`` answer and for a JSON-RPC error other than ``-32603``/``-32700``;
    ``ToolOutcomeUnknownError`` for the Dex ``unknown`` outcome;
    ``McpToolCallInterruptedError`` for a call that was sent and may have run.
    """
    meta: dict[str, Any] = dict(request_meta or {})
    if idempotency_key is not None:
        meta[IDEMPOTENCY_KEY_META_KEY] = idempotency_key
    stack = AsyncExitStack()
    try:
        try:
            client = await open_client(
                config,
                stack,
                connection_timeout=connection_timeout,
                connection_attempts=connection_attempts,
            )
        except McpConnectionError as error:
            raise ToolExecutionError(f"the MCP tool call was not sent: {error}") from error
        result, outcome = await _send(client, tool, arguments, meta, request_timeout, progress)
    finally:
        await close_quietly(stack)
    return await _record(outcome, result, media_store)


async def _send(
    client: Client,
    tool: str,
    arguments: Mapping[str, Any],
    meta: dict[str, Any],
    request_timeout: timedelta,
    progress: ProgressWriter | None,
) -> tuple[Mapping[str, Any] | None, McpCallOutcome]:
    try:
        answer = await client.call_tool(
            tool,
            dict(arguments),
            read_timeout_seconds=request_timeout.total_seconds(),
            progress_callback=cast(Any, progress),
            meta=cast(Any, meta or None),
        )
    except MCPError as error:
        return None, _error_outcome(error)
    except Exception as error:
        # The stream broke, the server exited, the request timed out, or an HTTP error status.
        text = f"the MCP tool call was interrupted: {type(error).__name__}: {error}"
        return None, McpCallOutcome(kind=McpCallOutcomeKind.INTERRUPTED, text=text)
    result = answer.model_dump(by_alias=True, exclude_none=True, mode="json")
    return result, classify_mcp_tool_result(result, uploads_images=True)
