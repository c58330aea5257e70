"""Argument checks at the public doors: a value of the wrong type is refused, never coerced.

Python does not check annotations, and what slips through would be coerced on
the way to the session (``bool("false")`` is ``True``, ``str(None)`` is
``"None"``), so ``AgentSessionClient`` checks every argument before it sends
anything. Each check raises ``TypeError`` naming the door and the argument, for
example ``resolve_interrupt: approved must be a bool, not str ('false')``, and
returns the value with its type narrowed.

The rules are those of the wire converter (``dex_agents.domain.wire``): only a
``bool`` is a ``bool``; an ``int`` is never a ``bool``, a ``float`` or a
``str``; only a ``str`` is a ``str``. ``None`` passes only where the argument is
optional.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping

from dex_agents.domain.unicode_text import require_storable_text


def _refuse(where: str, name: str, expected: str, value: object) -> TypeError:
    # A short repr: enough to recognize the value, never a whole message text.
    shown = "None" if value is None else f"{type(value).__name__} ({reprlib.repr(value)})"
    return TypeError(f"{where}: {name} must be {expected}, not {shown}")


def refusal(where: str, name: str, expected: str, value: object) -> TypeError:
    """The ``TypeError`` the checks here raise, for a check that also converts a value."""
    return _refuse(where, name, expected, value)


def require_str(where: str, name: str, value: object) -> str:
    """Return ``value`` if it is a ``str``; raise ``TypeError`` naming ``where`` and ``name``.

    A ``str`` that is not valid Unicode text (a lone surrogate) raises ``ValueError``
    (``require_storable_text``): it could not be stored.
    """
    if not isinstance(value, str):
        raise _refuse(where, name, "a str", value)
    return require_storable_text(where, name, value)


def require_optional_str(where: str, name: str, value: object) -> str | None:
    """Return ``value`` if it is a ``str`` or ``None``; raise ``TypeError`` otherwise."""
    if value is None:
        return value
    if isinstance(value, str):
        return require_storable_text(where, name, value)
    raise _refuse(where, name, "a str or None", value)


def require_bool(where: str, name: str, value: object) -> bool:
    """Return ``value`` if it is a ``bool``; raise ``TypeError`` otherwise.

    Neither ``"false"`` nor ``0`` is a ``bool``: an approval must say ``True`` or ``False``.
    """
    if not isinstance(value, bool):
        raise _refuse(where, name, "a bool", value)
    return value


def require_int(where: str, name: str, value: object) -> int:
    """Return ``value`` if it is an ``int`` other than a ``bool``; raise ``TypeError`` otherwise."""
    # bool is a subclass of int, and True is no revision number or page size.
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise _refuse(where, name, "an int", value)


def require_optional_int(where: str, name: str, value: object) -> int | None:
    """Return ``value`` if it is ``None`` or an ``int`` other than a ``bool``; raise ``TypeError`` otherwise."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise _refuse(where, name, "an int or None", value)


def require_instance(
    where: str, name: str, value: object, kind: type | tuple[type, ...], expected: str
) -> None:
    """Raise ``TypeError`` naming ``where`` and ``name`` unless ``value`` is a ``kind``.

    ``expected`` says what it must be (``"a timedelta"``, ``"a CompactionPolicy or None"``);
    put ``type(None)`` in ``kind`` where ``None`` is allowed.
    """
    if not isinstance(value, kind):
        raise _refuse(where, name, expected, value)


def require_str_mapping(where: str, name: str, value: object) -> Mapping[str, str]:
    """Return ``value`` if it is a mapping of ``str`` to ``str``; raise ``TypeError`` otherwise.

    The message names the first key or value of the wrong type.
    """
    if not isinstance(value, Mapping):
        raise _refuse(where, name, "a mapping of str to str", value)
    for key, item in value.items():
        if not isinstance(key, str):
            raise _refuse(where, f"every key of {name}", "a str", key)
        if not isinstance(item, str):
            raise _refuse(where, f"{name}[{key!r}]", "a str", item)
    return value
