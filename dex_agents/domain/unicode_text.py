"""Text that cannot be stored: lone surrogates, and the one rule for them.

A Python ``str`` can hold a lone surrogate (U+D800 to U+DFFF), most often from
``os.fsdecode`` of a file name that is not valid UTF-8. Such text has no UTF-8
form, so SQLite, Dex and every wire refuse it. The rule:

- **From the caller** (a message, an answer, a session ID): refused at the door
  with ``ValueError`` naming the argument and where the surrogate is, before
  anything is stored. The caller knows where the text came from and can decode
  it with ``errors="replace"``.
- **From a tool or a model** (a result, an answer, an event): kept. The
  canonical JSON writes each surrogate as its ``\\uXXXX`` escape, which is
  valid UTF-8 and decodes back to the same string, so a tool's result is never
  lost over a file name.
- **To a serializer of another library** (the browser snapshot's ``to_json``,
  served by a web framework's ``JSONResponse``): each surrogate becomes U+FFFD
  in a copy, the stored text unchanged.
"""

from __future__ import annotations

import copy
import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def first_lone_surrogate(text: str) -> int | None:
    """The index of the first surrogate code point in ``text``, or ``None``."""
    match = _SURROGATE.search(text)
    return None if match is None else match.start()


def require_storable_text(where: str, name: str, text: str) -> str:
    """Return ``text`` when it has a UTF-8 form; raise ``ValueError`` naming the argument otherwise."""
    index = first_lone_surrogate(text)
    if index is not None:
        raise ValueError(
            f"{where}: {name} is not valid Unicode text: it has a lone surrogate "
            f"U+{ord(text[index]):04X} at index {index} (decode bytes with errors='replace')"
        )
    return text


def join_surrogate_pairs(text: str) -> str:
    """``text`` with each high surrogate followed by a low one read as the one character they encode.

    A source that slices text by UTF-16 units (a JavaScript gateway, say) can
    send the halves of an emoji in two pieces, each decoded from its JSON
    ``\\uXXXX`` escape on its own: joined, they are still two code points, not
    the character. A surrogate without its other half stays as it is.
    """
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def escape_lone_surrogates(json_text: str) -> str:
    """``json_text`` with every surrogate code point written as its JSON ``\\uXXXX`` escape.

    Surrogates occur only inside JSON strings (keys and values), where the
    escape means the same code point, so the text still decodes to equal data.
    """
    # ASCII text, nearly all of it, has none: isascii needs no scan of its characters.
    if json_text.isascii() or _SURROGATE.search(json_text) is None:
        return json_text
    return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", json_text)


def replace_lone_surrogates(value: Any) -> Any:
    """A fresh copy of the JSON-compatible ``value`` with each surrogate in its text as U+FFFD.

    For data handed to a serializer this project does not control (a web
    framework's ``JSONResponse``), which writes text as UTF-8 and fails on a
    surrogate. U+FFFD is what a browser shows for the escaped surrogate anyway.
    Keys are text too; values of other types are deep-copied.
    """
    if isinstance(value, str):
        if value.isascii() or _SURROGATE.search(value) is None:
            return value
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {
            replace_lone_surrogates(key): replace_lone_surrogates(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [replace_lone_surrogates(item) for item in value]
    if isinstance(value, tuple):
        return tuple(replace_lone_surrogates(item) for item in value)
    return copy.deepcopy(value)
