"""Finding sessions that need a person, through Dex's Flow search.

The spec's "Finding sessions that need a person": ``AgentSessionClient.start_session``
makes a session searchable by the Steps it waits in, so one query finds every
session waiting for a person, across agents::

    waiting = await client.search_flows('ActiveStepTypes = "AwaitToolApproval"', 50)

Dex maintains the ``FlowType`` and ``ActiveStepTypes`` search fields itself; SDK
1.23.0 takes the query as raw text, so :func:`waiting_sessions_query` builds it
with the values quoted, and :func:`find_waiting_sessions` pages through the result.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import dex
from dex import ActiveStepSearchMode

AGENT_SESSION_ACTIVE_STEP_SEARCH_MODE = ActiveStepSearchMode.WITH_WAIT_FOR
"""The ``active_step_search_mode`` that ``start_session`` starts a session with.

Spec, "Finding sessions that need a person": a session is searchable by the
Steps it *waits* in, and leaves the search when it moves on. Dex SDK 1.23.0's
``ActiveStepSearchMode.WITH_WAIT_FOR`` indexes "only active Steps that define
``wait_for``", which are exactly the session's waiting Steps
(``AwaitToolApproval``, ``AwaitQuestionAnswer``, ...); ``ALL`` would also index
every running model or tool Step, and ``DEFAULT`` leaves it to the server.
``AsyncClient.start_flow`` does not turn this on: pass this value in
``FlowConfig(active_step_search_mode=...)`` as the start options'
``config_override``, or call ``update_flow_config`` for a running session.
"""

ACTIVE_STEP_TYPES_FIELD = "ActiveStepTypes"
"""The Dex search field listing the Step types a Flow is active (waiting) in."""

FLOW_TYPE_FIELD = "FlowType"
"""The Dex search field holding a Flow's type."""

DEFAULT_SEARCH_PAGE_SIZE = 50
"""How many sessions one ``search_flows`` page asks for, as in the spec's example."""


class DexSearchClient(Protocol):
    """The part of ``dex.AsyncClient`` that searches Flows."""

    async def search_flows(
        self,
        query: str,
        page_size: int,
        next_page_token: str = "",
        *,
        include_continued_as_new: bool = False,
    ) -> dex.SearchFlowsPage:
        """One page of Flow runs matching a visibility query."""
        ...


def session_start_options(
    start_options: dex.StartFlowOptions | None = None,
    active_step_search_mode: ActiveStepSearchMode | None = AGENT_SESSION_ACTIVE_STEP_SEARCH_MODE,
) -> dex.StartFlowOptions:
    """The start options of a session: ``start_options`` with the session's search mode.

    ``active_step_search_mode`` goes into ``config_override`` unless that already
    sets one; ``None`` leaves the options as given. Everything else (timeout,
    ``id_reuse_policy``, ``request_id``, ``ignore_already_started``, other
    ``FlowConfig`` fields) is kept.
    """
    options = start_options or dex.StartFlowOptions()
    if active_step_search_mode is None:
        return options
    config = options.config_override
    if config is None:
        config = dex.FlowConfig(active_step_search_mode=active_step_search_mode)
    elif config.active_step_search_mode is None:
        config = dataclasses.replace(config, active_step_search_mode=active_step_search_mode)
    else:
        return options
    return dataclasses.replace(options, config_override=config)


def quote_query_value(value: str, what: str) -> str:
    """``value`` as a double-quoted search-query string; ``what`` names it in the error.

    Backslashes and double quotes are escaped, so a value cannot end the string
    early and change the query. Raises ``ValueError`` for an empty or blank value.
    """
    if not value.strip():
        raise ValueError(f"{what} must be a non-empty name, got {value!r}")
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def flow_type_query(flow_type: str) -> str:
    """The search query matching every Flow of ``flow_type``: ``FlowType = "<flow_type>"``."""
    return f"{FLOW_TYPE_FIELD} = {quote_query_value(flow_type, 'flow_type')}"


def waiting_sessions_query(step_type: str, flow_type: str | None = None) -> str:
    """The search query for sessions waiting in Step ``step_type`` (of one Flow type).

    ``waiting_sessions_query("AwaitToolApproval")`` is
    ``ActiveStepTypes = "AwaitToolApproval"``; with ``flow_type="support"`` it is
    ``ActiveStepTypes = "AwaitToolApproval" AND FlowType = "support"``.
    """
    query = f"{ACTIVE_STEP_TYPES_FIELD} = {quote_query_value(step_type, 'step_type')}"
    if flow_type is None:
        return query
    return f"{query} AND {flow_type_query(flow_type)}"


async def search_all_flows(
    client: DexSearchClient, query: str, *, page_size: int = DEFAULT_SEARCH_PAGE_SIZE
) -> list[dex.SearchFlowEntry]:
    """Every Flow run matching ``query``, page after page, in the server's order."""
    if page_size < 1:
        raise ValueError(f"page_size must be at least 1, got {page_size}")
    entries: list[dex.SearchFlowEntry] = []
    seen_tokens: set[str] = set()
    token = ""
    while True:
        page = await client.search_flows(query, page_size, token)
        entries.extend(page.flows)
        token = page.next_page_token
        if not token:
            return entries
        if token in seen_tokens:
            # A server that hands back a token twice would otherwise be paged forever.
            raise RuntimeError(f"Dex search returned page token {token!r} twice for {query!r}")
        seen_tokens.add(token)


async def find_waiting_sessions(
    client: DexSearchClient,
    step_type: str,
    *,
    flow_type: str | None = None,
    page_size: int = DEFAULT_SEARCH_PAGE_SIZE,
) -> list[dex.SearchFlowEntry]:
    """Every session waiting in Step ``step_type`` (e.g. ``"AwaitToolApproval"``), across agents.

    Only sessions started with ``AGENT_SESSION_ACTIVE_STEP_SEARCH_MODE`` (what
    ``start_session`` does) are found; ``flow_type`` narrows it to one agent.
    """
    query = waiting_sessions_query(step_type, flow_type)
    return await search_all_flows(client, query, page_size=page_size)
