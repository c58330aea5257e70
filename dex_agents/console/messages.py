"""The console's messages route: a page of a session's stored messages, by sequence.

``GET /api/sessions/{id}/messages?before_sequence=<n>&limit=<n>`` answers one
``list_agent_messages`` page (``after_sequence`` pages the other way), as the
snapshot carries its messages: without ``framework_item``, and with the page's
``plan_approvals``. The page asks for it to show what came before the
snapshot's last 200 messages. Its query is checked here, not clamped: a
``limit`` of 0 or 500 or a cursor that is not a whole number is the caller's
mistake, answered 400 with the parameter's name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from starlette.datastructures import QueryParams
from starlette.responses import Response

from dex_agents.composition.session_client import AgentSessionClient
from dex_agents.console.responses import JSONResponse
from dex_agents.console.transcript import plan_approvals
from dex_agents.domain.errors import DexAgentsError
from dex_agents.domain.paging import MAX_PAGE_LIMIT, MIN_PAGE_LIMIT
from dex_agents.domain.requests import AgentMessagesPage, ListAgentMessagesRequest
from dex_agents.domain.ui_stream_snapshot import BROWSER_HIDDEN_MESSAGE_FIELDS
from dex_agents.domain.wire import to_wire

DEFAULT_PAGE_LIMIT = MAX_PAGE_LIMIT
"""The ``limit`` of a request that names none: a page as long as the snapshot's."""

MAX_SEQUENCE = 2**63 - 1
"""The largest cursor the route takes: the largest sequence an engine's 64-bit integer holds."""

# ASCII digits only: int() also reads "+5", " 5", "1_000" and other scripts' digits.
_WHOLE_NUMBER = re.compile(r"[0-9]{1,19}")
_SHOWN_CHARS = 40


class PageQueryError(ValueError):
    """A messages query the route refuses (400); the message names the parameter."""


def _whole_number(query: QueryParams, name: str, low: int, high: int) -> int | None:
    values = query.getlist(name)
    if not values:
        return None
    if len(values) > 1:
        # Which one a server reads differs between frameworks: say so, not pick one.
        raise PageQueryError(f"{name} is given {len(values)} times")
    value = values[0]
    number = int(value) if _WHOLE_NUMBER.fullmatch(value) else None
    if number is None or not low <= number <= high:
        # Cut: the value comes from the caller and can be as long as the server lets a URL be.
        shown = value if len(value) <= _SHOWN_CHARS else value[:_SHOWN_CHARS] + "..."
        raise PageQueryError(f"{name} must be a whole number from {low} to {high}, not {shown!r}")
    return number


def page_request(query: QueryParams) -> ListAgentMessagesRequest:
    """The ``list_agent_messages`` request ``query`` asks for; ``PageQueryError`` when it is wrong.

    ``before_sequence`` (1 or more) or ``after_sequence`` (0 or more), not both;
    ``limit`` from 1 to 200 (200 when absent).
    """
    before = _whole_number(query, "before_sequence", 1, MAX_SEQUENCE)
    after = _whole_number(query, "after_sequence", 0, MAX_SEQUENCE)
    limit = _whole_number(query, "limit", MIN_PAGE_LIMIT, MAX_PAGE_LIMIT)
    if before is not None and after is not None:
        raise PageQueryError("set before_sequence or after_sequence, not both")
    return ListAgentMessagesRequest(
        before_sequence=before,
        after_sequence=after,
        limit=DEFAULT_PAGE_LIMIT if limit is None else limit,
    )


def messages_page_json(page: AgentMessagesPage) -> dict[str, Any]:
    """``page`` as the browser reads it: the snapshot's message fields, and ``plan_approvals``."""
    wire: dict[str, Any] = to_wire(page)
    wire["messages"] = [_browser_message(message) for message in wire["messages"]]
    wire["plan_approvals"] = plan_approvals(wire)
    return wire


def _browser_message(message: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k not in BROWSER_HIDDEN_MESSAGE_FIELDS}


async def messages_page(
    sessions: AgentSessionClient, session_id: str, query: QueryParams
) -> Response:
    """The route's answer: the page ``query`` asks for, 400 for a wrong query, 409 as the
    snapshot route answers when the session cannot be read."""
    try:
        request = page_request(query)
    except PageQueryError as error:
        return JSONResponse({"ok": False, "reason": str(error)}, status_code=400)
    try:
        page = await sessions.list_agent_messages(
            session_id,
            before_sequence=request.before_sequence,
            after_sequence=request.after_sequence,
            limit=request.limit,
        )
    except DexAgentsError as error:
        return JSONResponse({"ok": False, "reason": str(error)}, status_code=409)
    return JSONResponse(messages_page_json(page), headers={"Cache-Control": "no-store"})
