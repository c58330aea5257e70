"""The WorkerService requests Dex would send, built from a driver call's Python values.

Each :class:`~tests.adapters.dex.fake_dex_driver.DexWorkerDriver` call takes the state
the real server would send as keyword arguments: :class:`FlowStateArgs` for every
invocation, :class:`StepCallArgs` for a Step's ``wait_for``, :class:`ExecuteCallArgs`
for its ``execute``. :class:`WorkerRequests` encodes them with the Registry's codecs (see
:mod:`tests.adapters.dex.wire_encoder`) into the three invocation requests. Nothing is
remembered between calls.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, TypedDict

import dex
from dex.dexpb import dex_pb2 as pb

from tests.adapters.dex.driver_outcomes import AttributeMapKey, ChannelKey
from tests.adapters.dex.wire_decoder import WireDecoder
from tests.adapters.dex.wire_encoder import WireEncoder

TIMEOUT_HANDLER_STEP_TYPE = "sys:timeout_handler"
"""The Step type Dex invokes ``execute`` with to run a Flow's ``handle_timeout``."""


class FlowStateArgs(TypedDict, total=False):
    """The Flow state Dex sends with every invocation; each key may be left out.

    ``attributes`` are singleton Attribute values; ``attribute_map_instances`` are the
    loaded AttributeMap instances (a ``None`` value: loaded but absent);
    ``loaded_attribute_maps`` names maps loaded whole. ``channel_sizes`` are the
    queued-message counts; ``pending_channel_messages`` are loaded messages as
    ``(message id, value)`` pairs (they also set the size unless ``channel_sizes`` does).
    ``flow_id`` overrides the driver's default Context ``flow_id`` for this call.
    """

    attributes: Mapping[str, object]
    attribute_map_instances: Mapping[AttributeMapKey, object]
    loaded_attribute_maps: Collection[str]
    channel_sizes: Mapping[ChannelKey, int]
    pending_channel_messages: Mapping[ChannelKey, Sequence[tuple[str, object]]]
    flow_id: str | None


class StepCallArgs(FlowStateArgs, total=False):
    """What Dex adds for a Step invocation: the attempt and the heartbeat checkpoint.

    ``attempt`` defaults to 1; ``first_attempt_at`` ``None`` (the default) sends 0 (the
    epoch); ``last_heartbeat_value`` ``None`` (the default) means no checkpoint;
    ``from_step_execution_id`` defaults to ``""``.
    """

    attempt: int
    first_attempt_at: datetime | None
    last_heartbeat_value: object
    from_step_execution_id: str


class ExecuteCallArgs(StepCallArgs, total=False):
    """What Dex adds for ``execute``: what the Wait consumed and what ``wait_for`` left.

    ``channel_results`` are the values the completed Channel conditions consumed;
    ``timer_fired`` is the status of the Wait's Timers (one bool per Timer, or one bool
    for a single Timer; ``None``, the default, sends no Timer results);
    ``wait_for_failed`` marks a ``wait_for`` that failed under the PROCEED policy;
    ``step_locals`` are the step-execution locals ``wait_for`` handed over;
    ``recovery_error`` is ``(detail, error_type)``.
    """

    channel_results: Mapping[ChannelKey, Sequence[object]]
    timer_fired: bool | Sequence[bool] | None
    wait_for_failed: bool
    step_locals: Mapping[str, object]
    recovery_error: tuple[str, str] | None


class WorkerRequests:
    """Builds ``wait_for``, ``execute`` and RPC requests for one Flow of the Registry.

    ``flow_id`` and ``run_id`` are the Context's defaults; a call's ``flow_id`` wins.
    """

    def __init__(
        self, encoder: WireEncoder, decoder: WireDecoder, *, flow_id: str, run_id: str
    ) -> None:
        self._encoder = encoder
        self._decoder = decoder
        self._flow_id = flow_id
        self._run_id = run_id

    def wait_for(
        self,
        flow: Any,
        step_type: str,
        step_execution_id: str,
        input_value: object,
        call: StepCallArgs,
    ) -> pb.InvokeWaitForMethodRequest:
        """The request invoking Step ``step_type``'s ``wait_for``."""
        _reject_unknown("wait_for", call, StepCallArgs.__optional_keys__)
        step = flow.step(step_type)
        return pb.InvokeWaitForMethodRequest(
            context=self._step_context(step_execution_id, call, recovery_error=None),
            flow_type=flow.name,
            step_type=step_type,
            step_input=self._encoder.encode(input_value, step.input_codec),
            **self._state(flow, call),
        )

    def execute(
        self,
        flow: Any,
        step_type: str,
        step_execution_id: str,
        input_value: object,
        call: ExecuteCallArgs,
    ) -> pb.InvokeExecuteMethodRequest:
        """The request invoking Step ``step_type``'s ``execute`` (or the timeout handler)."""
        _reject_unknown("execute", call, ExecuteCallArgs.__optional_keys__)
        request = pb.InvokeExecuteMethodRequest(
            context=self._step_context(
                step_execution_id, call, recovery_error=call.get("recovery_error")
            ),
            flow_type=flow.name,
            step_type=step_type,
            step_exe_locals=[
                pb.KV(key=key, value=self._encoder.encode_dynamic(value))
                for key, value in call.get("step_locals", {}).items()
            ],
            **self._state(flow, call),
        )
        if step_type != TIMEOUT_HANDLER_STEP_TYPE:
            step = flow.step(step_type)
            request.step_input.CopyFrom(self._encoder.encode(input_value, step.input_codec))
        elif input_value is not None:
            raise ValueError(f"the Flow timeout handler takes no input, got {input_value!r}")
        conditions = self._condition_results(flow, call)
        if conditions is not None:
            request.condition_results.CopyFrom(conditions)
        return request

    def rpc(
        self, flow: Any, rpc_name: str, input_value: object, call: FlowStateArgs
    ) -> pb.InvokeWorkerRPCRequest:
        """The request invoking RPC ``rpc_name``; an RPC without input takes ``None``."""
        _reject_unknown("rpc", call, FlowStateArgs.__optional_keys__)
        registered = flow.rpc(rpc_name)
        if registered.input_codec is None and input_value is not None:
            raise ValueError(f"RPC {flow.name}.{rpc_name} takes no input, got {input_value!r}")
        encoded = (
            self._encoder.encode(input_value, registered.input_codec)
            if registered.input_codec is not None
            # The Worker rejects a Value with no kind, so "no input" travels as null.
            else self._encoder.null()
        )
        return pb.InvokeWorkerRPCRequest(
            context=pb.Context(flow_id=call.get("flow_id") or self._flow_id, run_id=self._run_id),
            flow_type=flow.name,
            rpc_name=rpc_name,
            input=encoded,
            **self._state(flow, call),
        )

    def _step_context(
        self,
        step_execution_id: str,
        call: StepCallArgs,
        *,
        recovery_error: tuple[str, str] | None,
    ) -> pb.Context:
        first_attempt_at = call.get("first_attempt_at")
        context = pb.Context(
            flow_id=call.get("flow_id") or self._flow_id,
            run_id=self._run_id,
            step_execution_id=step_execution_id,
            attempt=call.get("attempt", 1),
            from_step_execution_id=call.get("from_step_execution_id", ""),
            first_attempt_timestamp=(
                int(first_attempt_at.timestamp()) if first_attempt_at is not None else 0
            ),
        )
        last_heartbeat_value = call.get("last_heartbeat_value")
        if last_heartbeat_value is not None:
            context.last_heartbeat_value.CopyFrom(
                self._encoder.encode_dynamic(last_heartbeat_value)
            )
        if recovery_error is not None:
            detail, error_type = recovery_error
            context.recovery_error.CopyFrom(
                pb.RecoveryErrorInfo(detail=detail, error_type=error_type)
            )
        return context

    def _state(self, flow: Any, call: FlowStateArgs) -> dict[str, Any]:
        """The request fields describing Flow state, shared by all three invocations."""
        entries: list[pb.KV] = []
        for name, value in call.get("attributes", {}).items():
            definition = self._decoder.definition(flow, name, dex.Attribute)
            if value is not None:
                entries.append(pb.KV(key=name, value=self._encoder.encode_as(value, definition)))
        loaded_maps: list[str] = []
        for (map_name, instance), value in call.get("attribute_map_instances", {}).items():
            definition = self._decoder.definition(flow, map_name, dex.AttributeMap)
            physical = dex.Registry.physical_name(map_name, instance)
            loaded_maps.append(physical)
            if value is not None:
                entries.append(
                    pb.KV(key=physical, value=self._encoder.encode_as(value, definition))
                )
        for map_name in call.get("loaded_attribute_maps", ()):
            self._decoder.definition(flow, map_name, dex.AttributeMap)
            loaded_maps.append(f"{map_name}/")
        infos: dict[str, pb.ChannelInfo] = {}
        loaded_messages: dict[str, pb.ChannelValues] = {}
        loaded_channels: list[str] = []
        loaded_channel_instances: list[str] = []
        for key, messages in call.get("pending_channel_messages", {}).items():
            definition, physical = self._decoder.channel(flow, key)
            loaded_messages[physical] = pb.ChannelValues(
                messages=[
                    pb.ChannelMessage(
                        channel_name=physical,
                        message_id=message_id,
                        value=self._encoder.encode_as(value, definition),
                    )
                    for message_id, value in messages
                ]
            )
            if isinstance(definition, dex.ChannelMap):
                loaded_channel_instances.append(physical)
            else:
                loaded_channels.append(physical)
            infos[physical] = pb.ChannelInfo(size=len(messages))
        for key, size in call.get("channel_sizes", {}).items():
            infos[self._decoder.channel(flow, key)[1]] = pb.ChannelInfo(size=size)
        return {
            "attributes": entries,
            "channel_infos": infos,
            "loaded_channel_messages": loaded_messages,
            "loaded_attribute_map_instances": loaded_maps,
            "loaded_channel_names": loaded_channels,
            "loaded_channel_map_instances": loaded_channel_instances,
        }

    def _condition_results(self, flow: Any, call: ExecuteCallArgs) -> pb.ConditionResults | None:
        channel_results = call.get("channel_results", {})
        timer_fired = call.get("timer_fired")
        wait_for_failed = call.get("wait_for_failed", False)
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
                values=[self._encoder.encode_as(value, definition) for value in values],
            )
        return results


def _reject_unknown(method: str, call: Mapping[str, object], accepted: frozenset[str]) -> None:
    """Refuse a misspelt keyword as a plain signature would: the driver takes ``**call``."""
    unknown = sorted(set(call) - accepted)
    if unknown:
        raise TypeError(
            f"DexWorkerDriver.{method}() got unexpected keyword arguments: {', '.join(unknown)}"
        )
