"""``DexSyncFlowClient``: the port's ``SyncFlowClient`` over Dex's synchronous ``dex.Client`` (SDK 1.23.0).

It makes the calls ``DexFlowClient`` makes over an ``AsyncClient``, with the
same value mapping and error translation, for WSGI servers: ``invoke_rpc``,
``read_stream`` and ``list_stream_messages``. Where Dex says only "closed or
not found", one ``describe_flow`` call tells the two apart, as the async client
does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Protocol, TypeVar, overload

import dex

from dex_agents.adapters.dex.bound_flows import closed_or_missing, dex_rpc_call
from dex_agents.adapters.dex.errors import port_error, stream_read_error
from dex_agents.adapters.dex.poll_timeouts import dex_poll_timeout, remaining_poll_timeout
from dex_agents.adapters.dex.stream_messages import port_stream_message
from dex_agents.adapters.dex.stream_owners import check_stream_owner_sync
from dex_agents.adapters.dex.stream_reads import (
    check_page_size,
    dex_event_stream,
    port_stream_page,
)
from dex_agents.ports.engine import FlowDefinition
from dex_agents.ports.errors import (
    FlowNotActiveError,
    FlowNotFoundError,
    StreamReadTimeoutError,
)
from dex_agents.ports.flow_client import StreamMessage
from dex_agents.ports.stream_pages import StreamMessagesPage

ValueT = TypeVar("ValueT")


class DexSyncClientLike(Protocol):
    """The calls of ``dex.Client`` that ``DexSyncFlowClient`` makes, with their signatures."""

    @overload
    def invoke_rpc(
        self,
        rpc_method: Callable[..., Any],
        flow_id: str,
        input: Any,
        *,
        run_id: str = "",
        options: dex.RPCInvokeOptions = ...,
    ) -> Any: ...

    @overload
    def invoke_rpc(
        self,
        rpc_method: Callable[..., Any],
        flow_id: str,
        *,
        run_id: str = "",
        options: dex.RPCInvokeOptions = ...,
    ) -> Any: ...

    def describe_flow(self, flow_id: str) -> dex.FlowInfo:
        """The current or latest run of a Flow ID."""

    def read_stream(
        self,
        flow_id: str,
        stream: dex.Stream[ValueT],
        resume_token: str = "",
        timeout: timedelta | None = None,
    ) -> dex.StreamMessage[ValueT]:
        """Long-poll the next Stream message after a resume token."""

    def list_stream_messages(
        self, flow_id: str, stream: dex.Stream[ValueT], page_size: int, before_page_token: str = ""
    ) -> dex.StreamMessagesPage[ValueT]:
        """One newest-first page of retained Stream messages, without waiting."""


class DexSyncFlowClient:
    """A ``SyncFlowClient`` over a Dex ``dex.Client``; the caller owns and closes the client."""

    def __init__(self, client: DexSyncClientLike) -> None:
        self._client = client

    @property
    def client(self) -> DexSyncClientLike:
        """The Dex client this adapter calls."""
        return self._client

    def invoke_rpc(self, flow: FlowDefinition, flow_id: str, rpc: str, input: Any) -> Any:
        """Run an RPC and return its output, decoded as its wire type.

        A missing session raises ``FlowNotFoundError`` and a closed one that the
        RPC needs active raises ``FlowNotActiveError``. A session of another Flow
        type is told apart only when Dex refuses the RPC, as ``DexFlowClient``'s is.
        """
        call = dex_rpc_call(flow, rpc, input)
        try:
            if call.takes_input:
                output = self._client.invoke_rpc(call.method, flow_id, call.wire_input)
            else:
                output = self._client.invoke_rpc(call.method, flow_id)
        except dex.FlowNotActiveOrNotFoundError as error:
            raise self._closed_or_missing(flow_id, error, flow.flow_type) from error
        except (dex.DexServiceError, dex.FlowDefinitionError) as error:
            raise port_error(error) from error
        return call.decode(output)

    def read_stream(
        self,
        flow: FlowDefinition,
        flow_id: str,
        resume_token: str = "",
        poll_timeout: timedelta | None = None,
    ) -> StreamMessage[Any]:
        """The next event after ``resume_token``; long-polls Dex up to ``poll_timeout`` (30 s).

        Dex waits whole seconds, so the wait is rounded up, to at least 1 s.
        Raises ``StreamReadTimeoutError`` when none arrives and
        ``InvalidResumeTokenError`` for a token Dex rejects as an invalid argument;
        an event that no longer decodes is skipped with a warning (``stream_messages``),
        and a read that finds no event of a session that does not exist or is of
        another Flow type raises ``FlowNotFoundError`` (``stream_owners``).
        """
        stream, declaration = dex_event_stream(flow)
        timeout = dex_poll_timeout(poll_timeout)
        deadline = time.monotonic() + timeout.total_seconds()
        while True:
            try:
                message = self._client.read_stream(flow_id, stream, resume_token, timeout)
            except (dex.DexServiceError, dex.FlowDefinitionError) as error:
                failure = stream_read_error(error, flow_id, resume_token)
                if isinstance(failure, StreamReadTimeoutError):  # no event: whose Stream?
                    check_stream_owner_sync(self._client.describe_flow, flow.flow_type, flow_id)
                raise failure from error
            event = port_stream_message(declaration, flow_id, message)
            if event is not None:
                return event
            # Skipped (``stream_messages``): read on past it, within what is left of the wait.
            resume_token = message.resume_token
            timeout = remaining_poll_timeout(deadline)

    def list_stream_messages(
        self, flow: FlowDefinition, flow_id: str, page_size: int, before_page_token: str = ""
    ) -> StreamMessagesPage[Any]:
        """One page of the session's retained events, newest first; never waits."""
        stream, declaration = dex_event_stream(flow)
        check_page_size(page_size)
        try:
            page = self._client.list_stream_messages(flow_id, stream, page_size, before_page_token)
        except (dex.DexServiceError, dex.FlowDefinitionError) as error:
            raise port_error(error) from error
        return port_stream_page(declaration, flow_id, page)

    def _closed_or_missing(
        self, flow_id: str, error: dex.FlowNotActiveOrNotFoundError, flow_type: str
    ) -> Exception:
        """The error for what Dex refused as "closed or not found", told apart with ``describe_flow``."""
        try:
            info: dex.FlowInfo | None = self._client.describe_flow(flow_id)
        except dex.DexServiceError as probe_error:
            if type(port_error(probe_error)) is not FlowNotFoundError:
                return port_error(error)
            info = None
        found = closed_or_missing(flow_id, error, flow_type, info)
        if isinstance(found, Exception):
            return found
        return FlowNotActiveError(f"session {flow_id!r} is {found}")
