"""A driver that calls a real Worker's WorkerService as the Dex server would.

:class:`DexWorkerDriver` (get one from :func:`tests.adapters.dex.fake_dex.running_worker`)
takes Flow, Step and RPC names as strings and Python values, sends the requests of
:mod:`tests.adapters.dex.worker_requests` and returns the plain outcome records of
:mod:`tests.adapters.dex.driver_outcomes`, decoded by
:mod:`tests.adapters.dex.wire_decoder`. The outcome records other test modules use are
re-exported here; :mod:`tests.adapters.dex.fake_dex` re-exports them all.
"""

from __future__ import annotations

from typing import Any, Unpack

import dex
import grpc  # type: ignore[import-untyped]
from dex._value_mapper import ValueMapper
from dex.dexpb import dex_pb2_grpc

from tests.adapters.dex.driver_outcomes import (
    DELETED,
    ExecuteOutcome,
    Movement,
    RpcOutcome,
    WaitForOutcome,
    WaitSpec,
    WorkerError,
)
from tests.adapters.dex.fake_dex_server import FakeFlowService
from tests.adapters.dex.wire_decoder import WireDecoder, worker_error
from tests.adapters.dex.wire_encoder import WireEncoder
from tests.adapters.dex.worker_requests import (
    ExecuteCallArgs,
    FlowStateArgs,
    StepCallArgs,
    WorkerRequests,
)

DEFAULT_FLOW_ID = "fake-flow-1"
"""The Flow id the driver puts in every request's Context unless told otherwise."""
DEFAULT_RUN_ID = "fake-run-1"
"""The run id the driver puts in every request's Context unless told otherwise."""


class DexWorkerDriver:
    """Calls a running Worker's WorkerService as Dex would and returns plain outcomes.

    Get one from :func:`tests.adapters.dex.fake_dex.running_worker`. Every call names
    the Flow type and Step type (or RPC name) as strings and takes Python values; state
    the real server would send (Attributes, loaded AttributeMap instances, Channel sizes,
    loaded pending Channel messages, condition results) is given per call as keyword
    arguments (see :mod:`tests.adapters.dex.worker_requests`).

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
        self.call_timeout = call_timeout
        self._flow_id = flow_id
        self._run_id = run_id
        self._stub: Any = dex_pb2_grpc.WorkerServiceStub(channel)  # type: ignore[no-untyped-call]
        values = ValueMapper(registry.codec_registry)
        self._decoder = WireDecoder(registry, values)
        self._requests = WorkerRequests(
            WireEncoder(values), self._decoder, flow_id=flow_id, run_id=run_id
        )

    @property
    def flow_id(self) -> str:
        """The default Context ``flow_id``."""
        return self._flow_id

    @property
    def run_id(self) -> str:
        """The default Context ``run_id``."""
        return self._run_id

    async def wait_for(
        self,
        flow_type: str,
        step_type: str,
        step_execution_id: str,
        input_value: object,
        **call: Unpack[StepCallArgs],
    ) -> WaitForOutcome:
        """Invoke a Step's ``wait_for`` and return the mapped Wait and its side outputs.

        ``call`` holds the Flow state and attempt Dex would send (:class:`StepCallArgs`).
        """
        flow = self.registry._flow_by_type(flow_type)
        request = self._requests.wait_for(flow, step_type, step_execution_id, input_value, call)
        fields, result = await self._invoke_step(flow, self._stub.InvokeWaitForMethod, request)
        if result is not None and result.HasField("waiting_condition"):
            fields["wait"] = self._decoder.wait(flow, result)
        return WaitForOutcome(**fields)

    async def execute(
        self,
        flow_type: str,
        step_type: str,
        step_execution_id: str,
        input_value: object,
        **call: Unpack[ExecuteCallArgs],
    ) -> ExecuteOutcome:
        """Invoke a Step's ``execute`` and return its decision, writes and side outputs.

        ``call`` holds what :meth:`wait_for` takes plus what the Wait consumed and
        ``wait_for`` left (:class:`ExecuteCallArgs`). ``step_type``
        :data:`~tests.adapters.dex.worker_requests.TIMEOUT_HANDLER_STEP_TYPE` (with
        ``input_value=None``) invokes the Flow's ``handle_timeout`` instead of a Step.
        """
        flow = self.registry._flow_by_type(flow_type)
        request = self._requests.execute(flow, step_type, step_execution_id, input_value, call)
        fields, result = await self._invoke_step(flow, self._stub.InvokeExecuteMethod, request)
        if result is not None:
            fields["decision"] = self._decoder.decision(flow, result.step_decision)
        return ExecuteOutcome(**fields)

    async def rpc(
        self,
        flow_type: str,
        rpc_name: str,
        input_value: object = None,
        **call: Unpack[FlowStateArgs],
    ) -> RpcOutcome:
        """Invoke an RPC handler and return its output, writes and next Steps.

        ``call`` holds the Flow state Dex would send (:class:`FlowStateArgs`). An RPC
        declared without an input takes ``input_value=None``.
        """
        flow = self.registry._flow_by_type(flow_type)
        registered = flow.rpc(rpc_name)
        request = self._requests.rpc(flow, rpc_name, input_value, call)
        try:
            response = await self._stub.InvokeWorkerRPC(request, timeout=self.call_timeout)
        except grpc.aio.AioRpcError as failure:
            return RpcOutcome(error=worker_error(failure))
        output = (
            self._decoder.decode(response.output, registered.output_codec)
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

    async def _invoke_step(
        self, flow: Any, method: Any, request: Any
    ) -> tuple[dict[str, Any], Any]:
        """Stream a Step invocation; frames sent before a failure are kept."""
        frames: list[Any] = []
        error: WorkerError | None = None
        try:
            async for frame in method(request, timeout=self.call_timeout):
                frames.append(frame)
        except grpc.aio.AioRpcError as failure:
            error = worker_error(failure)
        return self._decoder.step_result(flow, frames, error)


# DELETED, Movement and WaitSpec are here for the modules that import them from here.
__all__ = [
    "DEFAULT_FLOW_ID",
    "DEFAULT_RUN_ID",
    "DELETED",
    "DexWorkerDriver",
    "ExecuteCallArgs",
    "ExecuteOutcome",
    "FlowStateArgs",
    "Movement",
    "RpcOutcome",
    "StepCallArgs",
    "WaitForOutcome",
    "WaitSpec",
    "WorkerError",
]
