"""How :class:`~tests.adapters.dex.fake_dex_driver.DexWorkerDriver` encodes the values it sends.

Values are encoded with the SDK's own mapping (``dex._value_mapper.ValueMapper`` over the
Registry's codecs) and the codec of the declared type (a Step's input type, an
Attribute's ``value_type``, ...). Values the SDK encodes by runtime type (the heartbeat
checkpoint, step-execution locals) are encoded that way too. To send bytes a codec would
not produce, pass a ``dex.Value`` (see :func:`json_value`) or a protobuf ``Value``; they
are sent unchanged.
"""

from __future__ import annotations

import json
from typing import Any

import dex
from dex._value_mapper import ValueMapper
from dex.dexpb import dex_pb2 as pb


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


class WireEncoder:
    """Encodes the driver's Python values into the protobuf ``Value`` Dex would send."""

    def __init__(self, values: ValueMapper) -> None:
        self._values = values

    def encode(self, value: object, codec: Any) -> pb.Value:
        """``value`` with ``codec``, unless it is already a ``dex.Value`` or protobuf ``Value``."""
        given = self._given(value)
        return given if given is not None else self._values.encode(value, codec)

    def encode_as(self, value: object, definition: Any) -> pb.Value:
        """``value`` with the codec of ``definition.value_type``."""
        return self.encode(value, self._values.codec(definition.value_type))

    def encode_dynamic(self, value: object) -> pb.Value:
        """``value`` by its runtime type, as the SDK encodes checkpoints and locals."""
        given = self._given(value)
        return given if given is not None else self._values.encode_dynamic(value)

    def null(self) -> pb.Value:
        """The null ``Value``."""
        return self._values.deletion()

    def _given(self, value: object) -> pb.Value | None:
        """A caller's ready-made value, sent unchanged; ``None`` for a value to encode."""
        if isinstance(value, pb.Value):
            return value
        if isinstance(value, dex.Value):
            return self._values.encode(value, _PassThroughCodec(value.kind))
        return None
