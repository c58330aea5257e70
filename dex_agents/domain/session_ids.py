"""Session IDs: the Flow ID of a session run, and the rule every door checks before it sends one.

A session ID is a non-empty, non-blank ``str`` of at most ``MAX_SESSION_ID_BYTES``
bytes as UTF-8 with no ``/`` and no control character. The ``/`` is refused
because it separates the parts of a tool call's idempotency key
(``<session ID>/<turn ID>/<tool call ID>``) and of the engines' own keys.
Control characters (Unicode category ``Cc``: C0, DEL and C1, the escape
character included) are refused because session IDs are shown in terminals,
logs and Dex Web, where an escape sequence would rewrite what the reader sees.
Lone surrogates are refused because they have no UTF-8 form to send.

Format characters (category ``Cf``, such as the bidirectional controls and the
zero-width joiner) are allowed on purpose: they are part of ordinary text in
several scripts and in emoji, so refusing them would refuse real names; a
display that must not be reordered should escape them itself.
"""

from __future__ import annotations

import reprlib
import unicodedata

from dex_agents.domain.errors import InvalidSessionIdError

MAX_SESSION_ID_BYTES = 256
"""The longest session ID, in bytes as UTF-8.

The spec sets no limit; 256 bytes is far more than any generated ID (a UUID is
36) and keeps IDs, which every idempotency key, log line and span repeats, small.
"""


def _shown(session_id: str) -> str:
    # Short and escaped, so the message itself carries no control character.
    return reprlib.repr(session_id)


def validate_session_id(session_id: str) -> str:
    """Return ``session_id`` if it is a valid session ID; otherwise raise, naming the fault.

    Raises ``TypeError`` for a value that is not a ``str`` and
    ``InvalidSessionIdError`` (a ``ValueError``) for a ``str`` that is empty or
    blank, contains ``/``, a control character or a lone surrogate, or is longer
    than ``MAX_SESSION_ID_BYTES`` as UTF-8.
    """
    candidate: object = session_id
    if not isinstance(candidate, str):
        raise TypeError(
            f"a session ID must be a str, not {type(candidate).__name__} "
            f"({reprlib.repr(candidate)})"
        )
    if not session_id:
        raise InvalidSessionIdError("invalid session ID '': it is empty")
    if not session_id.strip():
        raise InvalidSessionIdError(f"invalid session ID {_shown(session_id)}: it is blank")
    if "/" in session_id:
        raise InvalidSessionIdError(
            f"invalid session ID {_shown(session_id)}: it contains '/', "
            "which separates the parts of the keys built from a session ID"
        )
    for index, character in enumerate(session_id):
        category = unicodedata.category(character)
        if category == "Cc":
            raise InvalidSessionIdError(
                f"invalid session ID {_shown(session_id)}: it contains the control "
                f"character U+{ord(character):04X} at index {index}"
            )
        if category == "Cs":
            raise InvalidSessionIdError(
                f"invalid session ID {_shown(session_id)}: it contains the lone surrogate "
                f"U+{ord(character):04X} at index {index}, which has no UTF-8 form"
            )
    size = len(session_id.encode("utf-8"))
    if size > MAX_SESSION_ID_BYTES:
        raise InvalidSessionIdError(
            f"invalid session ID {_shown(session_id)}: it is {size} bytes as UTF-8, "
            f"more than MAX_SESSION_ID_BYTES ({MAX_SESSION_ID_BYTES})"
        )
    return session_id
