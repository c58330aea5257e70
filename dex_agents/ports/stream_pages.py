"""Listing a session's Stream newest first, one page at a time, without waiting.

``FlowClient.read_stream`` follows a Stream forward; a browser snapshot also
needs to look back from the newest event, to find where the active turn's
events begin. Dex offers that as ``list_stream_messages``; the embedded engine
reads it from its store. Both implement ``StreamPageReader``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from dex_agents.ports.engine import FlowDefinition
from dex_agents.ports.flow_client import StreamMessage

T = TypeVar("T")


@dataclass(frozen=True)
class StreamMessagesPage(Generic[T]):
    """One page of retained Stream events, newest first.

    Each message's ``resume_token`` resumes after it, as ``read_stream``'s do.
    ``next_page_token`` lists the older events; ``""`` on the oldest page.
    """

    messages: Sequence[StreamMessage[T]]
    next_page_token: str


@runtime_checkable
class StreamPageReader(Protocol):
    """Lists a session's retained Stream events newest first.

    Contract: a call never waits for new events. ``before_page_token`` is ``""``
    for the newest page or a page's ``next_page_token``, passed unchanged.
    Trimming may remove events between pages; a page holds at most
    ``page_size`` events (positive) and is empty only when the Stream holds none.
    """

    async def list_stream_messages(
        self, flow: FlowDefinition, flow_id: str, page_size: int, before_page_token: str = ""
    ) -> StreamMessagesPage[Any]:
        """One page of the session's retained events, newest first."""
        ...
