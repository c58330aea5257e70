"""ConnectorToolSource: reviewed Connector operations as tools of a built-in loop agent.

``connector_tool`` reads an operation's manifest entry and refuses one not exposed to
agents; ``ConnectorToolSource`` lists the tools, builds each call with the manifest's
effect (a session policy changes only approval) and runs it in its own tool Step
through the Connector SDK. The pure rules live in ``dex_agents.domain.connector_naming``.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Callable, Collection, Sequence
from typing import Any, Final

import attrs

from dex_agents.adapters.connectors import sdk
from dex_agents.adapters.connectors.fence import FenceObservation
from dex_agents.adapters.connectors.input_schema import ArgumentsViolation, check_arguments
from dex_agents.adapters.connectors.manifest import OperationManifest, read_operation_manifest
from dex_agents.adapters.connectors.step_context import ConnectorStepContext
from dex_agents.domain.connector_naming import (
    DEFAULT_CONNECTOR_RESULT_MAX_BYTES,
    ConnectorBranchOutcome,
    ConnectorOperationKind,
    classify_connector_branch,
    classify_connector_retry,
    connector_requires_approval,
    connector_tool_effect,
    connector_tool_name,
    require_connector_tool_name,
    truncate_connector_result,
)
from dex_agents.domain.errors import ToolExecutionError, ToolOutcomeUnknownError
from dex_agents.domain.listed_tools import ListedTool
from dex_agents.domain.runner_outcomes import (
    DeferredToolCall,
    ToolExecutionResult,
    ToolTaskPollOutcome,
)
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.domain.tool_declarations import merge_connector_tool_policy
from dex_agents.domain.tool_effects import UNKNOWN_TOOL_POLICY, ToolEffect, ToolPolicy
from dex_agents.domain.tool_step_options import ToolCallStepOptions
from dex_agents.ports.runner import AgentTurnContext, DeferredToolExecution, ToolTaskPoll

__all__ = [
    "DEFAULT_CONNECTOR_SOURCE_NAME",
    "ConnectorTool",
    "ConnectorToolSource",
    "connector_tool",
]

DEFAULT_CONNECTOR_SOURCE_NAME: Final = "connectors"

ApprovalRule = bool | Callable[[Any], bool] | None


@attrs.frozen(kw_only=True)
class ConnectorTool:
    """One Connector operation offered as a tool; build it with ``connector_tool``."""

    name: str
    operation: Any
    reference: Any
    manifest: OperationManifest
    requires_approval: ApprovalRule = None
    max_result_bytes: int | None = None

    @property
    def effect(self) -> ToolEffect:
        """The manifest's effect: a Query reads; a Mutation writes."""
        return connector_tool_effect(self.manifest.kind, retry_safe=self.manifest.retry_safe)

    def listed(self) -> ListedTool:
        """The tool as the source lists it: the manifest's description, schema and effect."""
        return ListedTool(
            name=self.name,
            description=self.manifest.description,
            input_schema=self.manifest.input_schema,
            effect=self.effect,
        )


def connector_tool(
    operation: Any,
    reference: Any,
    *,
    name: str | None = None,
    requires_approval: ApprovalRule = None,
    max_result_bytes: int | None = None,
) -> ConnectorTool:
    """The tool of ``operation`` on the connection ``reference``.

    Reads the operation's entry in its package's ``dex-connector.json`` and raises
    ``ValueError`` for one without ``agent.exposed: true``, with an ``agent`` value this
    version does not know, or with an ``inputSchema`` keyword it cannot check. The
    name defaults to ``<connectorId>_<operation in snake case>``; a ``name`` of your
    own must be 1 to 64 ASCII letters, digits, ``_`` and ``-`` (``ValueError``).
    ``requires_approval`` ``True`` or ``False`` overrides the manifest; a synchronous
    predicate decides per call from the decoded arguments (``TypeError`` for anything
    else, an ``async`` function included).
    """
    manifest = read_operation_manifest(operation.manifest_package, operation.name)
    if manifest.connector_id != operation.connector_id:
        raise ValueError(
            f"operation {operation.name!r} is of connector {operation.connector_id!r}, "
            f"but its manifest is {manifest.connector_id!r}'s"
        )
    if max_result_bytes is not None:
        truncate_connector_result("", max_result_bytes)  # validates it
    # Anything else would be called per call, raise, and so silently ask every time.
    if requires_approval is not None and not (
        isinstance(requires_approval, bool) or callable(requires_approval)
    ):
        raise TypeError(
            "requires_approval must be True, False, None or a predicate of the arguments, "
            f"not {requires_approval!r}"
        )
    # Likewise its coroutine would count as True: the call is built inside RunModel.
    if inspect.iscoroutinefunction(requires_approval):
        raise TypeError(
            "requires_approval must be a synchronous predicate of the arguments, not the "
            f"coroutine function {getattr(requires_approval, '__name__', requires_approval)}: "
            "a call's approval is decided without awaiting"
        )
    return ConnectorTool(
        name=connector_tool_name(manifest.connector_id, manifest.operation)
        if name is None
        else require_connector_tool_name(name),
        operation=operation,
        reference=reference,
        manifest=manifest,
        requires_approval=requires_approval,
        max_result_bytes=max_result_bytes,
    )


def _refuse_constant(constant: str) -> Any:
    # json.loads takes NaN and Infinity, which are not JSON, and would hand them to the operation.
    raise ValueError(f"{constant} is not a JSON value")


def _finite_float(text: str) -> float:
    # json.loads reads a number past float's range, such as 1e400, as infinity.
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text} is out of range")
    return value


def _decoded(arguments: str, tool: ConnectorTool) -> Any:
    """The arguments as JSON checked against ``inputSchema``; ``ToolExecutionError`` otherwise."""
    try:
        value = json.loads(
            arguments or "{}", parse_constant=_refuse_constant, parse_float=_finite_float
        )
    except ValueError as error:
        raise ToolExecutionError(f"{tool.name}: the arguments are not JSON: {error}") from None
    except RecursionError:
        # Refused like any other bad arguments: never approved, never run.
        raise ToolExecutionError(f"{tool.name}: the arguments are nested too deeply") from None
    try:
        check_arguments(value, tool.manifest.input_schema)
    except ArgumentsViolation as error:
        raise ToolExecutionError(f"{tool.name}: {error}") from None
    except RecursionError:
        # A recursive schema ($ref) follows the value down; JSON that json.loads read
        # can still nest deeper than that check can go.
        raise ToolExecutionError(f"{tool.name}: the arguments are nested too deeply") from None
    return value


def _raise_unless_succeeded(outcome: ConnectorBranchOutcome) -> str:
    status = ToolCallStatus(outcome.status)
    if status is ToolCallStatus.SUCCEEDED:
        return outcome.output or ""
    if status is ToolCallStatus.FAILED:
        raise ToolExecutionError(outcome.error or "the connector call failed")
    raise ToolOutcomeUnknownError(outcome.error or "the connector call's outcome is unknown")


def _not_offered(
    turn: AgentTurnContext,
    tool_call_id: str,
    tool_name: str,
    arguments: str,
    listed_tool: ListedTool | None,
) -> DeferredToolCall:
    record = turn.tool_calls.get(tool_call_id) if listed_tool is None else None
    if record is not None and (record.tool_name, record.tool_source_reference) == (
        tool_name,
        tool_name,
    ):
        policy = ToolPolicy(record.effect, requires_approval=record.requires_approval)
        ordered = record.ordered
    else:
        # Its tool Step refuses it before anything runs, so no one should approve it.
        policy, ordered = UNKNOWN_TOOL_POLICY, False
    return DeferredToolCall(
        tool_call_id,
        tool_name,
        arguments,
        policy,
        tool_source_reference=tool_name,
        ordered=ordered,
    )


class ConnectorToolSource:
    """A ``ToolSource`` of Connector operations; each call runs in its own tool Step.

    Every write is ``ordered``; each call's tool Step gets the operation's
    ``executeMethodTimeout`` and retry policy (at most three attempts) through
    ``tool_call_step_options``. Results over ``max_result_bytes`` (per tool, else
    per source, else ``DEFAULT_CONNECTOR_RESULT_MAX_BYTES``) are cut.
    """

    def __init__(
        self,
        tools: Sequence[ConnectorTool],
        *,
        source_name: str = DEFAULT_CONNECTOR_SOURCE_NAME,
        max_result_bytes: int = DEFAULT_CONNECTOR_RESULT_MAX_BYTES,
    ) -> None:
        truncate_connector_result("", max_result_bytes)  # validates it
        self._tools: dict[str, ConnectorTool] = {}
        for tool in tools:
            if not isinstance(tool, ConnectorTool):
                raise TypeError(
                    f"tools must be connector_tool(...) values, not {type(tool).__name__}"
                )
            if tool.name in self._tools:
                raise ValueError(f"two connector tools are named {tool.name!r}")
            self._tools[tool.name] = tool
        self._source_name = source_name
        self._max_result_bytes = max_result_bytes
        self._listing = tuple(tool.listed() for tool in self._tools.values())

    @property
    def source_name(self) -> str:
        return self._source_name

    def declared_tool_names(self) -> Collection[str]:
        return tuple(self._tools)

    def cached_tools(self) -> Sequence[ListedTool]:
        return self._listing

    async def list_tools(self) -> Sequence[ListedTool]:
        return self._listing

    def _tool(self, name: str | None) -> ConnectorTool:
        tool = self._tools.get(name or "")
        if tool is None:
            raise ToolExecutionError(
                f"{name!r} is not a tool of connector source {self._source_name!r}"
            )
        return tool

    def _asks_for_approval(self, tool: ConnectorTool, arguments: Any) -> bool:
        rule = tool.requires_approval
        if rule is None or isinstance(rule, bool):
            return connector_requires_approval(
                approval_recommended=tool.manifest.approval_recommended, requires_approval=rule
            )
        try:
            return bool(rule(arguments))
        except Exception:
            return True  # a predicate that raises asks

    def deferred_tool_call(
        self,
        turn: AgentTurnContext,
        *,
        tool_call_id: str,
        tool_name: str,
        arguments: str,
        listed_tool: ListedTool | None = None,
    ) -> DeferredToolCall:
        """The call of one of the source's tools, with the manifest's effect and ``ordered`` writes.

        A name the source does not have gets a call that fails as not this source's
        tool without an approval (``unclassified``, no approval), as in the built-in
        loop, unless it is a recorded call (``listed_tool=None``, its record in
        ``turn.tool_calls`` with this source's reference), such as one of a tool a
        later deploy removed, which a framework adapter resumes: that is rebuilt as
        it was recorded.
        """
        tool = self._tools.get(tool_name)
        if tool is None:
            return _not_offered(turn, tool_call_id, tool_name, arguments, listed_tool)
        try:
            decoded = _decoded(arguments, tool)
        except ToolExecutionError:
            # Arguments that break the schema never run, so they never wait: whatever the
            # manifest, the tool or a session policy says, no one approves a call that
            # its tool Step refuses before the operation runs.
            policy = ToolPolicy(tool.effect, requires_approval=False)
        else:
            policy = merge_connector_tool_policy(
                tool.effect,
                self._asks_for_approval(tool, decoded),
                turn.tool_policies.get(tool_name),
            )
        return DeferredToolCall(
            tool_call_id,
            tool_name,
            arguments,
            policy,
            tool_source_reference=tool_name,
            ordered=tool.effect is not ToolEffect.READ,
        )

    def tool_call_step_options(self, call: AgentToolCall) -> ToolCallStepOptions | None:
        tool = self._tools.get(call.tool_source_reference or "")
        if tool is None:
            return None
        return ToolCallStepOptions(
            timeout=tool.manifest.timeout, retry_policy=tool.manifest.retry_policy
        )

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        tool = self._tool(call.tool_call.tool_source_reference)
        manifest = tool.manifest
        arguments = _decoded(call.tool_call.arguments, tool)
        step_execution_id = getattr(call.context, "step_execution_id", None)
        if not isinstance(step_execution_id, str):
            raise ToolExecutionError(f"{tool.name} runs only inside an engine's tool Step")
        call_id = sdk.derive_call_id(call.flow_id, step_execution_id, manifest.operation)
        observation = FenceObservation(call_id, call.attempt, call.heartbeat_checkpoint)
        context = ConnectorStepContext(call, observation)
        connector_call = sdk.Call(
            call_id=call_id, connection=tool.reference, idempotency_key=call.idempotency_key
        )
        mutation = manifest.kind is ConnectorOperationKind.MUTATION
        run = sdk.run_mutation if mutation else sdk.run_query
        try:
            result = await run(tool.operation, connector_call, context, arguments)
        except sdk.RetryError as error:
            outcome = classify_connector_retry(
                tool.effect, fence_proved_not_sent=observation.proved_not_sent
            )
            if outcome is None:
                sdk.raise_dex_retry(error)
                raise  # raise_dex_retry always raises
            _raise_unless_succeeded(outcome)
            raise AssertionError("a retry never succeeds") from error
        outcome = classify_connector_branch(
            connector=manifest.connector_id,
            operation=manifest.operation,
            kind=manifest.kind,
            branch=result.branch,
            required_branches=manifest.required_branches,
            listed_branches=manifest.listed_branches,
            may_have_sent=observation.used and observation.may_have_sent,
            value=result.value,
            error_kind=result.error_kind,
            message=result.message,
        )
        output = _raise_unless_succeeded(outcome)
        limit = tool.max_result_bytes or self._max_result_bytes
        text, full_size = truncate_connector_result(output, limit)
        return ToolExecutionResult(text, truncated_output_bytes=full_size)

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Connector calls start no tool tasks, so no poll ever reaches this source."""
        raise ToolExecutionError("connector tools start no tool tasks")
