"""An in-process fake of the Dex server's FlowService, just enough for a real Worker to start.

A real ``dex.AsyncWorker`` calls ``GetServerInfo`` (protocol negotiation) and then
``SyncAttributeIndexes`` before it binds its own WorkerService. :class:`FakeFlowService`
answers those two calls and records what it was asked; every other FlowService method
records the call and answers ``UNIMPLEMENTED``, so a test notices if the Worker needs
more of the server than the fake provides (for example ``LoadBlobs`` for blob-backed
values, which the driver never sends).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import grpc  # type: ignore[import-untyped]
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc
from google.protobuf import empty_pb2  # type: ignore[import-untyped]

LOOPBACK = "127.0.0.1"
"""The only interface the fake server and the Worker under test listen on."""

DEFAULT_SERVER_INFO = pb.ServerInfo(
    server_version="fake-dex",
    minimum_supported_protocol_version=1,
    current_protocol_version=3,
)
"""Protocol 1..3, the range SDK 1.23.0 supports; 3 enables hard-delete Attribute writes."""

_ANSWERED_METHODS = frozenset({"GetServerInfo", "SyncAttributeIndexes"})


class FakeFlowService(dex_pb2_grpc.FlowServiceServicer):
    """A FlowService that answers only the Worker start sequence.

    Attributes:
        server_info: What ``GetServerInfo`` returns; pass another to test negotiation.
        index_sync_requests: Each ``SyncAttributeIndexes`` request received, as a plain
            mapping of physical Attribute name to index type name
            (for example ``{"status": "INDEX_TYPE_KEYWORD"}``).
        unimplemented_calls: Names of the other FlowService methods that were called.
    """

    def __init__(self, server_info: pb.ServerInfo = DEFAULT_SERVER_INFO) -> None:
        self.server_info = server_info
        self.index_sync_requests: list[dict[str, str]] = []
        self.unimplemented_calls: list[str] = []

    async def GetServerInfo(self, request: empty_pb2.Empty, context: Any) -> pb.ServerInfo:
        """Return the configured protocol range."""
        return self.server_info

    async def SyncAttributeIndexes(
        self, request: pb.SyncAttributeIndexRequest, context: Any
    ) -> pb.SyncAttributeIndexResponse:
        """Record the requested Attribute indexes and accept them."""
        self.index_sync_requests.append(
            {name: pb.IndexType.Name(kind) for name, kind in request.attribute_indexes.items()}
        )
        return pb.SyncAttributeIndexResponse()


def _unimplemented(name: str) -> Callable[[FakeFlowService, Any, Any], Coroutine[Any, Any, None]]:
    async def handler(self: FakeFlowService, request: Any, context: Any) -> None:
        self.unimplemented_calls.append(name)
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"fake Dex server: {name}")

    handler.__name__ = name
    handler.__doc__ = f"Record the call and answer UNIMPLEMENTED ({name} is not faked)."
    return handler


# The generated servicer's defaults are synchronous, which grpc.aio would run without
# recording anything; replace them with coroutines that record the call and abort.
for _method in pb.DESCRIPTOR.services_by_name["FlowService"].methods:
    if _method.name not in _ANSWERED_METHODS:
        setattr(FakeFlowService, _method.name, _unimplemented(_method.name))


class FakeDexServer:
    """A running ``grpc.aio`` server hosting one :class:`FakeFlowService` on loopback.

    Use :meth:`start` to bind a free port and serve, :meth:`stop` to shut down.
    """

    def __init__(self, service: FakeFlowService) -> None:
        self.service = service
        self._server: Any = None
        self.port = 0

    @property
    def address(self) -> str:
        """The ``host:port`` a Worker's ``server_address`` should name."""
        if self.port == 0:
            raise RuntimeError("the fake Dex server is not started")
        return f"{LOOPBACK}:{self.port}"

    async def start(self) -> None:
        """Bind a free loopback port and start serving."""
        if self._server is not None:
            raise RuntimeError("the fake Dex server was already started")
        server = grpc.aio.server()
        dex_pb2_grpc.add_FlowServiceServicer_to_server(self.service, server)  # type: ignore[no-untyped-call]
        port: int = server.add_insecure_port(f"{LOOPBACK}:0")
        if port == 0:
            raise RuntimeError(f"cannot bind the fake Dex server on {LOOPBACK}")
        await server.start()
        self._server = server
        self.port = port

    async def stop(self) -> None:
        """Stop serving at once (no grace period) and release the port."""
        if self._server is None:
            return
        server, self._server = self._server, None
        await server.stop(None)
