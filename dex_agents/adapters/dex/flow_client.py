"""``DexFlowClient``: the engine port's ``FlowClient`` over a Dex ``AsyncClient`` (SDK 1.23.0).

It behaves as the embedded engine's ``LocalFlowClient`` does, except where SDK
1.23.0 lacks an API (each method says what differs). Values cross with
``wire_values.to_dex``/``from_dex``; Dex errors become port errors through
``errors.port_error``, and where Dex says only "closed or not found", one
``describe_flow`` call tells the two apart, as the embedded engine does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, Protocol, TypeVar, overload

import dex
from dex import ActiveStepSearchMode

from dex_agents.adapters.dex.bound_flows import (
    closed_or_missing,
    dex_bound_flow,
    dex_rpc_call,
)
from dex_agents.adapters.dex.errors import (
    DexCapabilityUnavailableError,
    port_error,
    stream_read_error,
)
from dex_agents.adapters.dex.flow_statuses import port_flow_status
from dex_agents.adapters.dex.poll_timeouts import dex_poll_timeout, remaining_poll_timeout
from dex_agents.adapters.dex.search import (
    AGENT_SESSION_ACTIVE_STEP_SEARCH_MODE,
    DexSearchClient,
    flow_type_query,
    search_all_flows,
    session_start_options,
)
from dex_agents.adapters.dex.stream_messages import port_stream_message
from dex_agents.adapters.dex.stream_owners import check_stream_owner
from dex_agents.adapters.dex.stream_reads import dex_event_stream
from dex_agents.adapters.dex.wire_values import to_dex
from dex_agents.ports.engine import FlowDefinition
from dex_agents.ports.errors import (
    FlowNotActiveError,
    FlowNotFoundError,
    StreamReadTimeoutError,
)
from dex_agents.ports.flow_client import (
    FlowInfo,
    StepHistoryEntry,
    StreamMessage,
)
from dex_agents.ports.persistence import AttributeDef

T = TypeVar("T")
ValueT = TypeVar("ValueT")


class DexAsyncClientLike(DexSearchClient, Protocol):
    """The calls of ``dex.AsyncClient`` that ``DexFlowClient`` makes, with their signatures."""

    async def start_flow(
        self,
        flow: dex.Flow[Any],
        flow_id: str,
        input: Any,
        options: dex.StartFlowOptions = ...,
    ) -> str:
        """Start a Flow; return its run ID."""

    @overload
    async def invoke_rpc(
        self,
        rpc_method: Callable[..., Any],
        flow_id: str,
        input: Any,
        *,
        run_id: str = "",
        options: dex.RPCInvokeOptions = ...,
    ) -> Any: ...

    @overload
    async def invoke_rpc(
        self,
        rpc_method: Callable[..., Any],
        flow_id: str,
        *,
        run_id: str = "",
        options: dex.RPCInvokeOptions = ...,
    ) -> Any: ...

    async def stop_flow(self, flow_id: str, options: dex.StopFlowOptions = ...) -> None:
        """Request cancellation, termination or failure of an active Flow."""

    async def describe_flow(self, flow_id: str) -> dex.FlowInfo:
        """The current or latest run of a Flow ID."""

    async def read_stream(
        self,
        flow_id: str,
        stream: dex.Stream[ValueT],
        resume_token: str = "",
        timeout: timedelta | None = None,  # noqa: ASYNC109 - the SDK's own signature
    ) -> dex.StreamMessage[ValueT]:
        """Long-poll the next Stream message after a resume token."""


def _check_flow_id(flow_id: str) -> None:
    if not flow_id or "/" in flow_id:
        raise ValueError(f"a session ID must be non-empty and contain no '/': {flow_id!r}")


def _port_flow_info(info: dex.FlowInfo | dex.SearchFlowEntry) -> FlowInfo:
    return FlowInfo(
        flow_id=info.flow_id,
        flow_type=info.flow_type,
        status=port_flow_status(info.status),
        started_at=info.started_at,
        closed_at=info.closed_at if isinstance(info, dex.SearchFlowEntry) else None,
        # SDK 1.23.0 returns no active Step list, neither from describe nor from search.
        active_step_types=(),
    )


class DexFlowClient:
    """A ``FlowClient`` over a Dex ``AsyncClient``: ``AgentSessionClient`` runs on Dex through it.

    Sessions start with ``session_start_options(start_options,
    active_step_search_mode)``: by default ``AGENT_SESSION_ACTIVE_STEP_SEARCH_MODE``,
    so a session waiting for a person is found by ``search_flows``. The caller
    owns ``client`` (and its blob cache) and closes it.
    """

    def __init__(
        self,
        client: DexAsyncClientLike,
        *,
        active_step_search_mode: ActiveStepSearchMode | None = (
            AGENT_SESSION_ACTIVE_STEP_SEARCH_MODE
        ),
        start_options: dex.StartFlowOptions | None = None,
    ) -> None:
        self._client = client
        self._start_options = session_start_options(start_options, active_step_search_mode)

    @property
    def client(self) -> DexAsyncClientLike:
        """The Dex client this adapter calls."""
        return self._client

    @property
    def start_options(self) -> dex.StartFlowOptions:
        """The options every session starts with, the search mode merged in."""
        return self._start_options

    async def start_flow(
        self,
        flow: FlowDefinition,
        flow_id: str,
        input: Any,
        *,
        initial_attributes: Mapping[AttributeDef[Any], Any] | None = None,
    ) -> str:
        """Start a session; return its run ID. Raises ``FlowAlreadyStartedError``.

        ``initial_attributes`` are written with the start, each in its wire form.
        """
        bound = dex_bound_flow(flow)
        if not isinstance(flow, dex.Flow):
            raise TypeError(f"Flow type {flow.flow_type} is not a dex.Flow registered with Dex")
        _check_flow_id(flow_id)
        options = self._start_options
        for attribute, value in (initial_attributes or {}).items():
            dex_attribute = bound.dex_schema.attribute(attribute)
            options = options.with_attribute(dex_attribute, to_dex(attribute.value_type, value))
        start = flow.start_step
        start_input = None if start is None else to_dex(start.input_type, input)
        try:
            return await self._client.start_flow(flow, flow_id, start_input, options)
        except (dex.DexServiceError, dex.FlowDefinitionError) as error:
            raise port_error(error) from error

    async def invoke_rpc(self, flow: FlowDefinition, flow_id: str, rpc: str, input: Any) -> Any:
        """Run an RPC and return its output, decoded as its wire type.

        As with the embedded engine, a missing session raises ``FlowNotFoundError``
        and a closed one that the RPC needs active raises ``FlowNotActiveError``.
        Dex's RPC request names no Flow type, so a session of another Flow type
        raises ``FlowNotFoundError`` only when Dex refuses the RPC for it; one of
        another agent, which has the same RPCs, runs it.
        """
        call = dex_rpc_call(flow, rpc, input)
        try:
            if call.takes_input:
                output = await self._client.invoke_rpc(call.method, flow_id, call.wire_input)
            else:
                output = await self._client.invoke_rpc(call.method, flow_id)
        except dex.FlowNotActiveOrNotFoundError as error:
            found = await self._closed_or_missing(flow_id, error, flow.flow_type)
            if isinstance(found, Exception):
                raise found from error
            raise FlowNotActiveError(f"session {flow_id!r} is {found}") from error
        except (dex.DexServiceError, dex.FlowDefinitionError) as error:
            raise port_error(error) from error
        return call.decode(output)

    async def stop_flow(self, flow_id: str, reason: str | None = None) -> None:
        """Cancel a session (``StopType.CANCEL``); its state stays readable.

        Stopping a session that no longer runs does nothing, as with the embedded
        engine; a missing one raises ``FlowNotFoundError``.
        """
        options = dex.StopFlowOptions(type=dex.StopType.CANCEL, reason=reason)
        try:
            await self._client.stop_flow(flow_id, options)
        except dex.FlowNotActiveOrNotFoundError as error:
            found = await self._closed_or_missing(flow_id, error)
            if isinstance(found, Exception):
                raise found from error
        except dex.DexServiceError as error:
            raise port_error(error) from error

    async def describe_flow(self, flow_id: str) -> FlowInfo:
        """A session's type, status and start time.

        Dex's ``describe_flow`` returns neither a close time nor the active Steps,
        and SDK 1.23.0 documents no search field for a Flow ID to fetch them with:
        ``closed_at`` is ``None`` and ``active_step_types`` is ``()``. Use
        ``find_waiting_sessions`` to find sessions by the Step they wait in.
        """
        try:
            info = await self._client.describe_flow(flow_id)
        except dex.DexServiceError as error:
            raise port_error(error) from error
        return _port_flow_info(info)

    async def read_stream(
        self,
        flow: FlowDefinition,
        flow_id: str,
        resume_token: str = "",
        poll_timeout: timedelta | None = None,
    ) -> StreamMessage[Any]:
        """The next event after ``resume_token``; long-polls Dex up to ``poll_timeout`` (30 s).

        Raises ``StreamReadTimeoutError`` when none arrives; an event that no
        longer decodes is skipped with a warning (``stream_messages``). A read
        that finds no event raises ``FlowNotFoundError`` once the wait is over
        when the session does not exist or is of another Flow type, as the
        embedded engine does (``stream_owners``); a token Dex rejects as an
        invalid argument raises ``InvalidResumeTokenError`` (how Dex rejects a
        foreign token is not verified against a server).
        """
        stream, declaration = dex_event_stream(flow)
        timeout = dex_poll_timeout(poll_timeout)
        deadline = time.monotonic() + timeout.total_seconds()
        while True:
            try:
                message = await self._client.read_stream(flow_id, stream, resume_token, timeout)
            except (dex.DexServiceError, dex.FlowDefinitionError) as error:
                failure = stream_read_error(error, flow_id, resume_token)
                if isinstance(failure, StreamReadTimeoutError):  # no event: whose Stream?
                    await check_stream_owner(self._client.describe_flow, flow.flow_type, flow_id)
                raise failure from error
            event = port_stream_message(declaration, flow_id, message)
            if event is not None:
                return event
            # Skipped (``stream_messages``): read on past it, within what is left of the wait.
            resume_token = message.resume_token
            timeout = remaining_poll_timeout(deadline)

    async def read_step_history(self, flow_id: str) -> Sequence[StepHistoryEntry]:
        """Not available on Dex: raises ``DexCapabilityUnavailableError``.

        An honest gap: SDK 1.23.0 exposes no Flow history read (the FlowService
        has one, the SDK does not call it). Read a session's history with
        ``dexcli flow history <session_id>`` or in Dex Web.
        """
        raise DexCapabilityUnavailableError(
            "read_step_history",
            "client API for a Flow's history",
            f"read it with `dexcli flow history {flow_id}` or in Dex Web",
        )

    async def read_attribute(self, flow_id: str, attribute: AttributeDef[T]) -> T | None:
        """Not available on Dex: raises ``DexCapabilityUnavailableError``.

        An honest gap: SDK 1.23.0 has no ``get_attributes`` (the FlowService has
        one, the SDK does not call it). Read session state through the
        ``get_agent_snapshot`` RPC (``AgentSessionClient.get_agent_snapshot``) or
        with ``dexcli flow state <session_id>``.
        """
        raise DexCapabilityUnavailableError(
            f"read_attribute({attribute.name})",
            "client API to read Attributes (get_attributes)",
            "read session state through the get_agent_snapshot RPC "
            f"(AgentSessionClient.get_agent_snapshot) or `dexcli flow state {flow_id}`",
        )

    async def list_flows(self, flow_type: str | None = None) -> Sequence[FlowInfo]:
        """Every session of ``flow_type`` that Dex's search knows, oldest first.

        ``flow_type`` is required: SDK 1.23.0 documents no search query that
        matches every Flow, so ``None`` raises ``ValueError``. Entries carry the
        close time but no active Step list (``active_step_types`` is ``()``).
        """
        if flow_type is None:
            raise ValueError(
                "DexFlowClient.list_flows needs a flow_type: Dex SDK 1.23.0 documents "
                'no search query matching every Flow, only FlowType = "<type>"'
            )
        try:
            entries = await search_all_flows(self._client, flow_type_query(flow_type))
        except dex.DexServiceError as error:
            raise port_error(error) from error
        infos = [_port_flow_info(entry) for entry in entries]
        return sorted(infos, key=lambda info: (info.started_at, info.flow_id))

    async def _closed_or_missing(
        self, flow_id: str, error: dex.FlowNotActiveOrNotFoundError, flow_type: str | None = None
    ) -> Exception | str:
        """Tell apart what Dex refused as "closed or not found", as the embedded engine does.

        The error to raise for a missing session (or one of another ``flow_type``),
        else the closed session's status; Dex's own error when that cannot be told.
        """
        try:
            info = await self._client.describe_flow(flow_id)
        except dex.DexServiceError as probe_error:
            if type(port_error(probe_error)) is not FlowNotFoundError:
                return port_error(error)
            info = None
        return closed_or_missing(flow_id, error, flow_type, info)
