"""The MCP tasks extension on the wire: ``io.modelcontextprotocol/tasks`` (MCP 2026-07-28).

``tasks_extension()`` is passed to every ``Client``, so every request declares
the extension in its per-request capabilities and a ``tools/call`` may answer
with a task handle (``resultType: "task"``), parsed as ``TaskHandle``.
``get_task``, ``update_task`` and ``cancel_task`` send ``tasks/get``,
``tasks/update`` and ``tasks/cancel``; on Streamable HTTP each carries the task
ID in the ``Mcp-Name`` header, so a load balancer routes it to the task's server.
Task requests carry no idempotency key: the task ID names the call there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp_types import CallToolResult, Request, RequestParams, Result
from pydantic import RootModel

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The identifier of the MCP tasks extension."""


class _Answer(RootModel[dict[str, Any]]):
    """A task request's answer as the server sent it: the SDK knows no task methods."""


class TaskHandle(Result):
    """A ``CreateTaskResult``: a ``tools/call`` answered with a task instead of a result."""

    result_type: Literal["task"]
    task_id: str
    status: str
    status_message: str | None = None
    # As sent: any JSON number is an interval, and next_mcp_task_poll_interval reads
    # anything else as none. A whole-number field refused 1500.5, failing the answer
    # after the task had started.
    poll_interval_ms: Any = None


async def _never_resolved(handle: TaskHandle, context: ClaimContext) -> CallToolResult:
    # The source reads handles itself with allow_claimed=True; Client.call_tool never runs.
    raise RuntimeError(f"MCP task {handle.task_id} must be polled by the tool source")


class _TasksExtension(ClientExtension):
    identifier = TASKS_EXTENSION

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return (ResultClaim(result_type="task", model=TaskHandle, resolve=_never_resolved),)


def tasks_extension() -> ClientExtension:
    """The client extension that declares tasks and parses task handles."""
    return _TasksExtension()


class _TaskParams(RequestParams):
    task_id: str


class _UpdateParams(_TaskParams):
    input_responses: dict[str, Any]


class _GetTask(Request[_TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: _TaskParams
    name_param: ClassVar[str | None] = "taskId"


class _UpdateTask(Request[_UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: _UpdateParams
    name_param: ClassVar[str | None] = "taskId"


class _CancelTask(Request[_TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: _TaskParams
    name_param: ClassVar[str | None] = "taskId"


async def get_task(client: Client, task_id: str, *, seconds: float) -> dict[str, Any]:
    """One ``tasks/get`` answered within ``seconds``: the task as the server sent it.

    ``MCPError`` for an error answer, a broken stream or a timeout.
    """
    request = _GetTask(params=_TaskParams(task_id=task_id))
    answer = await client.session.send_request(
        request, _Answer, request_read_timeout_seconds=seconds
    )
    return answer.root


async def update_task(
    client: Client, task_id: str, responses: Mapping[str, Any], *, seconds: float
) -> None:
    """One ``tasks/update`` with ``inputResponses``; ``MCPError`` for an error answer."""
    params = _UpdateParams(task_id=task_id, input_responses=dict(responses))
    await client.session.send_request(
        _UpdateTask(params=params), _Answer, request_read_timeout_seconds=seconds
    )


async def cancel_task(client: Client, task_id: str, *, seconds: float) -> None:
    """One ``tasks/cancel``; ``MCPError`` for an error answer."""
    request = _CancelTask(params=_TaskParams(task_id=task_id))
    await client.session.send_request(request, _Answer, request_read_timeout_seconds=seconds)
