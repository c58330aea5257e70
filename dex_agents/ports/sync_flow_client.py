"""The synchronous client side of the engine port, for WSGI servers and plain threads.

``SyncFlowClient`` holds the calls the browser stream helpers make
(``dex_agents.ui_stream``'s ``_sync`` functions), with the contracts of their
``FlowClient`` and ``StreamPageReader`` namesakes. Each call blocks its thread
and runs no event loop. The embedded engine's ``SyncLocalFlowClient`` and the
Dex adapter's ``DexSyncFlowClient`` (over ``dex.Client``) implement it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Protocol, runtime_checkable

from dex_agents.ports.engine import FlowDefinition
from dex_agents.ports.flow_client import StreamMessage
from dex_agents.ports.stream_pages import StreamMessagesPage


@runtime_checkable
class SyncFlowClient(Protocol):
    """A blocking client of an engine: RPCs and Stream reads. Safe to share between threads."""

    def invoke_rpc(self, flow: FlowDefinition, flow_id: str, rpc: str, input: Any) -> Any:
        """Run an RPC in one transaction and return its output, decoded as its wire type."""
        ...

    def read_stream(
        self,
        flow: FlowDefinition,
        flow_id: str,
        resume_token: str = "",
        poll_timeout: timedelta | None = None,
    ) -> StreamMessage[Any]:
        """The next event after ``resume_token`` (the oldest retained one for ``""``).

        Long-polls up to ``poll_timeout``; raises ``StreamReadTimeoutError`` when none
        arrives and ``InvalidResumeTokenError`` for a token this Stream never issued.
        """
        ...

    def list_stream_messages(
        self, flow: FlowDefinition, flow_id: str, page_size: int, before_page_token: str = ""
    ) -> StreamMessagesPage[Any]:
        """One page of the session's retained events, newest first, without waiting."""
        ...
