"""The MCP server the MCP adapter tests talk to, over stdio (``python mcp_test_server.py``) or HTTP.

Its tools cover the rows of "What a call does": a read, an annotated idempotent
write, an unannotated write, a Dex-declared write with ``_meta`` keys, results with
the Dex ``outcome`` key, JSON-RPC errors, an image result, progress notifications,
a tool that kills its own process mid-call, a read whose argument a call mirrors
into an ``Mcp-Param-Region`` header (``x-mcp-header``, MCP 2026-07-28), a read with
structured output whose output schema changes once the file ``schema-v2`` appears next
to the call log (``count_notes``: the server deployed again with a new schema), and tools
answered with a task of the tasks extension (``TaskExtension``): ``build_report``,
whose task completes after ``seconds`` or once the file ``release-<name>`` appears
next to the call log, and ``choose_account``, whose task asks which account to use and
lists the answered request 2.5 s more (while the file ``answer-held`` is there; until
``answer-taken`` is).
Every call appends one JSON line (tool, arguments and request ``_meta``) to the
file named by ``MCP_TEST_CALL_LOG``, so a test sees what reached the server across
processes.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, TypedDict

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ImageContent,
    InputRequiredResult,
    RequestParams,
    TextContent,
    ToolAnnotations,
)
from pydantic import Field

# A 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
DEX_EFFECT = "io.superdurable.dex/effect"
DEX_APPROVAL = "io.superdurable.dex/approval"
DEX_OUTCOME = "io.superdurable.dex/outcome"


def _log(tool: str, ctx: Context, arguments: dict[str, Any]) -> int:
    """Append the call to the call log; return how many calls of ``tool`` came before."""
    return _append(tool, arguments, dict(ctx.request_context.meta or {}))


def _append(tool: str, arguments: dict[str, Any], meta: dict[str, Any]) -> int:
    path = os.environ.get("MCP_TEST_CALL_LOG")
    if not path:
        return 0
    with open(path, "a", encoding="utf-8") as log:
        log.write(json.dumps({"tool": tool, "arguments": arguments, "meta": meta}) + "\n")
    with open(path, encoding="utf-8") as log:
        return sum(1 for line in log if json.loads(line)["tool"] == tool) - 1


TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
CRASH_ONCE = "crash-once"
"""The note name and prompt argument whose first request kills the server process."""
ACCOUNT_REQUEST = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Which account?",
        "requestedSchema": {
            "type": "object",
            "properties": {"account": {"type": "string", "enum": ["checking", "savings"]}},
            "required": ["account"],
        },
    },
}
STILL_LISTED_SECONDS = 2.5
"""How long ``choose_account`` keeps listing its answered request, as a slow server may."""
ANSWER_HELD = "answer-held"
"""While this file is next to the call log, ``choose_account`` lists its answered request."""
ANSWER_TAKEN = "answer-taken"
"""Once this file is next to the call log (and no ``ANSWER_HELD``), ``choose_account``
has taken its answer in, however recent."""


def release_file(call_log: str | os.PathLike[str], name: str) -> Path:
    """The file whose existence completes ``build_report``'s task for report ``name``."""
    return Path(call_log).with_name(f"release-{name}")


def answer_held_file(call_log: str | os.PathLike[str]) -> Path:
    """The file whose existence keeps ``choose_account``'s answered request listed."""
    return Path(call_log).with_name(ANSWER_HELD)


def answer_taken_file(call_log: str | os.PathLike[str]) -> Path:
    """The file whose existence ends the listing of ``choose_account``'s answered request."""
    return Path(call_log).with_name(ANSWER_TAKEN)


def schema_v2_file(call_log: str | os.PathLike[str]) -> Path:
    """The file whose existence gives ``count_notes`` version 2 of its output schema."""
    return Path(call_log).with_name("schema-v2")


class NoteCountV1(TypedDict):
    count: int


class NoteCountV2(TypedDict):
    total: int


def _done(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


class _Task:
    """One task; its status is computed on every ``tasks/get`` from the clock and files."""

    def __init__(self, tool: str, arguments: dict[str, Any]) -> None:
        self.id = uuid.uuid4().hex
        self.tool = tool
        self.arguments = arguments
        self.started = time.monotonic()
        self.created_at = datetime.now(UTC).isoformat()
        self.cancelled = False
        self.answer: dict[str, Any] | None = None
        self.answered_at = 0.0

    def view(self) -> dict[str, Any]:
        base = {
            "taskId": self.id,
            "createdAt": self.created_at,
            "lastUpdatedAt": datetime.now(UTC).isoformat(),
            "ttlMs": 3_600_000,
            # A call may ask for another interval, such as a fraction of a millisecond.
            "pollIntervalMs": self.arguments.get("poll_interval_ms", 100),
        }
        if self.cancelled:
            return {**base, "status": "cancelled"}
        if self.tool == "build_report":
            name = str(self.arguments.get("name", ""))
            seconds = float(self.arguments.get("seconds") or 0)
            log = os.environ.get("MCP_TEST_CALL_LOG")
            released = log is not None and release_file(log, name).exists()
            if released or (seconds > 0 and time.monotonic() - self.started >= seconds):
                return {**base, "status": "completed", "result": _done(f"report {name} ready")}
            return {**base, "status": "working", "statusMessage": f"building {name}"}
        waiting = {"status": "input_required", "inputRequests": {"account": ACCOUNT_REQUEST}}
        if self.answer is None or self._still_listed():
            return {**base, **waiting}
        if self.answer.get("action") == "accept":
            return {**base, "status": "completed", "result": _done(f"using {self.answer}")}
        return {**base, "status": "completed", "result": _done(f"no account: {self.answer}")}

    def _still_listed(self) -> bool:
        log = os.environ.get("MCP_TEST_CALL_LOG")
        if log is not None and answer_held_file(log).exists():
            return True
        if log is not None and answer_taken_file(log).exists():
            return False
        return time.monotonic() - self.answered_at < STILL_LISTED_SECONDS


_TASKS: dict[str, _Task] = {}


class _TaskParams(RequestParams):
    task_id: str


class _UpdateParams(_TaskParams):
    input_responses: dict[str, Any]


def _task(task_id: str) -> _Task:
    task = _TASKS.get(task_id)
    if task is None:
        raise MCPError(INVALID_PARAMS, "Failed to retrieve task: Task not found")
    return task


async def _get(ctx: ServerRequestContext[Any, Any], params: _TaskParams) -> HandlerResult:
    return _task(params.task_id).view()


async def _update(ctx: ServerRequestContext[Any, Any], params: _UpdateParams) -> HandlerResult:
    _append("tasks/update", {"taskId": params.task_id, **params.input_responses}, {})
    task = _task(params.task_id)
    if task.answer is None and "account" in params.input_responses:
        task.answer, task.answered_at = params.input_responses["account"], time.monotonic()
    return {}


async def _cancel(ctx: ServerRequestContext[Any, Any], params: _TaskParams) -> HandlerResult:
    _append("tasks/cancel", {"taskId": params.task_id}, {})
    _task(params.task_id).cancelled = True
    return {}


class TaskExtension(Extension):
    """The tasks extension: ``build_report`` and ``choose_account`` answer with a task."""

    identifier = TASKS_EXTENSION

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("tasks/get", _TaskParams, _get),
            MethodBinding("tasks/update", _UpdateParams, _update),
            MethodBinding("tasks/cancel", _TaskParams, _cancel),
        ]

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        declared = ctx.session.client_capabilities
        extensions = declared.extensions if declared is not None else None
        if (
            params.name not in ("build_report", "choose_account")
            or not extensions
            or (TASKS_EXTENSION not in extensions)
        ):
            return await call_next(ctx)
        arguments = dict(params.arguments or {})
        _append(params.name, arguments, dict(params.meta or {}))
        task = _Task(params.name, arguments)
        _TASKS[task.id] = task
        return {"resultType": "task", **task.view()}


def build_server() -> MCPServer:
    server = MCPServer("dex-test", extensions=[TaskExtension()])

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def read_note(name: str, ctx: Context) -> str:
        """Read a note."""
        _log("read_note", ctx, {"name": name})
        return f"note {name}: hello"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def regional_note(
        region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], ctx: Context
    ) -> str:
        """Read a region's note; a gateway may route on the ``Mcp-Param-Region`` header."""
        _log("regional_note", ctx, {"region": region})
        return f"note of {region}: hello"

    @server.tool(annotations=ToolAnnotations(idempotent_hint=True, destructive_hint=True))
    async def set_flag(flag: str, ctx: Context) -> str:
        """Set a flag."""
        _log("set_flag", ctx, {"flag": flag})
        return f"flag {flag} set"

    @server.tool()
    async def send_email(to: str, ctx: Context) -> str:
        """Send an email."""
        _log("send_email", ctx, {"to": to})
        return f"sent to {to}"

    @server.tool(
        annotations=ToolAnnotations(read_only_hint=True),
        meta={DEX_EFFECT: "non_idempotent_write", DEX_APPROVAL: "recommended"},
    )
    async def send_payment(amount: int, ctx: Context) -> str:
        """Send a payment."""
        _log("send_payment", ctx, {"amount": amount})
        return f"paid {amount}"

    @server.tool(meta={DEX_EFFECT: "read"})
    async def declared_read(ctx: Context) -> str:
        """A declared read."""
        _log("declared_read", ctx, {})
        return "declared"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def outcome(kind: str, ctx: Context) -> CallToolResult:
        """Answer with the Dex outcome key ``kind``."""
        _log("outcome", ctx, {"kind": kind})
        return CallToolResult(
            content=[TextContent(type="text", text=f"the provider said {kind}")],
            is_error=True,
            _meta={DEX_OUTCOME: kind},
        )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def fails(ctx: Context) -> str:
        """An isError result."""
        _log("fails", ctx, {})
        raise ValueError("no such note")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def rpc_error(code: int, ctx: Context) -> str:
        """A JSON-RPC error response."""
        _log("rpc_error", ctx, {"code": code})
        raise MCPError(code, "broken")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def stall(ctx: Context) -> str:
        """Never answer within a test's request timeout."""
        _log("stall", ctx, {})
        await anyio.sleep(3600)
        return "too late"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def picture(ctx: Context) -> list[TextContent | ImageContent]:
        """A text and an image."""
        _log("picture", ctx, {})
        data = base64.b64encode(PNG).decode()
        return [
            TextContent(type="text", text="a dot:"),
            ImageContent(type="image", data=data, mime_type="image/png"),
        ]

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def bad_picture(ctx: Context) -> list[ImageContent]:
        """An image whose base64 is invalid."""
        _log("bad_picture", ctx, {})
        return [ImageContent(type="image", data="%%%not base64", mime_type="image/png")]

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def slow_count(ctx: Context) -> str:
        """Report progress twice, then answer."""
        _log("slow_count", ctx, {})
        await ctx.report_progress(1, 2, "halfway")
        await ctx.report_progress(2, 2, "done")
        return "counted"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def crash_once_read(ctx: Context) -> str:
        """Kill the server process on the first call; answer on later ones."""
        if _log("crash_once_read", ctx, {}) == 0:
            os._exit(3)
        return "read after a crash"

    @server.tool()
    async def crash_write(ctx: Context) -> str:
        """Kill the server process on every call."""
        _log("crash_write", ctx, {})
        os._exit(3)

    @server.tool(annotations=ToolAnnotations(idempotent_hint=True))
    async def build_report(name: str, ctx: Context, seconds: float = 0) -> str:
        """Build a report in a task; only a client without the tasks extension gets here."""
        _log("build_report", ctx, {"name": name, "seconds": seconds})
        return f"report {name} ready"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def choose_account(ctx: Context) -> str:
        """Ask which account to use, in a task; only a client without tasks gets here."""
        _log("choose_account", ctx, {})
        return "no account chosen"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def confirm_send(ctx: Context) -> InputRequiredResult:
        """Answer tools/call itself with an input request, outside a task."""
        _log("confirm_send", ctx, {})
        schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
        request = ElicitRequest(
            params=ElicitRequestFormParams(message="Send it?", requested_schema=schema)
        )
        return InputRequiredResult(input_requests={"ok": request})

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def repeat_once(ctx: Context) -> InputRequiredResult | str:
        """Ask for the same call again once (a state-only answer), then answer."""
        _log("repeat_once", ctx, {"request_state": ctx.request_state})
        if ctx.request_state is None:
            return InputRequiredResult(request_state="again")
        return f"answered after {ctx.request_state}"

    async def count_notes_v1(ctx: Context) -> NoteCountV1:
        """Count the notes (version 1 of its output schema)."""
        _log("count_notes", ctx, {})
        return {"count": 3}

    async def count_notes_v2(ctx: Context) -> NoteCountV2:
        """Count the notes (version 2 of its output schema)."""
        _log("count_notes", ctx, {})
        return {"total": 3}

    log_path = os.environ.get("MCP_TEST_CALL_LOG")
    v2 = log_path is not None and schema_v2_file(log_path).exists()
    server.tool(name="count_notes", annotations=ToolAnnotations(read_only_hint=True))(
        count_notes_v2 if v2 else count_notes_v1
    )

    @server.resource("note://greeting", description="A greeting.", mime_type="text/plain")
    def greeting() -> str:
        return "hello from a resource"

    @server.resource("note://{name}")
    def named_note(name: str) -> str:
        # The first read of note://crash-once kills the server process mid-request.
        if name == CRASH_ONCE and _append("read_resource", {"name": name}, {}) == 0:
            os._exit(3)
        return f"note {name}"

    @server.prompt(description="Greet someone.")
    def greet(name: str) -> str:
        # The first prompt for crash-once kills the server process mid-request.
        if name == CRASH_ONCE and _append("get_prompt", {"name": name}, {}) == 0:
            os._exit(3)
        return f"Please greet {name}."

    return server


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--exit":
        sys.exit(1)
    build_server().run("stdio")
