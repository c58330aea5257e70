"""A fake Dex FlowService with a Stream Store and Flow summaries, for the real SDK clients.

``FakeStreamFlowService`` extends the Worker-start fake (``fake_dex_server``) with
``ReadStream``, ``ListStreamMessages`` and ``GetFlowSummary``, so a real
``dex.AsyncClient`` or ``dex.Client`` reads Streams through its own request
building, value decoding and error translation. Messages are kept as the
requests key them: by Flow type, Stream name and Flow ID. Each message's resume
token is ``<flow_id>:<n>``; a read past the last message answers at once with
Dex's long-poll timeout (no wait), and errors carry Dex's ``ServiceErrorResponse``
detail, as the SDK reads it. How a real server keys, trims or refuses is not
verified here.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

import dex
import grpc  # type: ignore[import-untyped]
from dex.dexpb import dex_pb2 as pb
from google.protobuf import any_pb2  # type: ignore[import-untyped]
from google.rpc import status_pb2  # type: ignore[import-untyped]
from grpc_status import rpc_status  # type: ignore[import-untyped]

from tests.adapters.dex.fake_dex_server import FakeDexServer, FakeFlowService

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


async def _abort(
    context: Any, code: grpc.StatusCode, sub_status: pb.ErrorSubStatus, detail: str
) -> None:
    packed = any_pb2.Any()
    packed.Pack(pb.ServiceErrorResponse(detail=detail, sub_status=sub_status))
    status = status_pb2.Status(code=code.value[0], message=detail, details=[packed])
    await context.abort_with_status(rpc_status.to_status(status))


class FakeStreamFlowService(FakeFlowService):
    """A FlowService whose Streams and Flow summaries a test fills in.

    Attributes:
        flows: Each started Flow's type, by Flow ID.
        streams: Each Stream's messages as JSON text, oldest first, keyed by
            ``(flow type, Stream name, Flow ID)``.
        summaries_fail: Every ``GetFlowSummary`` fails with ``INTERNAL``, as a
            server that cannot look Flows up for now.
    """

    def __init__(self) -> None:
        super().__init__()
        self.flows: dict[str, str] = {}
        self.summaries_fail = False
        self.streams: dict[tuple[str, str, str], list[str]] = {}

    def _messages(self, request: Any) -> list[pb.StreamMessage]:
        texts = self.streams.get((request.flow_type, request.stream_name, request.flow_id), [])
        return [
            pb.StreamMessage(
                value=pb.Value(string_value=text),
                resume_token=f"{request.flow_id}:{n}",
                created_time=T0,
                source="#S-1",
            )
            for n, text in enumerate(texts, 1)
        ]

    async def GetFlowSummary(
        self, request: pb.GetFlowSummaryRequest, context: Any
    ) -> pb.GetFlowSummaryResponse:
        """The Flow's type, running; ``NOT_FOUND`` for a Flow ID never started."""
        if self.summaries_fail:
            await _abort(
                context, grpc.StatusCode.INTERNAL, pb.ERROR_SUB_STATUS_UNSPECIFIED, "lookup failed"
            )
        flow_type = self.flows.get(request.flow_id)
        if flow_type is None:
            await _abort(
                context, grpc.StatusCode.NOT_FOUND, pb.ERROR_SUB_STATUS_FLOW_NOT_EXISTS, "no flow"
            )
        return pb.GetFlowSummaryResponse(
            flow_execution_id=pb.FlowExecutionID(flow_id=request.flow_id, run_id="run-1"),
            flow_type=flow_type,
            flow_status=pb.FLOW_STATUS_RUNNING,
            start_time=T0,
        )

    async def ReadStream(
        self, request: pb.ReadStreamRequest, context: Any
    ) -> pb.ReadStreamResponse:
        """The message after the resume token, or the long-poll timeout at once."""
        messages = self._messages(request)
        tokens = [message.resume_token for message in messages]
        after = tokens.index(request.resume_token) + 1 if request.resume_token else 0
        if after >= len(messages):
            await _abort(
                context,
                grpc.StatusCode.DEADLINE_EXCEEDED,
                pb.ERROR_SUB_STATUS_LONG_POLL_TIME_OUT,
                "long poll timed out",
            )
        return pb.ReadStreamResponse(message=messages[after])

    async def ListStreamMessages(
        self, request: pb.ListStreamMessagesRequest, context: Any
    ) -> pb.ListStreamMessagesResponse:
        """Every retained message, newest first, in one page."""
        return pb.ListStreamMessagesResponse(messages=self._messages(request)[::-1])


@contextlib.asynccontextmanager
async def serving_streams(
    flows: Sequence[dex.Flow[Any]],
) -> AsyncIterator[tuple[FakeStreamFlowService, dex.AsyncClient, dex.Client]]:
    """A running ``FakeStreamFlowService`` and a real async and sync client of ``flows``.

    Call the sync client from another thread (``asyncio.to_thread``): the server
    answers on this event loop.
    """
    service = FakeStreamFlowService()
    server = FakeDexServer(service)
    async with contextlib.AsyncExitStack() as stack:
        directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="fake-dex-"))
        cache = dex.open_blob_cache(dex.BlobCacheConfig(directory, 1 << 20))
        stack.callback(cache.close)
        await server.start()
        stack.push_async_callback(server.stop)
        registry = dex.Registry(list(flows), allow_async_handlers=True)
        options = dex.ClientOptions(server_address=server.address)
        client = await stack.enter_async_context(dex.AsyncClient(registry, cache, options))
        sync_client = stack.enter_context(dex.Client(registry, cache, options))
        yield service, client, sync_client
