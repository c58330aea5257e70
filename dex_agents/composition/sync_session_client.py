"""Synchronous clients for the browser stream helpers: over the embedded engine and over Dex.

``open_sync_flow_client(runtime)`` is the ``SyncFlowClient`` of an open
``LocalRuntime``'s engine, for a WSGI app in the same process;
``as_sync_flow_client`` accepts what ``dex_agents.ui_stream``'s ``_sync``
functions take (a Dex ``dex.Client`` or any ``SyncFlowClient``) and refuses an
async client with a ``TypeError`` that says what to pass instead.
"""

from __future__ import annotations

import inspect
from datetime import timedelta

import dex

from dex_agents.adapters.dex.sync_flow_client import DexSyncFlowClient
from dex_agents.adapters.local.runtime import EngineRuntime
from dex_agents.adapters.local.sync_client import DEFAULT_SYNC_WAKE_INTERVAL, SyncLocalFlowClient
from dex_agents.app.session_client import PortableSessionClient
from dex_agents.ports.sync_flow_client import SyncFlowClient

SyncStreamClient = dex.Client | SyncFlowClient
"""What the ``_sync`` browser stream helpers take as ``client``."""


def open_sync_flow_client(
    runtime: EngineRuntime, *, wake_interval: timedelta = DEFAULT_SYNC_WAKE_INTERVAL
) -> SyncLocalFlowClient:
    """A blocking client of an open runtime's engine, for WSGI servers and other threads.

    It runs no event loop: each call blocks its thread on the engine's store, and
    a long poll checks for commits every ``wake_interval`` (50 ms by default). It
    works while the runtime is open.
    """
    return SyncLocalFlowClient(runtime.flow_client.engine, wake_interval=wake_interval)


def as_sync_flow_client(client: SyncStreamClient) -> SyncFlowClient:
    """``client`` as a ``SyncFlowClient``: a ``dex.Client`` is wrapped in ``DexSyncFlowClient``.

    Raises ``TypeError`` for an async client (a ``dex.AsyncClient``, a
    ``FlowClient`` or an ``AgentSessionClient``): the async helpers take those.
    """
    if isinstance(client, dex.Client):
        return DexSyncFlowClient(client)
    # Typed as a sync client, but a developer may pass an async one.
    candidate: object = client
    read_stream = getattr(candidate, "read_stream", None)
    asynchronous = isinstance(candidate, dex.AsyncClient | PortableSessionClient)
    if asynchronous or inspect.iscoroutinefunction(read_stream):
        raise TypeError(
            f"a {type(candidate).__name__} is asynchronous: pass it to the async helpers "
            "(read_agent_event_stream_snapshot, stream_agent_event_frames), or pass a "
            "dex.Client or the runtime's sync_flow_client() to the _sync ones"
        )
    if not isinstance(client, SyncFlowClient):
        raise TypeError(
            "the _sync browser stream helpers need a dex.Client or a SyncFlowClient, "
            f"not {type(client).__name__}"
        )
    return client
