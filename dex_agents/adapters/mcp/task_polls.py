"""``PollToolTask``'s side of a Streamable HTTP task: one poll, and ``cancel_turn``'s cancel.

Each poll opens a new connection and sends one ``tasks/get``; MCP 2026-07-28 has
no protocol session, so any connection reaches the task. ``decide_mcp_task_poll``
(``dex_agents.domain.mcp_tasks``) decides what the poll does; this module sends
``tasks/update`` or ``tasks/cancel`` when it says so and writes an
``mcp.task_status`` event when the status changed. A task the server no longer
knows (``-32602``) records ``failed`` for a ``read`` and ``outcome_unknown``
otherwise; a server that cannot be reached fails the poll attempt, so after three
attempts the call's failure route records it the same way.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from dex_agents.adapters.mcp.calls import cancel_quietly, raise_outcome, record_outcome
from dex_agents.adapters.mcp.config import McpServerConfig
from dex_agents.adapters.mcp.connection import connected
from dex_agents.adapters.mcp.interruptions import is_connection_interruption
from dex_agents.adapters.mcp.tasks import cancel_task, get_task, update_task
from dex_agents.domain.mcp_tasks import (
    McpTask,
    McpTaskContinuation,
    McpTaskPollAction,
    McpTaskPollDecision,
    McpTaskStatus,
    decide_mcp_task_poll,
    lost_task_outcome,
    read_mcp_task,
)
from dex_agents.domain.runner_outcomes import (
    ToolInputRequested,
    ToolTaskPending,
    ToolTaskPollOutcome,
)
from dex_agents.ports.media_store import MediaStore
from dex_agents.ports.runner import ToolTaskPoll

TASK_STATUS_EVENT = "mcp.task_status"
"""The event a poll writes when the task's status changed."""


async def poll_mcp_task(
    config: McpServerConfig,
    poll: ToolTaskPoll,
    *,
    media_store: MediaStore | None,
    connection_timeout: timedelta,
    connection_attempts: int,
) -> ToolTaskPollOutcome:
    """Poll ``poll.tool_call.task_id`` once and return what the session records or does next."""
    record = poll.tool_call
    task_id = record.task_id or ""
    seconds = connection_timeout.total_seconds()
    async with connected(
        config, connection_timeout=connection_timeout, connection_attempts=connection_attempts
    ) as client:
        try:
            task = read_mcp_task(await get_task(client, task_id, seconds=seconds))
        except MCPError as error:
            if error.code != INVALID_PARAMS:
                raise  # unreachable or interrupted: the attempt fails and is retried
            lost = f"the MCP server no longer knows task {task_id}: {error.message}"
            raise_outcome(lost_task_outcome(record.effect, lost))
        continuation = McpTaskContinuation.decode(record.input_continuation)
        _write_status(poll, task, continuation)
        decision = decide_mcp_task_poll(
            task,
            continuation=continuation,
            pending_answer=poll.pending_answer,
            attempt=poll.attempt,
            effect=record.effect,
            previous_seconds=record.task_poll_interval_seconds,
            now=datetime.now(UTC),
            uploads_images=media_store is not None,
        )
        if decision.action is McpTaskPollAction.SEND_THEN_PENDING:
            await _send_answer(poll, task, decision, client, seconds)
        elif decision.action is McpTaskPollAction.CANCEL_THEN_FINISH:
            await cancel_quietly(client, task_id, seconds=seconds)
    return await _outcome(decision, task, media_store)


def _write_status(poll: ToolTaskPoll, task: McpTask, continuation: McpTaskContinuation) -> None:
    # A task starts out working; only a change is worth an event.
    if (continuation.status or McpTaskStatus.WORKING) is task.status:
        return
    record = poll.tool_call
    poll.events.write_event(
        TASK_STATUS_EVENT,
        {
            "tool_call_id": record.tool_call_id,
            "tool_name": record.tool_name,
            "task_id": task.task_id,
            "status": task.status.value,
            "status_message": task.status_message,
        },
    )


async def _send_answer(
    poll: ToolTaskPoll,
    task: McpTask,
    decision: McpTaskPollDecision,
    client: Client,
    seconds: float,
) -> None:
    assert decision.question is not None
    assert decision.input_response is not None
    # Heartbeat first: the attempt must still own the poll when the answer goes out.
    await poll.heartbeat()
    responses = {decision.question.request_key: dict(decision.input_response)}
    try:
        await update_task(client, task.task_id, responses, seconds=seconds)
    except Exception as error:
        if not decision.continuation.declined:
            raise  # a retried attempt asks the user again
        await cancel_quietly(client, task.task_id, seconds=seconds)
        text = f"the MCP task {task.task_id} could not take the decline: {error}"
        raise_outcome(lost_task_outcome(poll.tool_call.effect, text))


async def _outcome(
    decision: McpTaskPollDecision, task: McpTask, media_store: MediaStore | None
) -> ToolTaskPollOutcome:
    action = decision.action
    if action in (McpTaskPollAction.PENDING, McpTaskPollAction.SEND_THEN_PENDING):
        return ToolTaskPending(
            poll_interval_seconds=decision.poll_interval_seconds,
            continuation=decision.continuation.encode(),
        )
    if action is McpTaskPollAction.ASK:
        question = decision.question
        assert question is not None
        return ToolInputRequested(
            question=question.question,
            choices=question.choices,
            allows_free_text=question.allows_free_text,
            continuation=decision.continuation.encode(),
        )
    assert decision.outcome is not None
    return await record_outcome(decision.outcome, task.result, media_store)


async def cancel_mcp_task(
    config: McpServerConfig,
    task_id: str,
    *,
    connection_timeout: timedelta,
    connection_attempts: int,
) -> None:
    """Send ``tasks/cancel``; any answer from the server ends the cancellation.

    Raises when no answer came (no connection, a broken stream, a timeout), so the
    caller's retry sends it again; a second cancel of one task is harmless.
    """
    async with connected(
        config, connection_timeout=connection_timeout, connection_attempts=connection_attempts
    ) as client:
        try:
            await cancel_task(client, task_id, seconds=connection_timeout.total_seconds())
        except MCPError as error:
            if is_connection_interruption(error):
                raise
