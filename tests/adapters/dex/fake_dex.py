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

Values are encoded with the SDK's own mapping (``dex._value_mapper.ValueMapper`` over
the Registry's codecs) and the codec of the declared type (a Step's input type, an
Attribute's ``value_type``, ...). Values the SDK encodes by runtime type (the heartbeat
checkpoint, step-execution locals) are encoded that way too. To send bytes a codec would
not produce, pass a ``dex.Value`` (see :func:`json_value`) or a protobuf ``Value``; they
are sent unchanged. Map instances are keyed ``(map name, instance)``.

Example::

    async with running_worker(registry) as driver:
        outcome = await driver.execute("Orders", "Ship", "Ship-1", "order-7",
                                       attributes={"status": "paid"})
        assert outcome.decision.kind is DecisionKind.GO_TO
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from datetime import datetime
from types import MappingProxyType
from typing import Any

import dex
import grpc  # type: ignore[import-untyped]
from dex._value_mapper import ValueMapper
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc

from tests.adapters.dex.fake_dex_driver import (
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
    WireDecoder,
    WorkerError,
    missing_result,
    proto_to_plain,
    worker_error,
)
from tests.adapters.dex.fake_dex_server import (
    DEFAULT_SERVER_INFO,
    LOOPBACK,
    FakeDexServer,
    FakeFlowService,
)

_EMPTY: Mapping[Any, Any] = MappingProxyType({})
DEFAULT_FLOW_ID = "fake-flow-1"
"""The Flow id the driver puts in every request's Context unless told otherwise."""
DEFAULT_RUN_ID = "fake-run-1"
"""The run id the driver puts in every request's Context unless told otherwise."""
TIMEOUT_HANDLER_STEP_TYPE = "sys:timeout_handler"
"""The Step type Dex invokes ``execute`` with to run a Flow's ``handle_timeout``."""


def json_value(data: object) -> dex.Value:
    """Return ``data`` as a canonical JSON ``dex.Value``, sent as-is for a JSON-kind type."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return dex.Value(dex.WireKind.JSON, text)


class _PassThroughCodec:
    """Hands a caller's ``dex.Value`` to the SDK's ValueMapper unchanged."""

    type_name = "dex.Value"

    def __init__(self, kind: dex.WireKind) -> None:
        self.wire_kind = kind

    def encode(self, value: dex.Value) -> dex.Value:
        return value

    def decode(self, value: dex.Value) -> dex.Value:
        return value


class DexWorkerDriver:
    """Calls a running Worker's WorkerService as Dex would and returns plain outcomes.

    Get one from :func:`tests.adapters.dex.fake_dex.running_worker`. Every call names
    the Flow type and Step type (or RPC name) as strings and takes Python values; state
    the real server would send (Attributes, loaded AttributeMap instances, Channel sizes,
    loaded pending Channel messages, condition results) is given per call.

    Attributes:
        registry: The Registry the Worker serves.
        worker: The running ``dex.AsyncWorker``.
        flow_service: The fake FlowService the Worker started against.
        flow_id: The default Context ``flow_id``.
        run_id: The default Context ``run_id``.
        call_timeout: Seconds before a call to the Worker is abandoned.
    """

    def __init__(
        self,
        registry: dex.Registry,
        channel: Any,
        *,
        worker: dex.AsyncWorker,
        flow_service: FakeFlowService,
        flow_id: str = DEFAULT_FLOW_ID,
        run_id: str = DEFAULT_RUN_ID,
        call_timeout: float = 30.0,
    ) -> None:
        self.registry = registry
        self.worker = worker
        self.flow_service = flow_service
        self.flow_id = flow_id
        self.run_id = run_id
        self.call_timeout = call_timeout
        self._stub: Any = dex_pb2_grpc.WorkerServiceStub(channel)  # type: ignore[no-untyped-call]
        self._values = ValueMapper(registry.codec_registry)
        self._decoder = WireDecoder(registry, self._values)

    async def wait_for(
        self,
        flow_type: str,
        step_type: str,
        step_execution_id: str,
        input_value: object,
        *,
        attributes: Mapping[str, object] = _EMPTY,
        attribute_map_instances: Mapping[AttributeMapKey, object] = _EMPTY,
        loaded_attribute_maps: Collection[str] = (),
        channel_sizes: Mapping[ChannelKey, int] = _EMPTY,
        pending_channel_messages: Mapping[ChannelKey, Sequence[tuple[str, object]]] = _EMPTY,
        attempt: int = 1,
        first_attempt_at: datetime | None = None,
        last_heartbeat_value: object = None,
        from_step_execution_id: str = "",
        flow_id: str | None = None,
    ) -> WaitForOutcome:
        """Invoke a Step's ``wait_for`` and return the mapped Wait and its side outputs.

        ``attributes`` are singleton Attribute values; ``attribute_map_instances`` are
        the loaded AttributeMap instances (a ``None`` value: loaded but absent);
        ``loaded_attribute_maps`` names maps loaded whole. ``channel_sizes`` are the
        queued-message counts; ``pending_channel_messages`` are loaded messages as
        ``(message id, value)`` pairs (they also set the size unless ``channel_sizes``
        does). ``last_heartbeat_value`` ``None`` means no checkpoint;
        ``first_attempt_at`` ``None`` sends 0 (the epoch). ``flow_id`` overrides
        :attr:`flow_id` for this call.
        """
        flow = self.registry._flow_by_type(flow_type)
        step = flow.step(step_type)
        request = pb.InvokeWaitForMethodRequest(
            context=self._context(
                step_execution_id,
                attempt=attempt,
                first_attempt_at=first_attempt_at,
                last_heartbeat_value=last_heartbeat_value,
                from_step_execution_id=from_step_execution_id,
                recovery_error=None,
                flow_id=flow_id,
            ),
            flow_type=flow_type,
            step_type=step_type,
            step_input=self._encode(input_value, step.input_codec),
            **self._state(
                flow,
                attributes,
                attribute_map_instances,
                loaded_attribute_maps,
                channel_sizes,
                pending_channel_messages,
            ),
        )
        frames, error = await self._stream(self._stub.InvokeWaitForMethod, request)
        heartbeats, stream_writes, results = self._decoder.frames(flow, frames)
        if error is not None or not results:
            return WaitForOutcome(
                heartbeats=heartbeats, stream_writes=stream_writes, error=error or missing_result()
            )
        result = results[-1]
        return WaitForOutcome(
            wait=self._decoder.wait(flow, result) if result.HasField("waiting_condition") else None,
            heartbeats=heartbeats,
            stream_writes=stream_writes,
            step_locals=self._decoder.dynamic_entries(result.upsert_step_exe_locals),
            raw=result,
            **self._decoder.effects(flow, result),
        )

    async def execute(
        self,
        flow_type: str,
        step_type: str,
        step_execution_id: str,
        input_value: object,
        *,
        attributes: Mapping[str, object] = _EMPTY,
        attribute_map_instances: Mapping[AttributeMapKey, object] = _EMPTY,
        loaded_attribute_maps: Collection[str] = (),
        channel_sizes: Mapping[ChannelKey, int] = _EMPTY,
        pending_channel_messages: Mapping[ChannelKey, Sequence[tuple[str, object]]] = _EMPTY,
        channel_results: Mapping[ChannelKey, Sequence[object]] = _EMPTY,
        timer_fired: bool | Sequence[bool] | None = None,
        wait_for_failed: bool = False,
        step_locals: Mapping[str, object] = _EMPTY,
        attempt: int = 1,
        first_attempt_at: datetime | None = None,
        last_heartbeat_value: object = None,
        recovery_error: tuple[str, str] | None = None,
        from_step_execution_id: str = "",
        flow_id: str | None = None,
    ) -> ExecuteOutcome:
        """Invoke a Step's ``execute`` and return its decision, writes and side outputs.

        State arguments are as for :meth:`wait_for`. ``channel_results`` are the values
        the completed Channel conditions consumed; ``timer_fired`` is the status of the
        Wait's Timers (one bool per Timer, or one bool for a single Timer; ``None``
        sends no Timer results); ``wait_for_failed`` marks a ``wait_for`` that failed
        under the PROCEED policy; ``step_locals`` are the step-execution locals
        ``wait_for`` handed over; ``recovery_error`` is ``(detail, error_type)``.
        ``step_type`` :data:`TIMEOUT_HANDLER_STEP_TYPE` (with ``input_value=None``)
        invokes the Flow's ``handle_timeout`` instead of a Step.
        """
        flow = self.registry._flow_by_type(flow_type)
        request = pb.InvokeExecuteMethodRequest(
            context=self._context(
                step_execution_id,
                attempt=attempt,
                first_attempt_at=first_attempt_at,
                last_heartbeat_value=last_heartbeat_value,
                from_step_execution_id=from_step_execution_id,
                recovery_error=recovery_error,
                flow_id=flow_id,
            ),
            flow_type=flow_type,
            step_type=step_type,
            step_exe_locals=[
                pb.KV(key=key, value=self._encode_dynamic(value))
                for key, value in step_locals.items()
            ],
            **self._state(
                flow,
                attributes,
                attribute_map_instances,
                loaded_attribute_maps,
                channel_sizes,
                pending_channel_messages,
            ),
        )
        if step_type != TIMEOUT_HANDLER_STEP_TYPE:
            request.step_input.CopyFrom(self._encode(input_value, flow.step(step_type).input_codec))
        elif input_value is not None:
            raise ValueError(f"the Flow timeout handler takes no input, got {input_value!r}")
        conditions = self._condition_results(flow, channel_results, timer_fired, wait_for_failed)
        if conditions is not None:
            request.condition_results.CopyFrom(conditions)
        frames, error = await self._stream(self._stub.InvokeExecuteMethod, request)
        heartbeats, stream_writes, results = self._decoder.frames(flow, frames)
        if error is not None or not results:
            return ExecuteOutcome(
                heartbeats=heartbeats, stream_writes=stream_writes, error=error or missing_result()
            )
        result = results[-1]
        decision: Decision = self._decoder.decision(flow, result.step_decision)
        return ExecuteOutcome(
            decision=decision,
            heartbeats=heartbeats,
            stream_writes=stream_writes,
            step_locals=self._decoder.dynamic_entries(result.upsert_step_exe_locals),
            raw=result,
            **self._decoder.effects(flow, result),
        )

    async def rpc(
        self,
        flow_type: str,
        rpc_name: str,
        input_value: object = None,
        *,
        attributes: Mapping[str, object] = _EMPTY,
        attribute_map_instances: Mapping[AttributeMapKey, object] = _EMPTY,
        loaded_attribute_maps: Collection[str] = (),
        channel_sizes: Mapping[ChannelKey, int] = _EMPTY,
        pending_channel_messages: Mapping[ChannelKey, Sequence[tuple[str, object]]] = _EMPTY,
        flow_id: str | None = None,
    ) -> RpcOutcome:
        """Invoke an RPC handler and return its output, writes and next Steps.

        State arguments are as for :meth:`wait_for`. An RPC declared without an input
        takes ``input_value=None``.
        """
        flow = self.registry._flow_by_type(flow_type)
        registered = flow.rpc(rpc_name)
        if registered.input_codec is None and input_value is not None:
            raise ValueError(f"RPC {flow_type}.{rpc_name} takes no input, got {input_value!r}")
        encoded = (
            self._encode(input_value, registered.input_codec)
            if registered.input_codec is not None
            # The Worker rejects a Value with no kind, so "no input" travels as null.
            else self._values.deletion()
        )
        request = pb.InvokeWorkerRPCRequest(
            context=pb.Context(flow_id=flow_id or self.flow_id, run_id=self.run_id),
            flow_type=flow_type,
            rpc_name=rpc_name,
            input=encoded,
            **self._state(
                flow,
                attributes,
                attribute_map_instances,
                loaded_attribute_maps,
                channel_sizes,
                pending_channel_messages,
            ),
        )
        try:
            response = await self._stub.InvokeWorkerRPC(request, timeout=self.call_timeout)
        except grpc.aio.AioRpcError as failure:
            return RpcOutcome(error=worker_error(failure))
        output = (
            self._values.decode(response.output, registered.output_codec)
            if registered.output_codec is not None
            else self._decoder.dynamic(response.output)
        )
        decision = response.step_decision
        return RpcOutcome(
            output=output,
            next_steps=tuple(self._decoder.movement(flow, move) for move in decision.next_steps),
            canceling_step_types=tuple(decision.cancel_step_types),
            raw=response,
            **self._decoder.effects(flow, response),
        )

    def _context(
        self,
        step_execution_id: str,
        *,
        attempt: int,
        first_attempt_at: datetime | None,
        last_heartbeat_value: object,
        from_step_execution_id: str,
        recovery_error: tuple[str, str] | None,
        flow_id: str | None,
    ) -> pb.Context:
        context = pb.Context(
            flow_id=flow_id or self.flow_id,
            run_id=self.run_id,
            step_execution_id=step_execution_id,
            attempt=attempt,
            from_step_execution_id=from_step_execution_id,
            first_attempt_timestamp=(
                int(first_attempt_at.timestamp()) if first_attempt_at is not None else 0
            ),
        )
        if last_heartbeat_value is not None:
            context.last_heartbeat_value.CopyFrom(self._encode_dynamic(last_heartbeat_value))
        if recovery_error is not None:
            detail, error_type = recovery_error
            context.recovery_error.CopyFrom(
                pb.RecoveryErrorInfo(detail=detail, error_type=error_type)
            )
        return context

    def _state(
        self,
        flow: Any,
        attributes: Mapping[str, object],
        attribute_map_instances: Mapping[AttributeMapKey, object],
        loaded_attribute_maps: Collection[str],
        channel_sizes: Mapping[ChannelKey, int],
        pending_channel_messages: Mapping[ChannelKey, Sequence[tuple[str, object]]],
    ) -> dict[str, Any]:
        """The request fields describing Flow state, shared by all three invocations."""
        entries: list[pb.KV] = []
        for name, value in attributes.items():
            definition = self._decoder.definition(flow, name, dex.Attribute)
            if value is not None:
                entries.append(pb.KV(key=name, value=self._encode_as(value, definition)))
        loaded_maps: list[str] = []
        for (map_name, instance), value in attribute_map_instances.items():
            definition = self._decoder.definition(flow, map_name, dex.AttributeMap)
            physical = dex.Registry.physical_name(map_name, instance)
            loaded_maps.append(physical)
            if value is not None:
                entries.append(pb.KV(key=physical, value=self._encode_as(value, definition)))
        for map_name in loaded_attribute_maps:
            self._decoder.definition(flow, map_name, dex.AttributeMap)
            loaded_maps.append(f"{map_name}/")
        infos: dict[str, pb.ChannelInfo] = {}
        loaded_messages: dict[str, pb.ChannelValues] = {}
        loaded_channels: list[str] = []
        loaded_channel_instances: list[str] = []
        for key, messages in pending_channel_messages.items():
            definition, physical = self._decoder.channel(flow, key)
            loaded_messages[physical] = pb.ChannelValues(
                messages=[
                    pb.ChannelMessage(
                        channel_name=physical,
                        message_id=message_id,
                        value=self._encode_as(value, definition),
                    )
                    for message_id, value in messages
                ]
            )
            if isinstance(definition, dex.ChannelMap):
                loaded_channel_instances.append(physical)
            else:
                loaded_channels.append(physical)
            infos[physical] = pb.ChannelInfo(size=len(messages))
        for key, size in channel_sizes.items():
            infos[self._decoder.channel(flow, key)[1]] = pb.ChannelInfo(size=size)
        return {
            "attributes": entries,
            "channel_infos": infos,
            "loaded_channel_messages": loaded_messages,
            "loaded_attribute_map_instances": loaded_maps,
            "loaded_channel_names": loaded_channels,
            "loaded_channel_map_instances": loaded_channel_instances,
        }

    def _condition_results(
        self,
        flow: Any,
        channel_results: Mapping[ChannelKey, Sequence[object]],
        timer_fired: bool | Sequence[bool] | None,
        wait_for_failed: bool,
    ) -> pb.ConditionResults | None:
        if not channel_results and timer_fired is None and not wait_for_failed:
            return None
        timers = [timer_fired] if isinstance(timer_fired, bool) else list(timer_fired or ())
        results = pb.ConditionResults(wait_for_failed=wait_for_failed)
        for fired in timers:
            results.timer_results.add(
                condition_status=(
                    pb.CONDITION_STATUS_COMPLETED if fired else pb.CONDITION_STATUS_WAITING
                )
            )
        for key, values in channel_results.items():
            definition, physical = self._decoder.channel(flow, key)
            results.channel_results.add(
                channel_name=physical,
                condition_status=pb.CONDITION_STATUS_COMPLETED,
                values=[self._encode_as(value, definition) for value in values],
            )
        return results

    async def _stream(self, method: Any, request: Any) -> tuple[list[Any], WorkerError | None]:
        """Collect a server-streaming call's frames; frames sent before a failure are kept."""
        frames: list[Any] = []
        try:
            async for frame in method(request, timeout=self.call_timeout):
                frames.append(frame)
        except grpc.aio.AioRpcError as failure:
            return frames, worker_error(failure)
        return frames, None

    def _encode_as(self, value: object, definition: Any) -> pb.Value:
        return self._encode(value, self._values.codec(definition.value_type))

    def _encode(self, value: object, codec: Any) -> pb.Value:
        if isinstance(value, pb.Value):
            return value
        if isinstance(value, dex.Value):
            return self._values.encode(value, _PassThroughCodec(value.kind))
        return self._values.encode(value, codec)

    def _encode_dynamic(self, value: object) -> pb.Value:
        if isinstance(value, pb.Value):
            return value
        if isinstance(value, dex.Value):
            return self._values.encode(value, _PassThroughCodec(value.kind))
        return self._values.encode_dynamic(value)


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
