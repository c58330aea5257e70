"""How :class:`~tests.adapters.dex.fake_dex_driver.DexWorkerDriver` decodes the Worker's answers.

:class:`WireDecoder` turns the Worker's result messages into the plain outcome records
of :mod:`tests.adapters.dex.driver_outcomes`, with the SDK's own mapping
(``dex._value_mapper.ValueMapper`` over the Registry's codecs): a value is decoded with
the codec of the type its definition declares (a Step's input type, an Attribute's,
Channel's or Stream's ``value_type``, an RPC's output type). Values the SDK encodes by
their runtime type instead (heartbeats, recorded events, step-execution locals, Flow
close outputs) are decoded by wire kind, so JSON becomes plain JSON data. Physical map
names (``name/quoted-instance``) are split back into ``(name, instance)``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, cast
from urllib.parse import unquote

import dex
from dex._value_mapper import ValueMapper
from dex.dexpb import dex_pb2 as pb
from google.protobuf.descriptor import FieldDescriptor  # type: ignore[import-untyped]
from grpc_status import rpc_status  # type: ignore[import-untyped]

from tests.adapters.dex.driver_outcomes import (
    ABSENT,
    CLEARED,
    DELETED,
    AttributeMapKey,
    ChannelConditionSpec,
    ChannelKey,
    Decision,
    DecisionKind,
    Movement,
    SubFlowSpec,
    TimerSpec,
    WaitKind,
    WaitSpec,
    WorkerError,
)

_CLOSE_KINDS = {
    pb.CLOSE_DECISION_TYPE_GRACEFUL_COMPLETE: DecisionKind.GRACEFUL_COMPLETE,
    pb.CLOSE_DECISION_TYPE_FORCE_COMPLETE: DecisionKind.FORCE_COMPLETE,
    pb.CLOSE_DECISION_TYPE_FORCE_FAIL: DecisionKind.FORCE_FAIL,
    pb.CLOSE_DECISION_TYPE_DEAD_END: DecisionKind.DEAD_END,
    pb.CLOSE_DECISION_TYPE_FORCE_COMPLETE_ON_CHANNELS_EMPTY: (
        DecisionKind.FORCE_COMPLETE_IF_CHANNELS_EMPTY
    ),
}
_WAIT_KINDS = {
    pb.WAITING_CONDITION_TYPE_ALL_COMPLETED: WaitKind.ALL_OF,
    pb.WAITING_CONDITION_TYPE_ANY_COMPLETED: WaitKind.ANY_OF,
    pb.WAITING_CONDITION_TYPE_ANY_COMBINATION_COMPLETED: WaitKind.ANY_COMBINATION_OF,
}


def proto_to_plain(message: Any) -> dict[str, Any]:
    """A protobuf message as a plain dict of the fields that are set.

    Keys are proto field names, enums become their value names, nested messages dicts,
    repeated fields lists; unset proto3 scalars (zero values) are left out.
    """
    return {field.name: _plain_field(field, value) for field, value in message.ListFields()}


def _plain_field(field: Any, value: Any) -> Any:
    if field.is_repeated:
        return [_plain_scalar(field, item) for item in value]
    return _plain_scalar(field, value)


def _plain_scalar(field: Any, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_ENUM:
        return field.enum_type.values_by_number[value].name
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return proto_to_plain(value)
    return value


def _split_physical(name: str) -> tuple[str, str | None]:
    base, separator, quoted = name.partition("/")
    return base, (unquote(quoted) if separator else None)


class WireDecoder:
    """Decodes Worker results into the plain outcome records with the Registry's codecs."""

    def __init__(self, registry: dex.Registry, values: ValueMapper) -> None:
        self._registry = registry
        self._values = values

    @staticmethod
    def definition(flow: Any, name: str, kind: type[Any]) -> Any:
        """The Flow's persistence definition ``name``, which must be a ``kind``."""
        definition = flow.persistence.get(name)
        if not isinstance(definition, kind):
            raise ValueError(f"Flow {flow.name} has no {kind.__name__} named {name!r}")
        return definition

    def channel(self, flow: Any, key: ChannelKey) -> tuple[Any, str]:
        """The Channel or ChannelMap definition for ``key`` and its physical name."""
        if isinstance(key, tuple):
            map_name, instance = key
            definition = self.definition(flow, map_name, dex.ChannelMap)
            return definition, dex.Registry.physical_name(map_name, instance)
        return self.definition(flow, key, dex.Channel), key

    def decode(self, value: Any, codec: Any) -> Any:
        """Decode ``value`` with ``codec``."""
        return self._values.decode(value, codec)

    def typed(self, value: Any, definition: Any) -> Any:
        """Decode ``value`` with the codec of ``definition.value_type``."""
        return self.decode(value, self._values.codec(definition.value_type))

    def dynamic(self, value: Any) -> Any:
        """Decode a Value the SDK encoded by runtime type: JSON becomes plain data."""
        if value.WhichOneof("kind") in (None, "null_value"):
            return None
        logical = self._values.to_value(value)
        if logical.kind is dex.WireKind.JSON:
            return json.loads(cast(str, logical.data))
        return logical.data

    def dynamic_entries(self, entries: Sequence[Any]) -> dict[str, Any]:
        """``KV`` entries (events, step-execution locals) decoded by wire kind."""
        return {entry.key: self.dynamic(entry.value) for entry in entries}

    def frames(
        self, flow: Any, frames: Sequence[Any]
    ) -> tuple[tuple[Any, ...], tuple[tuple[str, Any], ...], list[Any]]:
        """Split streamed frames into heartbeats, Stream writes and results."""
        heartbeats: list[Any] = []
        writes: list[tuple[str, Any]] = []
        results: list[Any] = []
        for frame in frames:
            kind = frame.WhichOneof("output")
            if kind == "heartbeat":
                beat = frame.heartbeat
                heartbeats.append(self.dynamic(beat.value) if beat.HasField("value") else CLEARED)
            elif kind == "stream_write":
                write = frame.stream_write
                stream = self.definition(flow, write.stream_name, dex.Stream)
                writes.append((write.stream_name, self.typed(write.value, stream)))
            elif kind == "result":
                results.append(frame.result)
        return tuple(heartbeats), tuple(writes), results

    def step_result(
        self, flow: Any, frames: Sequence[Any], error: WorkerError | None
    ) -> tuple[dict[str, Any], Any]:
        """The outcome fields ``wait_for`` and ``execute`` share, and the result they decode.

        The result is the last result frame, or ``None`` when the call failed or the
        stream ended without one; then the fields hold the error and what was streamed
        before it.
        """
        heartbeats, stream_writes, results = self.frames(flow, frames)
        streamed: dict[str, Any] = {"heartbeats": heartbeats, "stream_writes": stream_writes}
        if error is not None or not results:
            return {**streamed, "error": error or missing_result()}, None
        result = results[-1]
        fields = {
            **streamed,
            "step_locals": self.dynamic_entries(result.upsert_step_exe_locals),
            "raw": result,
            **self.effects(flow, result),
        }
        return fields, result

    def effects(self, flow: Any, result: Any) -> dict[str, Any]:
        """The staged writes common to every result message, as ``_Writes`` fields."""
        attribute_writes: dict[str, Any] = {}
        map_writes: dict[AttributeMapKey, Any] = {}
        for write in result.upsert_attributes:
            name, instance = _split_physical(write.key)
            definition = flow.persistence[name]
            value = (
                DELETED
                if write.value.WhichOneof("kind") == "null_value"
                else self.typed(write.value, definition)
            )
            if instance is None:
                attribute_writes[name] = value
            else:
                map_writes[(name, instance)] = value
        publishes = []
        for message in result.publish_to_channel:
            name, instance = _split_physical(message.channel_name)
            publishes.append((name, instance, self.typed(message.value, flow.persistence[name])))
        deletions = [
            (*_split_physical(deletion.channel_name), deletion.message_id)
            for deletion in result.delete_from_channel
        ]
        return {
            "attribute_writes": attribute_writes,
            "attribute_map_writes": map_writes,
            "channel_publishes": tuple(publishes),
            "channel_deletions": tuple(deletions),
            "events": self.dynamic_entries(result.record_events),
        }

    def movement(self, flow: Any, movement: Any) -> Movement:
        """A ``StepMovement`` with its input decoded by the target Step's input type."""
        target = flow.step(movement.step_type)
        options = proto_to_plain(movement.step_options)
        skip_wait_for = bool(options.pop("skip_wait_for", False))
        return Movement(
            step_type=movement.step_type,
            input=self._values.decode(movement.step_input, target.input_codec),
            options=options or None,
            skip_wait_for=skip_wait_for,
        )

    def decision(self, flow: Any, decision: Any) -> Decision:
        """A ``StepDecision`` as a :class:`Decision`."""
        kind = DecisionKind.GO_TO
        output: Any = ABSENT
        reason: str | None = None
        conditional: tuple[str, ...] = ()
        if decision.HasField("close_decision"):
            close = decision.close_decision
            kind = _CLOSE_KINDS[close.close_decision_type]
            conditional = tuple(close.conditional_channel_names)
            if close.HasField("close_input"):
                output = self.dynamic(close.close_input)
            if kind is DecisionKind.FORCE_FAIL:
                reason, output = output, ABSENT
        return Decision(
            kind=kind,
            movements=tuple(self.movement(flow, move) for move in decision.next_steps),
            output=output,
            reason=reason,
            canceling_step_types=tuple(decision.cancel_step_types),
            canceling_sibling_step_types=tuple(decision.cancel_sibling_step_types),
            conditional_channels=conditional,
        )

    def wait(self, flow: Any, result: Any) -> WaitSpec:
        """The mapped ``WaitingCondition`` of a ``wait_for`` result."""
        waiting = result.waiting_condition
        channels = []
        for condition in waiting.channel_conditions:
            name, instance = _split_physical(condition.channel_name)
            channels.append(
                ChannelConditionSpec(
                    condition_id=condition.condition_id,
                    channel=name,
                    instance=instance,
                    at_least=condition.at_least if condition.HasField("at_least") else None,
                    at_most=condition.at_most if condition.HasField("at_most") else None,
                )
            )
        sub_flows = []
        for condition in waiting.sub_flow_conditions:
            target = self._registry._flow_by_type(condition.sub_flow_type)
            start = target.step(condition.start_step_type)
            sub_flows.append(
                SubFlowSpec(
                    condition_id=condition.condition_id,
                    flow_type=condition.sub_flow_type,
                    start_step_type=condition.start_step_type,
                    input=self._values.decode(condition.step_input, start.input_codec),
                    index=condition.sub_flow_index,
                    step_options=proto_to_plain(condition.step_options),
                    options=proto_to_plain(condition.options),
                )
            )
        return WaitSpec(
            kind=_WAIT_KINDS[waiting.waiting_condition_type],
            timers=tuple(
                TimerSpec(
                    condition_id=timer.condition_id,
                    duration=timedelta(seconds=timer.duration_seconds),
                )
                for timer in waiting.timer_conditions
            ),
            channels=tuple(channels),
            sub_flows=tuple(sub_flows),
            combinations=tuple(
                tuple(combination.condition_ids) for combination in waiting.condition_combinations
            ),
        )


def worker_error(failure: Any) -> WorkerError:
    """Read the ``WorkerErrorResponse`` the SDK packs into a failed call's status."""
    status = rpc_status.from_call(failure)
    worker = pb.WorkerErrorResponse()
    found = False
    for detail in status.details if status is not None else ():
        if detail.Is(pb.WorkerErrorResponse.DESCRIPTOR):
            found = detail.Unpack(worker)
    return WorkerError(
        status_code=failure.code().name,
        error_type=worker.error_type if found else "",
        detail=worker.detail if found else (failure.details() or ""),
        retry_after_seconds=worker.retry_after_seconds if found else 0,
        stack_trace=worker.stack_trace if found else "",
    )


def missing_result() -> WorkerError:
    """The error for a stream that ended without a result frame."""
    return WorkerError(
        status_code="OK",
        error_type="",
        detail="the Worker closed the stream without a result",
        retry_after_seconds=0,
        stack_trace="",
    )
