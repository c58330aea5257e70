"""``AgentSessionClient``: sessions of one ``AgentSessionFlow`` through a Dex or an embedded client."""

from __future__ import annotations

import dex

from dex_agents.adapters.dex.flow import DexFlow
from dex_agents.adapters.dex.flow_client import DexFlowClient
from dex_agents.adapters.dex.search import AGENT_SESSION_ACTIVE_STEP_SEARCH_MODE
from dex_agents.app.session_client import PortableSessionClient
from dex_agents.app.session_flow import PortableSessionFlow
from dex_agents.ports.flow_client import FlowClient


class AgentSessionClient(PortableSessionClient):
    """Sessions of one ``AgentSessionFlow`` through an engine's client.

    ``client`` is a Dex ``AsyncClient`` built with the Registry that holds
    ``flow``, or any ``FlowClient`` (the embedded engine's ``LocalFlowClient``).
    Through Dex, ``start_session`` makes the session searchable by the Steps it
    waits in: ``active_step_search_mode`` (``AGENT_SESSION_ACTIVE_STEP_SEARCH_MODE``
    by default, ``None`` to leave the server's mode) goes into the start options'
    ``config_override``, and ``start_options`` (timeout, ID reuse policy, request
    ID, ...) are the base of every start. Every RPC that locks retries
    ``RpcLockConflictError`` for 5 seconds, so a caller only sees it when a Step
    held the lock that long.
    """

    def __init__(
        self,
        client: FlowClient | dex.AsyncClient,
        flow: PortableSessionFlow,
        *,
        active_step_search_mode: dex.ActiveStepSearchMode | None = (
            AGENT_SESSION_ACTIVE_STEP_SEARCH_MODE
        ),
        start_options: dex.StartFlowOptions | None = None,
    ) -> None:
        # Typed out, but a developer may hand over Dex's synchronous client, which
        # would fail only at the first call, deep in the SDK.
        candidate: object = client
        if isinstance(candidate, dex.Client):
            raise TypeError(
                "AgentSessionClient needs a dex.AsyncClient, not the synchronous dex.Client; "
                "a dex.Client serves the _sync browser stream helpers"
            )
        if isinstance(client, dex.AsyncClient):
            if not isinstance(flow, DexFlow):
                raise TypeError(
                    "a Dex AsyncClient needs the AgentSessionFlow registered in its Registry, "
                    f"not a {type(flow).__name__}"
                )
            client = DexFlowClient(
                client, active_step_search_mode=active_step_search_mode, start_options=start_options
            )
        elif start_options is not None:
            raise TypeError("start_options are Dex StartFlowOptions; pass them with an AsyncClient")
        super().__init__(client, flow)
