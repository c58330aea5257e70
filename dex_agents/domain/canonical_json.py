"""The project's canonical JSON text: compact, sorted keys, non-ASCII unescaped, no NaN.

A turn encodes some fifty values and decodes some thirty, most of them a few
hundred bytes, where the standard library's entry points cost more than the
C code they call: ``JSONEncoder.encode`` builds a new C encoder for every
value, and ``json.loads`` runs two regular expressions around the C scanner.
Here one C encoder and one scanner serve every call; ``compact_encoder`` makes
such an encoder for the other compact texts a turn writes with ``json.dumps``'
options (the engine's stored waits and options, the built-in loop's items).
An encoder keeps no circular-reference table (a table shared between threads
could name a value two threads encode at once as circular); a value that
recurses too deeply is encoded again by the standard encoder, so a circular
one still gets its ``ValueError``. Text the scanner does not read to its end
(surrounding whitespace, trailing data, ``bytes``) goes to ``json.loads``,
which decodes it or raises its own error. Without the C accelerator both are
the standard library's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json import decoder as json_decoder
from json import encoder as json_encoder
from typing import Any

from dex_agents.domain.unicode_text import escape_lone_surrogates


def compact_encoder(
    *, sort_keys: bool, ensure_ascii: bool, allow_nan: bool
) -> Callable[[Any], str]:
    """An encoder that writes what ``json.dumps(value, separators=(",", ":"), ...)`` writes
    with these options, byte for byte, and raises its errors, with one C encoder for every
    call (see the module docstring)."""
    standard = json.JSONEncoder(
        ensure_ascii=ensure_ascii,
        separators=(",", ":"),
        sort_keys=sort_keys,
        allow_nan=allow_nan,
    )
    make: Any = getattr(json_encoder, "c_make_encoder", None)  # not in the typeshed stubs
    if make is None:
        return standard.encode
    # markers (None: no circular check), default, string encoder, indent, key separator,
    # item separator, sort_keys, skipkeys, allow_nan: what JSONEncoder.iterencode passes it.
    # The string encoders are the C ones whenever c_make_encoder is, as JSONEncoder pairs them.
    strings = (
        json_encoder.encode_basestring_ascii if ensure_ascii else json_encoder.encode_basestring
    )
    encoder = make(None, standard.default, strings, None, ":", ",", sort_keys, False, allow_nan)

    def encode(value: Any) -> str:
        try:
            return "".join(encoder(value, 0))
        except RecursionError:
            return standard.encode(value)  # names a circular value; a deep one raises again

    return encode


_CANONICAL = compact_encoder(sort_keys=True, ensure_ascii=False, allow_nan=False)


def dumps(data: Any) -> str:
    """Write a JSON-compatible value as canonical JSON text.

    Non-ASCII text stays unescaped, except lone surrogates, which have no UTF-8
    form: each is written as its ``\\uXXXX`` escape (``dex_agents.domain.unicode_text``).
    """
    return escape_lone_surrogates(_CANONICAL(data))


# The scanner json.loads runs (C when the accelerator is there); not in the typeshed stubs.
_scan: Callable[[str, int], tuple[Any, int]] = getattr(  # noqa: B009 (mypy: not in the stubs)
    json_decoder.JSONDecoder(), "scan_once"
)


def loads(text: str | bytes) -> Any:
    """Decode JSON text as ``json.loads`` does, raising its ``JSONDecodeError``."""
    if type(text) is str:
        try:
            value, end = _scan(text, 0)
        except StopIteration:
            pass  # no value at the start: json.loads says what is there instead
        else:
            if end == len(text):
                return value
    return json.loads(text)
