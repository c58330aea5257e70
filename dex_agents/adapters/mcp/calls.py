"""One ``tools/call`` on a new connection and what it records ("What a call does").

The request carries the session's idempotency key in ``_meta`` under
``IDEMPOTENCY_KEY_META_KEY``, which wins over the caller's ``request_meta``.
``notifications/progress`` become ``mcp.tool_progress`` events. The answer is
mapped by ``classify_mcp_tool_result`` and ``classify_mcp_error_response``; an
answer that never came after the request was sent is ``McpToolCallInterruptedError``.
A result is read as the server sent it (``keep_sent_results``), also when the SDK's
models refused to read it (``refused_answers.py``).

A call may be answered with a task ("Long-running MCP tasks"). With
``ReturnTask`` (a Streamable HTTP server, a session that polls tasks) the task ID
is saved as the Step's heartbeat checkpoint and returned as ``ToolTaskStarted``.
With ``WaitForTask`` (stdio, ``call_tool``, a runner without ``poll_tool_task``)
the task is polled on the call's own connection, with a heartbeat per poll, for at
most ``task_wait_timeout``. An ``input_required`` answer to ``tools/call`` itself
records ``failed`` naming each request; a state-only one is sent again at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, aclosing
from datetime import timedelta
from typing import Any, NoReturn, cast

import anyio
import attrs
from mcp import Client
from mcp.client.caching import CacheMode
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, InputRequiredResult, ListToolsResult
from pydantic import ValidationError

from dex_agents.adapters.mcp.config import McpServerConfig
from dex_agents.adapters.mcp.connection import close_quietly, open_client
from dex_agents.adapters.mcp.errors import McpConnectionError, McpToolCallInterruptedError
from dex_agents.adapters.mcp.images import upload_images
from dex_agents.adapters.mcp.interruptions import is_connection_interruption
from dex_agents.adapters.mcp.paging import RepeatedCursorError, pages
from dex_agents.adapters.mcp.refused_answers import refused_answer
from dex_agents.adapters.mcp.sent_results import keep_sent_results
from dex_agents.adapters.mcp.tasks import TaskHandle, cancel_task, get_task
from dex_agents.domain.errors import ToolExecutionError, ToolOutcomeUnknownError
from dex_agents.domain.mcp_conventions import (
    IDEMPOTENCY_KEY_META_KEY,
    McpCallOutcome,
    McpCallOutcomeKind,
    classify_mcp_error_response,
    classify_mcp_tool_result,
    mcp_unanswerable_input_text,
    next_mcp_task_poll_interval,
)
from dex_agents.domain.mcp_tasks import McpTaskStatus, read_mcp_task, terminal_task_outcome
from dex_agents.domain.runner_outcomes import ToolExecutionResult, ToolTaskStarted
from dex_agents.domain.tool_calls import AgentToolCall
from dex_agents.ports.event_writer import AgentEventWriter
from dex_agents.ports.media_store import MediaStore
from dex_agents.ports.runner import Heartbeat, SaveHeartbeatCheckpoint

logger = logging.getLogger(__name__)

ProgressWriter = Callable[[float, float | None, str | None], Awaitable[None]]
"""Receives each ``notifications/progress`` of the call."""

TOOL_PROGRESS_EVENT = "mcp.tool_progress"
"""The event type of a call's progress notification."""


def progress_writer(events: AgentEventWriter, record: AgentToolCall) -> ProgressWriter:
    """Write each progress notification of ``record``'s call as an ``mcp.tool_progress`` event."""

    async def progress(done: float, total: float | None, message: str | None) -> None:
        events.write_event(
            TOOL_PROGRESS_EVENT,
            {
                "tool_call_id": record.tool_call_id,
                "tool_name": record.tool_name,
                "progress": done,
                "total": total,
                "message": message,
            },
        )

    return progress


STATE_ONLY_ROUNDS = 10
"""How often a state-only ``input_required`` answer is sent again before the call is interrupted."""


@attrs.frozen(kw_only=True)
class ReturnTask:
    """Return a task to the session: save its ID with ``save_checkpoint`` first."""

    save_checkpoint: SaveHeartbeatCheckpoint


@attrs.frozen(kw_only=True)
class WaitForTask:
    """Poll a task inside the call, heartbeating before each poll, for at most ``timeout``."""

    timeout: timedelta
    heartbeat: Heartbeat | None = None


TaskHandling = ReturnTask | WaitForTask


def error_outcome(error: MCPError) -> McpCallOutcome:
    """The outcome of an ``MCPError`` answer or of the SDK's own closed/timeout error.

    Only the SDK's own errors (``is_connection_interruption``) are interrupted; a
    server's ``-32000`` or ``-32001`` is its answer, classified by
    ``classify_mcp_error_response``.
    """
    if is_connection_interruption(error):
        # The stream closed or the answer never came: the call may have run.
        return McpCallOutcome(kind=McpCallOutcomeKind.INTERRUPTED, text=f"MCP error: {error}")
    data = error.data
    payload: dict[str, Any] = {"code": error.code, "message": error.message}
    if data is not None:
        payload["data"] = data
    return classify_mcp_error_response(payload)


async def record_outcome(
    outcome: McpCallOutcome, result: Mapping[str, Any] | None, media_store: MediaStore | None
) -> ToolExecutionResult:
    """Return a success (its images uploaded) or raise what ``outcome`` records."""
    for warning in outcome.warnings:
        logger.warning("%s", warning)
    if outcome.kind is not McpCallOutcomeKind.SUCCEEDED:
        raise_outcome(outcome)
    images = (
        ()
        if media_store is None or result is None
        else await upload_images(media_store, result.get("content"))
    )
    return ToolExecutionResult(outcome.text, images=images)


def raise_outcome(outcome: McpCallOutcome) -> NoReturn:
    """Raise what a call that did not succeed records.

    ``ToolExecutionError`` for ``failed``, ``ToolOutcomeUnknownError`` for
    ``outcome_unknown``, ``McpToolCallInterruptedError`` for ``interrupted``.
    """
    if outcome.kind is McpCallOutcomeKind.FAILED:
        raise ToolExecutionError(outcome.text)
    if outcome.kind is McpCallOutcomeKind.OUTCOME_UNKNOWN:
        raise ToolOutcomeUnknownError(outcome.text)
    if outcome.kind is McpCallOutcomeKind.INTERRUPTED:
        raise McpToolCallInterruptedError(outcome.text)
    raise ValueError(f"a {outcome.kind} outcome is no failure")


@attrs.frozen
class _Answer:
    outcome: McpCallOutcome
    result: Mapping[str, Any] | None = None


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
    tasks: TaskHandling,
    progress: ProgressWriter | None = None,
    listing: ListToolsResult | None = None,
) -> ToolExecutionResult | ToolTaskStarted:
    """Send one ``tools/call`` to ``config`` and return or raise what it records.

    ``listing``, the server's tools as the Worker holds them, spares the connection
    the listing it makes before the call (``list_until``).
    ``ToolExecutionError`` when no connection opened or the listing failed (never
    sent), for an ``isError``
    or ``rejected`` answer and for a JSON-RPC error other than ``-32603``/``-32700``;
    ``ToolOutcomeUnknownError`` for the Dex ``unknown`` outcome;
    ``McpToolCallInterruptedError`` for a call that was sent and may have run, and for
    a task still running when ``WaitForTask.timeout`` passed. ``ToolTaskStarted``
    only with ``ReturnTask``.
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
                listing=listing,
            )
        except McpConnectionError as error:
            raise ToolExecutionError(f"the MCP tool call was not sent: {error}") from error
        try:
            await list_until(client, tool, held=listing is not None)
        except Exception as error:
            raise ToolExecutionError(
                "the MCP tool call was not sent: listing the server's tools failed: "
                f"{type(error).__name__}: {error}"
            ) from error
        uploads = media_store is not None
        answer = await _send(client, tool, arguments, meta, request_timeout, progress, uploads)
        if isinstance(answer, TaskHandle):
            if isinstance(tasks, ReturnTask):
                await tasks.save_checkpoint(answer.task_id)
                interval = next_mcp_task_poll_interval(None, answer.poll_interval_ms)
                return ToolTaskStarted(task_id=answer.task_id, poll_interval_seconds=interval)
            seconds = connection_timeout.total_seconds()
            answer = await _wait(client, answer, tasks, seconds, uploads)
    finally:
        await close_quietly(stack)
    return await record_outcome(answer.outcome, answer.result, media_store)


async def list_until(client: Client, tool: str, *, held: bool = False) -> None:
    """List the server's tools on the call's connection, page by page, up to ``tool``'s page.

    The SDK takes the arguments it mirrors into ``Mcp-Param-*`` headers
    (``x-mcp-header``, MCP 2026-07-28: a server refuses a call whose header is missing)
    from a listing on the same connection. Its check of a structured result against the
    listed output schema is off (``skip_output_schema_check``). ``held``: the client
    answers with the Worker's listing (``held_listing.py``), so only a listing that
    lacks ``tool`` sends a request.
    """
    if held and await _pages_to(client, tool, "use"):
        return
    await _pages_to(client, tool, "refresh")


async def _pages_to(client: Client, tool: str, cache_mode: CacheMode) -> bool:
    listing = pages(lambda cursor: client.list_tools(cursor=cursor, cache_mode=cache_mode))
    try:
        async with aclosing(listing):  # it stops early, on the tool's page
            async for page in listing:
                if any(listed.name == tool for listed in page.tools):
                    return True
    except RepeatedCursorError:
        pass
    return False  # unlisted: the SDK sends the call without headers or a schema


async def _accept_result(name: str, result: CallToolResult) -> None:
    return None


def skip_output_schema_check(client: Client) -> None:
    """Turn off the SDK's check of a structured result against the tool's output schema.

    The SDK raises after the answer came, so a call the server ran and answered read
    as interrupted: a ``read`` was sent again and a write recorded
    ``outcome_unknown``. That happened whenever the Worker's listing was older than a
    new deployment's schema, or the server's schema or result was wrong. "What a call
    does" records a result's ``content`` and never reads ``structuredContent``, as
    for a task's result, which the SDK never checks.
    """
    # The SDK has no switch for it; ``validate_tool_result`` is the public method
    # its ``call_tool`` calls, so this connection's session gets one that accepts.
    client.session.validate_tool_result = _accept_result  # type: ignore[method-assign]


async def _send(
    client: Client,
    tool: str,
    arguments: Mapping[str, Any],
    meta: dict[str, Any],
    request_timeout: timedelta,
    progress: ProgressWriter | None,
    uploads_images: bool,
) -> _Answer | TaskHandle:
    state: str | None = None
    skip_output_schema_check(client)
    sent = keep_sent_results(client)
    for _ in range(STATE_ONLY_ROUNDS):
        sent.last = {}  # cleared: only this call's answer is read from it
        try:
            answer = await client.session.call_tool(
                tool,
                dict(arguments),
                read_timeout_seconds=request_timeout.total_seconds(),
                progress_callback=cast(Any, progress),
                meta=cast(Any, meta or None),
                request_state=state,
                allow_input_required=True,
                allow_claimed=True,
            )
        except MCPError as error:
            return _Answer(error_outcome(error))
        except ValidationError as error:
            outcome, result = refused_answer(error, sent, uploads_images=uploads_images)
            return _Answer(outcome, result)
        except Exception as error:
            # The stream broke, the server exited, the request timed out, or an HTTP error status.
            text = f"the MCP tool call was interrupted: {type(error).__name__}: {error}"
            return _Answer(McpCallOutcome(kind=McpCallOutcomeKind.INTERRUPTED, text=text))
        if isinstance(answer, TaskHandle):
            return answer
        if isinstance(answer, InputRequiredResult):
            if answer.input_requests:
                requests = {
                    key: request.model_dump(by_alias=True, exclude_none=True, mode="json")
                    for key, request in answer.input_requests.items()
                }
                text = mcp_unanswerable_input_text(requests)
                return _Answer(McpCallOutcome(kind=McpCallOutcomeKind.FAILED, text=text))
            state = answer.request_state  # state-only: the server asks for the same call again
            continue
        if not isinstance(answer, CallToolResult):
            text = f"the MCP server answered with an unknown result {type(answer).__name__}"
            return _Answer(McpCallOutcome(kind=McpCallOutcomeKind.FAILED, text=text))
        # As the server sent it, as a task's result is read: the SDK's models leave out a
        # null and a field of the server's own, and read "isError": "true" as true.
        result = sent.last
        return _Answer(classify_mcp_tool_result(result, uploads_images=uploads_images), result)
    text = f"the MCP server kept asking to repeat the call {STATE_ONLY_ROUNDS} times"
    return _Answer(McpCallOutcome(kind=McpCallOutcomeKind.INTERRUPTED, text=text))


async def _wait(
    client: Client, handle: TaskHandle, wait: WaitForTask, seconds: float, uploads_images: bool
) -> _Answer:
    """Poll a task on the call's connection until it ends or ``wait.timeout`` passes."""
    deadline = time.monotonic() + wait.timeout.total_seconds()
    previous: int | None = None
    poll_interval_ms: object = handle.poll_interval_ms
    while True:
        previous = next_mcp_task_poll_interval(previous, poll_interval_ms)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            # Only the effect class decides whether the call is sent again.
            raise McpToolCallInterruptedError(
                f"the MCP task {handle.task_id} did not finish within task_wait_timeout "
                f"({wait.timeout})"
            )
        await anyio.sleep(min(previous, remaining))
        if wait.heartbeat is not None:
            await wait.heartbeat()
        try:
            task = read_mcp_task(await get_task(client, handle.task_id, seconds=seconds))
        except (MCPError, ValueError) as error:
            text = f"polling MCP task {handle.task_id} failed: {type(error).__name__}: {error}"
            return _Answer(McpCallOutcome(kind=McpCallOutcomeKind.INTERRUPTED, text=text))
        poll_interval_ms = task.poll_interval_ms
        if task.status.is_terminal:
            return _Answer(terminal_task_outcome(task, uploads_images=uploads_images), task.result)
        if task.status is McpTaskStatus.INPUT_REQUIRED and task.input_requests:
            # The task lives on this connection only, so no session question can reach it.
            await cancel_quietly(client, handle.task_id, seconds=seconds)
            text = mcp_unanswerable_input_text(task.input_requests)
            return _Answer(McpCallOutcome(kind=McpCallOutcomeKind.FAILED, text=text))


async def cancel_quietly(client: Client, task_id: str, *, seconds: float) -> None:
    """``tasks/cancel`` best-effort: a failure is logged, never raised."""
    try:
        await cancel_task(client, task_id, seconds=seconds)
    except Exception:
        logger.warning("cancelling MCP task %s failed", task_id, exc_info=True)
