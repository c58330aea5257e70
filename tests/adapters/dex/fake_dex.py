"""A fake Dex server and a driver for testing Flows inside a real ``dex.AsyncWorker``.

No Dex server runs here. :func:`running_worker` starts a real ``AsyncWorker`` for a
Registry against an in-process :class:`FakeFlowService` (it answers only the Worker's
start sequence) and yields a :class:`DexWorkerDriver`, which calls the Worker's
WorkerService as the Dex server would: ``wait_for``, ``execute`` and ``rpc`` take Flow,
Step and RPC names as strings and Python values, and return plain outcome records
(:class:`WaitForOutcome`, :class:`ExecuteOutcome`, :class:`RpcOutcome`).

Only the Worker's side of the protocol is real: the driver supplies, per call, the state
the server would send (Attributes, loaded AttributeMap instances, Channel sizes and
pending messages, condition results, heartbeat checkpoint, recovery error) and nothing
is persisted, scheduled or retried between calls.

The parts live in modules of their own: the driver (``fake_dex_driver``), the requests
it builds (``worker_requests``), how it encodes values (``wire_encoder``, with
:func:`json_value`) and decodes answers (``wire_decoder``), the outcome records
(``driver_outcomes``) and the fake FlowService (``fake_dex_server``). This module starts
the Worker and re-exports what a test needs. Map instances are keyed
``(map name, instance)``.

Example::

    async with running_worker(registry) as driver:
        outcome = await driver.execute("Orders", "Ship", "Ship-1", "order-7",
                                       attributes={"status": "paid"})
        assert outcome.decision.kind is DecisionKind.GO_TO
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator
from typing import Any

import dex
import grpc  # type: ignore[import-untyped]

from tests.adapters.dex.driver_outcomes import (
    ABSENT,
    CLEARED,
    DELETED,
    AttributeMapKey,
    ChannelConditionSpec,
    ChannelKey,
    Decision,
    DecisionKind,
    ExecuteOutcome,
    Marker,
    Movement,
    RpcOutcome,
    SubFlowSpec,
    TimerSpec,
    WaitForOutcome,
    WaitKind,
    WaitSpec,
    WorkerError,
)
from tests.adapters.dex.fake_dex_driver import DEFAULT_FLOW_ID, DEFAULT_RUN_ID, DexWorkerDriver
from tests.adapters.dex.fake_dex_server import (
    DEFAULT_SERVER_INFO,
    LOOPBACK,
    FakeDexServer,
    FakeFlowService,
)
from tests.adapters.dex.wire_decoder import proto_to_plain
from tests.adapters.dex.wire_encoder import json_value
from tests.adapters.dex.worker_requests import TIMEOUT_HANDLER_STEP_TYPE

_RECONNECT_OPTIONS = (
    # The driver's channel may first try before the Worker listens; gRPC's default
    # reconnect backoff (1 s and up) would then dominate every test's start-up.
    ("grpc.initial_reconnect_backoff_ms", 20),
    ("grpc.min_reconnect_backoff_ms", 20),
    ("grpc.max_reconnect_backoff_ms", 100),
)
_POLL_SECONDS = 0.005


@contextlib.asynccontextmanager
async def running_worker(
    registry: dex.Registry,
    *,
    flow_service: FakeFlowService | None = None,
    flow_id: str = DEFAULT_FLOW_ID,
    run_id: str = DEFAULT_RUN_ID,
    blob_cache_bytes: int = 16 * 1024 * 1024,
    start_timeout: float = 10.0,
    call_timeout: float = 30.0,
) -> AsyncIterator[DexWorkerDriver]:
    """Serve ``registry`` in a real ``dex.AsyncWorker`` against a fake Dex server.

    Opens a blob cache in a temporary directory, starts ``flow_service`` (a fresh
    :class:`FakeFlowService` by default) on a free loopback port, starts the Worker in a
    task with its listener on another free loopback port, and yields a driver once the
    Worker's WorkerService accepts connections. On exit it closes the driver's channel,
    stops the Worker, stops the fake server, closes the cache and removes the directory.

    Raises:
        TimeoutError: The Worker did not serve within ``start_timeout`` seconds.
        RuntimeError: The Worker's start failed (its own error, e.g. a protocol mismatch
            with ``flow_service.server_info``).
    """
    service = flow_service if flow_service is not None else FakeFlowService()
    async with contextlib.AsyncExitStack() as stack:
        directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="fake-dex-"))
        cache = dex.open_blob_cache(dex.BlobCacheConfig(directory, blob_cache_bytes))
        stack.callback(cache.close)
        server = FakeDexServer(service)
        stack.push_async_callback(server.stop)
        await server.start()
        worker = dex.AsyncWorker(
            registry,
            cache,
            # Port 0: the Worker binds a free port and reports it in worker_target.
            dex.WorkerOptions(server_address=server.address, bind_address=f"{LOOPBACK}:0"),
        )
        start = asyncio.create_task(worker.start(), name="fake-dex-worker")
        stack.push_async_callback(_stop_worker, worker, start)
        channel = await _connect_when_serving(worker, start, start_timeout)
        stack.push_async_callback(channel.close)
        yield DexWorkerDriver(
            registry,
            channel,
            worker=worker,
            flow_service=service,
            flow_id=flow_id,
            run_id=run_id,
            call_timeout=call_timeout,
        )


async def _connect_when_serving(
    worker: dex.AsyncWorker, start: asyncio.Task[None], within_seconds: float
) -> Any:
    """A channel to the Worker, once its listener is bound and accepts connections."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_seconds
    while worker.worker_target.address.endswith(":0"):
        if start.done():
            raise _start_failure(start)
        if loop.time() >= deadline:
            raise TimeoutError(f"the Dex Worker did not bind within {within_seconds} s")
        await asyncio.sleep(_POLL_SECONDS)
    channel = grpc.aio.insecure_channel(worker.worker_target.address, options=_RECONNECT_OPTIONS)
    ready = asyncio.ensure_future(channel.channel_ready())
    try:
        done, _ = await asyncio.wait(
            {ready, start},
            timeout=max(0.0, deadline - loop.time()),
            return_when=asyncio.FIRST_COMPLETED,
        )
        if ready not in done:
            if start in done:
                raise _start_failure(start)
            raise TimeoutError(f"the Dex Worker did not serve within {within_seconds} s")
    except BaseException:
        ready.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ready
        await channel.close()
        raise
    return channel


def _start_failure(start: asyncio.Task[None]) -> BaseException:
    if start.cancelled():
        return RuntimeError("the Dex Worker's start was cancelled")
    failure = start.exception()
    return failure if failure is not None else RuntimeError("the Dex Worker stopped at once")


async def _stop_worker(worker: dex.AsyncWorker, start: asyncio.Task[None]) -> None:
    """Stop the Worker and wait for its start task; a start failure was already raised."""
    await worker.close()
    if not start.done():
        # A Worker stopped before it served can leave start() waiting on its server.
        start.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await start


__all__ = [
    "ABSENT",
    "CLEARED",
    "DEFAULT_FLOW_ID",
    "DEFAULT_RUN_ID",
    "DEFAULT_SERVER_INFO",
    "DELETED",
    "TIMEOUT_HANDLER_STEP_TYPE",
    "AttributeMapKey",
    "ChannelConditionSpec",
    "ChannelKey",
    "Decision",
    "DecisionKind",
    "DexWorkerDriver",
    "ExecuteOutcome",
    "FakeDexServer",
    "FakeFlowService",
    "Marker",
    "Movement",
    "RpcOutcome",
    "SubFlowSpec",
    "TimerSpec",
    "WaitForOutcome",
    "WaitKind",
    "WaitSpec",
    "WorkerError",
    "json_value",
    "proto_to_plain",
    "running_worker",
]
