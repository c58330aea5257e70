"""``McpToolSource``: MCP servers' tools as a ``ToolSource`` ("MCP tools (dex_agents.mcp)")."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from datetime import timedelta
from typing import Any

from dex_agents.adapters.mcp.call_arguments import parse_call_arguments
from dex_agents.adapters.mcp.calls import (
    ReturnTask,
    TaskHandling,
    WaitForTask,
    call_mcp_tool,
    progress_writer,
)
from dex_agents.adapters.mcp.config import (
    McpServerConfig,
    McpStreamableHttpServerConfig,
    check_server_configs,
)
from dex_agents.adapters.mcp.listing import ServerListings
from dex_agents.adapters.mcp.offered_tools import offered_tools
from dex_agents.adapters.mcp.resources import (
    RESOURCE_AND_PROMPT_TOOL_NAMES,
    run_resource_or_prompt_tool,
)
from dex_agents.adapters.mcp.task_polls import cancel_mcp_task, poll_mcp_task
from dex_agents.adapters.mcp.tools import (
    McpTool,
    builtin_tool_reference,
    call_policy,
    decode_reference,
    recorded_call,
    server_tool_reference,
)
from dex_agents.domain.errors import ToolExecutionError
from dex_agents.domain.listed_tools import ListedTool
from dex_agents.domain.mcp_conventions import MCP_TASK_FIRST_POLL_INTERVAL_SECONDS
from dex_agents.domain.runner_outcomes import (
    DeferredToolCall,
    DeferredToolOutcome,
    ToolExecutionResult,
    ToolTaskPollOutcome,
    ToolTaskStarted,
)
from dex_agents.domain.tool_declarations import ToolDeclaration
from dex_agents.domain.tool_declarations import merge_tool_policies as merge_declared
from dex_agents.domain.tool_effects import UNKNOWN_TOOL_POLICY, ToolEffect, ToolPolicy
from dex_agents.ports.media_store import MediaStore
from dex_agents.ports.runner import (
    AgentTurnContext,
    DeferredToolExecution,
    ToolTaskCancellation,
    ToolTaskPoll,
)

DeferredToolHandler = Callable[[DeferredToolExecution], Awaitable[DeferredToolOutcome]]


def _positive(name: str, value: timedelta) -> timedelta:
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise ValueError(f"{name} must be a positive timedelta, not {value!r}")
    return value


class McpToolSource:
    """The tools of MCP servers, listed at run time; every call runs in its own tool Step.

    ``source_name`` defaults to ``"mcp"``, which adding or removing a server keeps;
    name at least one of two sources of an agent. ``media_store`` uploads the images
    of successful results. ``resource_and_prompt_tools_enabled`` adds the three
    ``READ`` tools after the servers' tools. See ``ServerListings`` for the listing
    rules and ``call_mcp_tool`` for what a call records. A Streamable HTTP server's
    task is returned to a session that polls tasks (``poll_tool_task``,
    ``cancel_tool_task``); any other task is polled inside the call for at most
    ``task_wait_timeout``.
    """

    def __init__(
        self,
        servers: Sequence[McpServerConfig],
        *,
        source_name: str = "mcp",
        media_store: MediaStore | None = None,
        resource_and_prompt_tools_enabled: bool = False,
        listing_ttl: timedelta = timedelta(minutes=5),
        listing_failure_backoff: timedelta = timedelta(seconds=30),
        connection_timeout: timedelta = timedelta(seconds=30),
        request_timeout: timedelta = timedelta(minutes=10),
        task_wait_timeout: timedelta = timedelta(minutes=10),
        connection_attempts: int = 3,
    ) -> None:
        if not isinstance(source_name, str) or not source_name:
            raise ValueError(f"source_name must be a non-empty string, not {source_name!r}")
        if (
            isinstance(connection_attempts, bool)
            or not isinstance(connection_attempts, int)
            or (connection_attempts < 1)
        ):
            raise ValueError(f"connection_attempts must be at least 1, not {connection_attempts!r}")
        self._servers = check_server_configs(servers)
        self._by_name = {server.name: server for server in self._servers}
        self._source_name = source_name
        self._media_store = media_store
        self._resource_tools = resource_and_prompt_tools_enabled
        self._connection_timeout = _positive("connection_timeout", connection_timeout)
        self._request_timeout = _positive("request_timeout", request_timeout)
        self._task_wait_timeout = _positive("task_wait_timeout", task_wait_timeout)
        self._connection_attempts = connection_attempts
        self._listings = ServerListings(
            self._servers,
            listing_ttl=_positive("listing_ttl", listing_ttl),
            listing_failure_backoff=_positive("listing_failure_backoff", listing_failure_backoff),
            connection_timeout=connection_timeout,
            connection_attempts=connection_attempts,
        )
        self._last: tuple[ListedTool, ...] = ()
        self._offered_from: tuple[tuple[Mapping[str, Any], ...], ...] | None = None

    @property
    def source_name(self) -> str:
        """The source's unique, stable name; ``"mcp"`` by default."""
        return self._source_name

    @property
    def servers(self) -> tuple[McpServerConfig, ...]:
        """The configured servers, in order."""
        return self._servers

    def declared_tool_names(self) -> Collection[str]:
        """The resource and prompt tools' names when enabled with a server; no I/O."""
        return RESOURCE_AND_PROMPT_TOOL_NAMES if self._resource_tools and self._servers else ()

    async def list_tools(self, *, refresh: bool = False) -> Sequence[ListedTool]:
        """The tools offered now: each server's cached tools, then the resource and prompt tools.

        ``refresh=True`` lists every server again now.
        """
        listing = await self._listings.list(refresh=refresh)
        offered_from = tuple(tools for _, tools in listing)
        # A server's tools are the same tuple until it is listed again, so the tools
        # are built (and their warnings logged) once per listing, not per model call:
        # about 50 us a tool, which a model call with many MCP tools paid each time.
        before = self._offered_from
        if (
            before is None
            or len(offered_from) != len(before)
            or any(now is not then for now, then in zip(offered_from, before, strict=True))
        ):
            self._last = offered_tools(
                listing, resource_tool_servers=self._servers if self._resource_tools else None
            )
            self._offered_from = offered_from
        return self._last

    def cached_tools(self) -> Sequence[ListedTool]:
        """The last listing, without I/O; empty before the first."""
        return self._last

    def _find(self, name: str) -> ListedTool | None:
        return next((tool for tool in self._last if tool.name == name), None)

    def deferred_tool_call(
        self,
        turn: AgentTurnContext,
        *,
        tool_call_id: str,
        tool_name: str,
        arguments: str,
        listed_tool: ListedTool | None = None,
    ) -> DeferredToolCall:
        """The call of a listed tool, with the policy of the "Effects" table and its reference.

        A recorded call of a tool the listing lacks now (``listed_tool=None``, its
        record in ``turn.tool_calls`` with this source's reference) is rebuilt as it
        was recorded, so a framework adapter resumes it while its server is down.
        Any other name the source did not list (a model's guess, or a tool of a server
        that was down) gets a call that fails as ``unknown tool <name>`` without an
        approval (``unclassified``, no approval), as in the built-in loop.
        """
        tool = listed_tool if listed_tool is not None else self._find(tool_name)
        if isinstance(tool, McpTool):
            policy, ordered = call_policy(
                tool, turn.default_tool_effect, turn.tool_policies.get(tool_name)
            )
            return DeferredToolCall(
                tool_call_id,
                tool_name,
                arguments,
                policy,
                tool_source_reference=server_tool_reference(tool.server, tool.mcp_name),
                ordered=ordered,
            )
        if tool_name in RESOURCE_AND_PROMPT_TOOL_NAMES and self._resource_tools:
            return DeferredToolCall(
                tool_call_id,
                tool_name,
                arguments,
                turn.resolve_tool_policy(tool_name, ToolEffect.READ),
                tool_source_reference=builtin_tool_reference(tool_name),
            )
        if listed_tool is None:
            recorded = recorded_call(turn, tool_call_id, tool_name, arguments)
            if recorded is not None:
                return recorded
        # No reference: execute_deferred_tool_call refuses the call without sending it.
        return DeferredToolCall(tool_call_id, tool_name, arguments, UNKNOWN_TOOL_POLICY)

    async def _run_resource_or_prompt(
        self, name: str, arguments: Mapping[str, Any]
    ) -> ToolExecutionResult:
        # The resource and prompt tools connect as the server's own tools do.
        output = await run_resource_or_prompt_tool(
            name,
            arguments,
            self._by_name,
            connection_timeout=self._connection_timeout,
            connection_attempts=self._connection_attempts,
        )
        return ToolExecutionResult(output)

    async def execute_deferred_tool_call(
        self, call: DeferredToolExecution, *, request_meta: Mapping[str, Any] | None = None
    ) -> DeferredToolOutcome:
        """Run one call in its tool Step, on a new connection to the server it names.

        ``request_meta`` adds ``_meta`` entries to the request; the idempotency key
        wins over an entry of the same name. A call of a name the source did not list
        raises ``ToolExecutionError`` (``unknown tool <name>``) without a request.
        """
        record = call.tool_call
        if record.tool_source_reference is None:
            raise ToolExecutionError(f"unknown tool {record.tool_name}")
        target = decode_reference(record.tool_source_reference)
        arguments = parse_call_arguments(record.arguments)
        if isinstance(target, str):
            return await self._run_resource_or_prompt(target, arguments)
        server_name, tool = target
        config = self._by_name.get(server_name)
        if config is None:
            raise ToolExecutionError(f"MCP server {server_name!r} is not configured")
        if self._returns_tasks(config, call) and call.heartbeat_checkpoint:
            # An earlier attempt started the task: resume it without calling the tool again.
            return ToolTaskStarted(
                task_id=call.heartbeat_checkpoint,
                poll_interval_seconds=MCP_TASK_FIRST_POLL_INTERVAL_SECONDS,
            )
        tasks: TaskHandling = (
            ReturnTask(save_checkpoint=call.save_heartbeat_checkpoint)
            if self._returns_tasks(config, call)
            else WaitForTask(timeout=self._task_wait_timeout, heartbeat=call.heartbeat)
        )
        return await call_mcp_tool(
            config,
            tool,
            arguments,
            idempotency_key=call.idempotency_key,
            request_meta=request_meta,
            media_store=self._media_store,
            connection_timeout=self._connection_timeout,
            connection_attempts=self._connection_attempts,
            request_timeout=self._request_timeout,
            tasks=tasks,
            progress=progress_writer(call.events, record),
            listing=self._listings.held(config.name),
        )

    @staticmethod
    def _returns_tasks(config: McpServerConfig, call: DeferredToolExecution) -> bool:
        # A stdio task lives in its server process, which ends with the request.
        return call.supports_tool_tasks and isinstance(config, McpStreamableHttpServerConfig)

    def _server_of(self, reference: str | None) -> McpServerConfig | None:
        try:
            target = decode_reference(reference)
        except ValueError:
            return None
        return self._by_name.get(target[0]) if isinstance(target, tuple) else None

    def _task_server(self, reference: str | None) -> McpServerConfig:
        config = self._server_of(reference)
        if config is None:
            raise ToolExecutionError(f"the MCP server of task call {reference!r} is not configured")
        return config

    def will_resume_tool_task_without_sending(self, call: DeferredToolExecution) -> bool:
        """``True`` only when executing ``call`` returns a task an earlier attempt started.

        That is: the session polls tasks, the server uses Streamable HTTP, and the
        call's heartbeat checkpoint names the task, so ``tools/call`` is never sent.
        A task polled inside the call may be sent again, so this is ``False`` there.
        """
        config = self._server_of(call.tool_call.tool_source_reference)
        return (
            config is not None
            and self._returns_tasks(config, call)
            and bool(call.heartbeat_checkpoint)
        )

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Poll a Streamable HTTP task once with ``tasks/get`` ("Long-running MCP tasks").

        Returns the result of a completed task, ``ToolTaskPending`` with the next
        interval, or the task's input request as ``ToolInputRequested``; raises
        ``ToolExecutionError`` for a failed or cancelled task. Writes an
        ``mcp.task_status`` event when the status changed. Never calls the tool.
        """
        return await poll_mcp_task(
            self._task_server(poll.tool_call.tool_source_reference),
            poll,
            media_store=self._media_store,
            connection_timeout=self._connection_timeout,
            connection_attempts=self._connection_attempts,
        )

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        """Send ``tasks/cancel`` for a task ``cancel_turn`` abandoned; any answer ends it.

        Idempotent by task ID: a retried cancellation sends it again harmlessly.
        """
        record = cancellation.tool_call
        await cancel_mcp_task(
            self._task_server(record.tool_source_reference),
            record.task_id or "",
            connection_timeout=self._connection_timeout,
            connection_attempts=self._connection_attempts,
        )

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any], *, idempotency_key: str | None = None
    ) -> ToolExecutionResult:
        """Call a listed tool by its session name, for a framework adapter's tool body.

        Finds the server through the listing; raises what a tool Step records
        (``ToolExecutionError``, ``ToolOutcomeUnknownError``,
        ``McpToolCallInterruptedError``). A task is polled inside the call for at
        most ``task_wait_timeout``.
        """
        tool = next((t for t in await self.list_tools() if t.name == name), None)
        if tool is None:
            raise ToolExecutionError(f"unknown tool {name}")
        if not isinstance(tool, McpTool):
            return await self._run_resource_or_prompt(name, arguments)
        result = await call_mcp_tool(
            self._by_name[tool.server],
            tool.mcp_name,
            arguments,
            idempotency_key=idempotency_key,
            media_store=self._media_store,
            connection_timeout=self._connection_timeout,
            connection_attempts=self._connection_attempts,
            request_timeout=self._request_timeout,
            tasks=WaitForTask(timeout=self._task_wait_timeout),
            listing=self._listings.held(tool.server),
        )
        assert isinstance(result, ToolExecutionResult)  # WaitForTask never returns a task
        return result

    def tool_policies(self) -> dict[str, ToolPolicy]:
        """The policies the last listing gives its tools, keyed by session name; no I/O.

        A tool whose effect the source does not know (no trusted annotation or Dex
        declaration, ``effect`` ``None``) is left out, so it gets the session's
        ``default_tool_effect``, as in the built-in loop ("Effects").
        """
        policies: dict[str, ToolPolicy] = {}
        for tool in self._last:
            if isinstance(tool, McpTool):
                if tool.effect is not None:
                    policies[tool.name] = call_policy(tool, ToolEffect.UNCLASSIFIED, None)[0]
            else:
                policies[tool.name] = ToolPolicy(ToolEffect.READ, requires_approval=False)
        return policies

    def merge_tool_policies(self, policies: Mapping[str, ToolPolicy]) -> dict[str, ToolPolicy]:
        """Your policies merged into the last listing's, so none lowers a declared effect."""
        declarations: dict[str, ToolDeclaration] = {}
        for tool in self._last:
            if isinstance(tool, McpTool):
                declaration = tool.classify().declaration
                if declaration is not None:
                    declarations[tool.name] = declaration
        return merge_declared(declarations, policies, base=self.tool_policies())

    async def deferred_tool_handlers(self) -> dict[str, DeferredToolHandler]:
        """A handler per listed tool that runs a call this source built."""
        return {tool.name: self.execute_deferred_tool_call for tool in await self.list_tools()}

    async def aclose(self) -> None:
        """End the listings still running, closing their connections; calls are not touched."""
        await self._listings.aclose()
