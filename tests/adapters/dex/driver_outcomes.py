"""What :class:`~tests.adapters.dex.fake_dex_driver.DexWorkerDriver` returns.

The outcome records (:class:`WaitForOutcome`, :class:`ExecuteOutcome`,
:class:`RpcOutcome` and their parts) are plain data: no protobuf, values decoded to
Python (see :mod:`tests.adapters.dex.wire_decoder` for how). Physical map names
(``name/quoted-instance``) appear split into ``(name, instance)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from enum import Enum, StrEnum
from typing import Any, Final, TypeAlias

import attrs


class Marker(Enum):
    """Markers for what a plain Python value cannot say."""

    DELETED = "deleted"
    """An Attribute write that deletes the value (the SDK writes a null Value)."""
    CLEARED = "cleared"
    """A heartbeat sent without a value, which clears the stored checkpoint."""
    ABSENT = "absent"
    """A close decision without an output."""


DELETED: Final = Marker.DELETED
CLEARED: Final = Marker.CLEARED
ABSENT: Final = Marker.ABSENT

ChannelKey: TypeAlias = str | tuple[str, str]
"""A Channel by name, or a ChannelMap instance as ``(map name, instance)``."""
AttributeMapKey: TypeAlias = tuple[str, str]
"""An AttributeMap instance: ``(map name, instance key)``."""


class WaitKind(StrEnum):
    """How a Wait combines its conditions (``Wait.skip_immediately`` maps to no Wait)."""

    ALL_OF = "all_of"
    ANY_OF = "any_of"
    ANY_COMBINATION_OF = "any_combination_of"


@attrs.frozen(kw_only=True)
class TimerSpec:
    """A Timer condition: ``Timer.by_duration(duration, condition_id=...)``."""

    condition_id: str
    duration: timedelta


@attrs.frozen(kw_only=True)
class ChannelConditionSpec:
    """A Channel or ChannelMap condition; unset bounds are ``None``."""

    condition_id: str
    channel: str
    instance: str | None
    at_least: int | None
    at_most: int | None


@attrs.frozen(kw_only=True)
class SubFlowSpec:
    """A SubFlow condition with its decoded start input and plain options."""

    condition_id: str
    flow_type: str
    start_step_type: str
    input: Any
    index: int
    step_options: Mapping[str, Any]
    options: Mapping[str, Any]


@attrs.frozen(kw_only=True)
class WaitSpec:
    """The Wait a ``wait_for`` returned, as the Worker mapped it for Dex.

    Conditions are grouped by kind in the SDK's canonical order (Timers, Channels,
    SubFlows), each in argument order; ``combinations`` lists the condition ids of each
    ``ConditionCombination`` of an ``any_combination_of``.
    """

    kind: WaitKind
    timers: tuple[TimerSpec, ...] = ()
    channels: tuple[ChannelConditionSpec, ...] = ()
    sub_flows: tuple[SubFlowSpec, ...] = ()
    combinations: tuple[tuple[str, ...], ...] = ()


class DecisionKind(StrEnum):
    """The kind of a StepDecision on the wire.

    ``go_to`` and ``go_to_many`` are the same on the wire (a list of next Steps), so
    both decode to ``GO_TO``.
    """

    GO_TO = "go_to"
    DEAD_END = "dead_end"
    GRACEFUL_COMPLETE = "graceful_complete"
    FORCE_COMPLETE = "force_complete"
    FORCE_FAIL = "force_fail"
    FORCE_COMPLETE_IF_CHANNELS_EMPTY = "force_complete_if_channels_empty"


@attrs.frozen(kw_only=True)
class Movement:
    """One next Step: its type, decoded input and the StepOptions sent with it.

    ``options`` is the mapped ``StepOptions`` message as a plain dict (proto field names,
    enum value names, only fields that are set), or ``None`` when neither the movement
    nor the target Step has options. ``skip_wait_for`` is whether the target Step has no
    ``wait_for``.
    """

    step_type: str
    input: Any
    options: Mapping[str, Any] | None
    skip_wait_for: bool


@attrs.frozen(kw_only=True)
class Decision:
    """A decoded StepDecision.

    ``output`` is the close output (``ABSENT`` when none was given); ``reason`` is the
    ``force_fail`` reason; ``conditional_channels`` are the Channels a
    ``force_complete_if_channels_empty`` checks (its fallback is the one movement).
    """

    kind: DecisionKind
    movements: tuple[Movement, ...] = ()
    output: Any = ABSENT
    reason: str | None = None
    canceling_step_types: tuple[str, ...] = ()
    canceling_sibling_step_types: tuple[str, ...] = ()
    conditional_channels: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class WorkerError:
    """A failed invocation: the gRPC status and the SDK's ``WorkerErrorResponse``.

    ``error_type`` is the raised exception's ``module.QualifiedName``; ``detail`` its
    message. A Step handler's ``TypeError``/``ValueError`` arrives wrapped as
    ``dex.runtime_errors.InvalidStepResultError``.
    """

    status_code: str
    error_type: str
    detail: str
    retry_after_seconds: int = 0
    stack_trace: str = ""


@attrs.frozen(kw_only=True)
class _Writes:
    """What a handler staged for Dex to commit with its result."""

    attribute_writes: Mapping[str, Any] = attrs.field(factory=dict)
    """Singleton Attribute name to the value written, or ``DELETED``."""
    attribute_map_writes: Mapping[AttributeMapKey, Any] = attrs.field(factory=dict)
    """``(map name, instance)`` to the value written, or ``DELETED``."""
    channel_publishes: tuple[tuple[str, str | None, Any], ...] = ()
    """``(channel, instance or None, value)`` in publish order."""
    channel_deletions: tuple[tuple[str, str | None, str], ...] = ()
    """``(channel, instance or None, message id)`` of the pending messages deleted."""
    events: Mapping[str, Any] = attrs.field(factory=dict)
    """Events recorded with ``context.record_event``, decoded by wire kind."""
    error: WorkerError | None = None
    """Set when the handler raised or the call failed; then no writes, decision, Wait or
    output are set (heartbeats and Stream writes streamed before the failure are kept)."""
    raw: Any = attrs.field(default=None, eq=False, repr=False)
    """The result protobuf message, for anything this record does not decode (not compared)."""


@attrs.frozen(kw_only=True)
class _StepWrites(_Writes):
    """What a Step method staged, plus what it streamed while it ran."""

    heartbeats: tuple[Any, ...] = ()
    """Heartbeat values in order, decoded by wire kind; ``CLEARED`` for ``heartbeat()``."""
    stream_writes: tuple[tuple[str, Any], ...] = ()
    """``(stream name, value)`` in write order."""
    step_locals: Mapping[str, Any] = attrs.field(factory=dict)
    """Step-execution locals set by the handler, decoded by wire kind."""


@attrs.frozen(kw_only=True)
class WaitForOutcome(_StepWrites):
    """What a ``wait_for`` invocation produced; ``wait`` is ``None`` for skip_immediately."""

    wait: WaitSpec | None = None


@attrs.frozen(kw_only=True)
class ExecuteOutcome(_StepWrites):
    """What an ``execute`` invocation produced; ``decision`` is ``None`` on error."""

    decision: Decision | None = None


@attrs.frozen(kw_only=True)
class RpcOutcome(_Writes):
    """What an RPC invocation produced.

    ``output`` is decoded with the RPC's declared output type (``None`` for an RPC that
    returns ``None``); ``next_steps`` and ``canceling_step_types`` come from its
    ``RPCResult``.
    """

    output: Any = None
    next_steps: tuple[Movement, ...] = ()
    canceling_step_types: tuple[str, ...] = ()
