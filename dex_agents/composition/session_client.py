"""``AgentSessionClient``: sessions of one ``AgentSessionFlow`` through a Dex or an embedded client."""

from __future__ import annotations

import dex

from dex_agents.adapters.dex.flow import DexFlow
from dex_agents.adapters.dex.flow_client import DexFlowClient
from dex_agents.app.session_client import PortableSessionClient
from dex_agents.app.session_flow import PortableSessionFlow
from dex_agents.ports.flow_client import FlowClient


class AgentSessionClient(PortableSessionClient):
    """Sessions of one ``AgentSessionFlow`` through an engine's client.

    ``client`` is a Dex ``AsyncClient`` built with the Registry that holds
    ``flow``, or any ``FlowClient`` (the embedded engine's ``LocalFlowClient``).
    Through Dex, ``start_session`` makes the session searchable by the Steps it
    waits in (``AGENT_SESSION_ACTIVE_STEP_SEARCH_MODE``). Every RPC that locks
    retries ``RpcLockConflictError`` for 5 seconds, so a caller only sees it when
    a Step held the lock that long.
    """

    def __init__(self, client: FlowClient | dex.AsyncClient, flow: PortableSessionFlow) -> None:
        if isinstance(client, dex.AsyncClient):
            if not isinstance(flow, DexFlow):
                raise TypeError(
                    "a Dex AsyncClient needs the AgentSessionFlow registered in its Registry, "
                    f"not a {type(flow).__name__}"
                )
            client = DexFlowClient(client)
        super().__init__(client, flow)
