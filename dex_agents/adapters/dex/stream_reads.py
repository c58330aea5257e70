"""Reading a session's Stream through Dex for the browser helpers: pages, and long polls Dex accepts.

Dex SDK 1.23.0 lists retained Stream messages newest first without waiting
(``AsyncClient.list_stream_messages`` and ``Client.list_stream_messages``), each
with the token that resumes after it, which is what ``read_stream`` takes;
``DexStreamPageReader`` maps it. Dex reads a Stream by Flow ID and does not
check that the session exists, so a session unknown to Dex lists as empty (the
embedded engine raises ``FlowNotFoundError``). How a Dex server with the Stream
Store disabled answers a listing is not verified against a server.

Dex takes a long poll's wait in whole seconds (the SDK raises ``ValueError``
for anything else, and sends ``None`` as 0, the server's default wait), so
``dex_poll_timeout`` (in ``poll_timeouts``, which ``DexFlowClient.read_stream``
uses) rounds a wait up to whole seconds, at least one: on Dex the browser
stream's token check waits up to 1 s on an idle Stream.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar, runtime_checkable

import dex

from dex_agents.adapters.dex.bound_flows import dex_bound_flow
from dex_agents.adapters.dex.errors import port_error
from dex_agents.adapters.dex.stream_messages import port_stream_message
from dex_agents.ports.engine import FlowDefinition
from dex_agents.ports.errors import FlowDefinitionError
from dex_agents.ports.persistence import StreamDef
from dex_agents.ports.stream_pages import StreamMessagesPage

ValueT = TypeVar("ValueT")


@runtime_checkable
class DexStreamListingClient(Protocol):
    """``dex.AsyncClient.list_stream_messages``, with its signature."""

    async def list_stream_messages(
        self, flow_id: str, stream: dex.Stream[ValueT], page_size: int, before_page_token: str = ""
    ) -> dex.StreamMessagesPage[ValueT]:
        """One newest-first page of retained Stream messages, without waiting."""


def dex_event_stream(flow: FlowDefinition) -> tuple[dex.Stream[Any], StreamDef[Any]]:
    """The Dex Stream of a Dex-bound session Flow and the port declaration it carries.

    ``TypeError`` for a Flow not bound to Dex, ``FlowDefinitionError`` for one without a Stream.
    """
    schema = dex_bound_flow(flow).dex_schema
    if schema.stream is None or schema.stream_declaration is None:
        raise FlowDefinitionError(f"Flow type {flow.flow_type} has no Stream")
    return schema.stream, schema.stream_declaration


def port_stream_page(
    declaration: StreamDef[Any], flow_id: str, page: dex.StreamMessagesPage[Any]
) -> StreamMessagesPage[Any]:
    """A Dex page of Stream messages as the port's page; a message that no longer decodes
    is left out (``stream_messages``)."""
    messages = (port_stream_message(declaration, flow_id, message) for message in page.messages)
    return StreamMessagesPage(
        messages=[message for message in messages if message is not None],
        next_page_token=page.next_page_token,
    )


def check_page_size(page_size: int) -> None:
    """Refuse a page size that is not a positive ``int`` before Dex is asked."""
    if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size <= 0:
        raise ValueError(f"page_size must be a positive int, not {page_size!r}")


class DexStreamPageReader:
    """A ``StreamPageReader`` over a Dex ``AsyncClient``; the caller owns and closes the client."""

    def __init__(self, client: DexStreamListingClient) -> None:
        self._client = client

    async def list_stream_messages(
        self, flow: FlowDefinition, flow_id: str, page_size: int, before_page_token: str = ""
    ) -> StreamMessagesPage[Any]:
        """One page of the session's retained events, newest first; never waits."""
        stream, declaration = dex_event_stream(flow)
        check_page_size(page_size)
        try:
            page = await self._client.list_stream_messages(
                flow_id, stream, page_size, before_page_token
            )
        except (dex.DexServiceError, dex.FlowDefinitionError) as error:
            raise port_error(error) from error
        return port_stream_page(declaration, flow_id, page)
