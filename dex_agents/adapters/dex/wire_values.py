"""How session values cross into Dex: native primitives, everything else the one JSON wire form.

Dex SDK 1.23.0 resolves a codec only from the ``CodecRegistry`` a ``Registry`` is
built with, and the spec's ``Registry([flow], allow_async_handlers=True)`` passes
none; its automatic codecs cover dataclasses, enums and plain containers, not
attrs classes, ``X | None`` or ``Mapping[str, Any]``. So every session value that
is not a ``str``, ``int``, ``bool`` or ``None`` is declared to Dex as ``str`` and
carries the canonical JSON text of ``dex_agents.domain.wire``: the same bytes the
embedded engine stores for it. Primitives travel natively, so Dex Web shows a
tool call ID as text, not as quoted JSON.
"""

from __future__ import annotations

from typing import Any

from dex_agents.domain.wire import from_json, from_wire, to_json

_NATIVE: tuple[Any, ...] = (str, int, bool, type(None))


def is_native(type_hint: Any) -> bool:
    """Whether Dex carries values of ``type_hint`` with its own primitive codec."""
    return any(type_hint is native for native in _NATIVE)


def dex_type(type_hint: Any) -> Any:
    """The type hint a Dex definition declares for a session value of ``type_hint``."""
    return type_hint if is_native(type_hint) else str


def to_dex(type_hint: Any, value: Any) -> Any:
    """A session value as Dex carries it: itself, or its canonical JSON text."""
    if is_native(type_hint):
        return value
    return to_json(value)


def from_dex(type_hint: Any, value: Any) -> Any:
    """A value read from Dex back as the session value of ``type_hint``.

    Raises ``WireFormatError`` naming the type when JSON text does not fit it, or
    when a native value is not of ``type_hint`` (a ``str`` for a ``bool``, say).
    """
    if is_native(type_hint):
        # Through the converter's strict primitive hooks, as the embedded engine decodes.
        return from_wire(value, type_hint)
    if value is None and type_hint is Any:
        # A failure route takes the failed Step's input as that Step sent it, so
        # ``RecordTurnFailure`` (input ``Any``) gets ``RunModel``'s "no input" as Dex's null.
        return None
    if not isinstance(value, str):
        raise TypeError(f"expected the JSON text of {type_hint!r}, got {type(value).__name__}")
    return from_json(value, type_hint)
