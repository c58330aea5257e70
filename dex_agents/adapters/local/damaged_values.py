"""Which stored Attribute value a failed read could not decode, named by Attribute, key and Flow run.

A read of several values fails as a whole: SQLite's UTF-8 error names no row,
and a compressed value that no longer inflates names no key. A person who
repairs the file needs to know which value to repair, and a failed attempt's
record should say what it could not read, so on that failure path only each
value the read covered is read again as bytes and decoded here, one by one.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Sequence

from dex_agents.adapters.local.store_errors import StoredValueError
from dex_agents.adapters.local.stored_text import unpack

_UTF8_ERROR = "Could not decode to UTF-8"
"""What Python's sqlite3 says of a TEXT value that is not UTF-8."""


def is_undecodable(error: BaseException) -> bool:
    """Whether ``error``, raised by a read of stored values, says a value did not decode."""
    if isinstance(error, StoredValueError):
        return True
    return isinstance(error, sqlite3.OperationalError) and _UTF8_ERROR in str(error)


_QUOTED_TEXT = re.compile(r" with text '.*'\Z", re.DOTALL)
"""The copy of the value that Python's sqlite3 puts after the column's name."""

LEFT_OUT = " (its text is left out)"
"""What stands for the quoted text in a scrubbed error."""


def scrub_undecodable_text(error: BaseException) -> None:
    """Cut, in place, the copy of a stored text that did not decode from ``error``'s message.

    Python's sqlite3 quotes the whole value ("Could not decode to UTF-8 column 'value'
    with text '...'"): a user's message, a tool's output, a key. A traceback prints the
    chained exceptions too, so the one SQLite raised is scrubbed where it is caught,
    before any error that names it is made.
    """
    if isinstance(error, sqlite3.OperationalError) and _UTF8_ERROR in str(error):
        error.args = tuple(
            _QUOTED_TEXT.sub(LEFT_OUT, arg) if isinstance(arg, str) else arg for arg in error.args
        )


def value_name(name: str, key: str, flow_id: str) -> str:
    """How an error names one stored value: its Attribute, its key (a map's), its Flow run."""
    where = "" if key == "" else f", key {key!r},"
    return f"the stored value of Attribute {name!r}{where} of Flow run {flow_id!r}"


def damaged_value(
    execute: Callable[[str, Sequence[object]], sqlite3.Cursor],
    flow_id: str,
    names: Sequence[str],
    keys: Sequence[str] | None = None,
) -> StoredValueError | None:
    """The error naming the first of ``flow_id``'s values of ``names`` (of ``keys``, if given)
    that does not decode; ``None`` when each does (the damage is elsewhere)."""
    if not names:
        return None
    params: list[object] = [flow_id, *names]
    where = f"flow_id = ? AND name IN ({', '.join('?' for _ in names)})"
    if keys is not None:
        where += f" AND key IN ({', '.join('?' for _ in keys)})"
        params.extend(keys)
    # As bytes, so that SQLite hands over a value that is not UTF-8 instead of failing.
    sql = f"""SELECT name, key, typeof(value), CAST(value AS BLOB) FROM attribute_values
        WHERE {where} ORDER BY name, key"""
    try:
        rows = execute(sql, params).fetchall()
    except sqlite3.OperationalError:
        return None  # a name or key is not UTF-8 either: the read's own error says what it can
    for name, key, kind, stored in rows:
        try:
            if kind == "text":
                bytes(stored).decode("utf-8")
            else:
                unpack(stored)
        except UnicodeDecodeError as error:
            return StoredValueError(f"{value_name(name, key, flow_id)} is not UTF-8 text: {error}")
        except StoredValueError as error:
            return StoredValueError(f"{value_name(name, key, flow_id)} could not be read: {error}")
    return None
