"""How the SQLite store writes its rows and times and reads them back: the codec of
``sqlite_schema``'s tables, kept apart from their definitions."""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from dex_agents.adapters.local.sqlite_schema import (
    EXECUTION_COLUMNS,
    EXECUTION_DATA,
)
from dex_agents.adapters.local.store_rows import (
    EXECUTION_TIME_FIELDS,
    utc_time,
)
from dex_agents.adapters.local.stored_text import pack_history_field
from dex_agents.ports.flow_rows import (
    ExecutionRow,
    ExecutionStatus,
    FlowRow,
)

_TIME_TEXT = "%04d-%02d-%02dT%02d:%02d:%02d.%06d+00:00"
"""``isoformat(timespec="microseconds")`` of a UTC time, formatted by ``%``: the method
parses its keyword, formats the offset and builds the text through ``PyUnicode_FromFormat``
(about 15.6 K instructions a time with ``astimezone``, against 12.6 K this way)."""


def encode_time(value: datetime) -> str:
    utc = value.astimezone(UTC)
    return _TIME_TEXT % (
        utc.year,
        utc.month,
        utc.day,
        utc.hour,
        utc.minute,
        utc.second,
        utc.microsecond,
    )


STORED_TIMES_KEPT = 4096
"""How many times' stored text ``stored_time`` keeps before it forgets them all."""

_STORED_TIMES: dict[datetime, str] = {}


def stored_time(value: datetime, what: str) -> str:
    """The text a time is stored as (UTC, microseconds); ``what`` names it in the error that
    refuses a naive time or a value that is not a ``datetime`` (``utc_time``).

    A turn stores about 33 times, only 9 of them distinct: a row's times go to every
    update of it. ``isoformat`` costs more than a lookup, so the text of each time in UTC
    is kept. Only UTC's: two times of one other zone an hour apart across a change of its
    clocks (``fold``) are equal and hash alike, so a kept text could name the other.
    """
    utc = type(value) is datetime and value.tzinfo is UTC
    if utc:
        text = _STORED_TIMES.get(value)
        if text is not None:
            return text
    text = encode_time(utc_time(value, what))
    if utc:
        if len(_STORED_TIMES) >= STORED_TIMES_KEPT:
            _STORED_TIMES.clear()
        _STORED_TIMES[value] = text
    return text


def decode_time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def encode_value(value: object) -> object:
    if isinstance(value, datetime):
        return encode_time(value)
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, bool):
        return int(value)
    return value


def row_params(row: FlowRow | ExecutionRow, columns: Sequence[str]) -> dict[str, object]:
    return {name: encode_value(getattr(row, name)) for name in columns}


# A status written a hundred times a turn is looked up here: calling the enum costs about
# ten times as much. A StrEnum member hashes and compares as its text, so either finds its
# entry; anything else goes to the enum, which raises ValueError.
_EXECUTION_STATUS_TEXTS = {status.value: status.value for status in ExecutionStatus}


def _execution_status_text(value: Any) -> str:
    # The member's text without the enum's value property, which costs as much as the lookup.
    found = _EXECUTION_STATUS_TEXTS.get(value) if isinstance(value, str) else None
    return found if found is not None else ExecutionStatus(value).value


# A turn writes and reads a few dozen execution rows, so their columns are handled by
# position, with the positions of the fields that need converting worked out once.
_READ_DATA = operator.attrgetter(*EXECUTION_DATA)
_DATA_TIMES = tuple(EXECUTION_DATA.index(name) for name in EXECUTION_TIME_FIELDS)
_DATA_STATUS = EXECUTION_DATA.index("status")
_DATA_FLAGS = (EXECUTION_DATA.index("attempt_started"), EXECUTION_DATA.index("cancel_requested"))
# A finished execution is history: its longest fields are read again only to list it.
_HISTORY_FIELDS = ("options", "wait", "wait_result")
_FINISHED_STATUSES = frozenset(
    status.value
    for status in (ExecutionStatus.COMPLETED, ExecutionStatus.FAILED, ExecutionStatus.CANCELLED)
)
_DATA_HISTORY = tuple(EXECUTION_DATA.index(name) for name in _HISTORY_FIELDS)
_DATA_OPTIONS = EXECUTION_DATA.index("options")

EXECUTION_INSERT = (
    f"INSERT INTO step_executions ({', '.join(EXECUTION_DATA)}) "
    f"VALUES ({', '.join('?' for _ in EXECUTION_DATA)})"
)
EXECUTION_UPDATE = (
    f"UPDATE step_executions SET {', '.join(f'{name} = ?' for name in EXECUTION_DATA)} "
    "WHERE id = ? AND flow_id = ?"
)
"""Every column of one execution, by ``id``, where its Flow run is the one given: a Step
execution never moves to another run."""
EXECUTION_DATA_POSITIONS = tuple(
    position for position, name in enumerate(EXECUTION_COLUMNS) if name != "id"
)
"""Where each ``EXECUTION_DATA`` column is in a row read with ``EXECUTION_SELECT``."""

_ID = EXECUTION_COLUMNS.index("id")


def stored_execution_row(execution_id: int, data: Sequence[object]) -> tuple[object, ...]:
    """An execution's stored values in ``EXECUTION_COLUMNS`` order, as ``EXECUTION_SELECT``
    reads them, from its stored ``EXECUTION_DATA`` values (``stored_execution_values``)."""
    # EXECUTION_DATA is EXECUTION_COLUMNS in their order, less the ID.
    return (*data[:_ID], execution_id, *data[_ID:])


# Python's sqlite3 binds an int, float or str as it is, but looks up an adapter for any
# other value (about 1.3 K instructions each, a failed attribute lookup among them): a new
# execution's INSERT has about 11 NULLs. So a NULL is written in the statement's text, and
# only the other values are bound. An execution's rows take a handful of NULL patterns,
# each a statement SQLite keeps prepared.
_NONES = itertools.repeat(None)


def _nulls(values: Sequence[object]) -> tuple[bool, ...]:
    """Which of ``values`` are ``None``."""
    return tuple(map(operator.is_, values, _NONES))


def _not_null(values: Sequence[object]) -> list[object]:
    """``values`` less their ``None``s, in order."""
    return list(itertools.compress(values, map(operator.is_not, values, _NONES)))


@functools.lru_cache(maxsize=128)
def _execution_insert(nulls: tuple[bool, ...]) -> str:
    marks = ", ".join("NULL" if null else "?" for null in nulls)
    return f"INSERT INTO step_executions ({', '.join(EXECUTION_DATA)}, id) VALUES ({marks}, ?)"


def execution_insert_statement(
    execution_id: int, values: Sequence[object]
) -> tuple[str, list[object]]:
    """``EXECUTION_INSERT`` of ``values`` (``EXECUTION_DATA``'s, stored) with the ID
    ``execution_id`` given, their NULLs written in the statement."""
    return _execution_insert(_nulls(values)), [*_not_null(values), execution_id]


@functools.lru_cache(maxsize=128)
def execution_update(positions: tuple[int, ...], nulls: tuple[bool, ...] | None = None) -> str:
    """The UPDATE of only the ``EXECUTION_DATA`` columns at ``positions``, by ``id``; those
    that ``nulls`` marks are set to NULL in the text, not bound."""
    marks = nulls or (False,) * len(positions)
    columns = ", ".join(
        f"{EXECUTION_DATA[position]} = {'NULL' if null else '?'}"
        for position, null in zip(positions, marks, strict=True)
    )
    return f"UPDATE step_executions SET {columns} WHERE id = ?"


_FLOW_FIELD = EXECUTION_DATA.index("flow_id")


def execution_update_statement(
    execution_id: int, values: Sequence[object], changed: Sequence[int] | None
) -> tuple[str, list[object]]:
    """The UPDATE of an execution's ``changed`` columns (``None``: all, where its Flow run is
    still ``values``' own) to ``values``."""
    if changed is None:
        return EXECUTION_UPDATE, [*values, execution_id, values[_FLOW_FIELD]]
    changed_values = [values[i] for i in changed]
    return (
        execution_update(tuple(changed), _nulls(changed_values)),
        [*_not_null(changed_values), execution_id],
    )


def execution_fields(row: ExecutionRow) -> tuple[Any, ...]:
    """The row's ``EXECUTION_DATA`` fields as they are now, before encoding."""
    fields_now: tuple[Any, ...] = _READ_DATA(row)
    return fields_now


def stored_execution_values(fields_now: Sequence[Any]) -> list[object]:
    """The values of ``EXECUTION_DATA`` as stored, from a row's ``execution_fields``: UTC
    times, the status's text, 0 or 1.

    Refuses what ``normalized_execution`` refuses: a naive time, an unknown status.
    """
    values: list[Any] = list(fields_now)
    for position in _DATA_TIMES:
        if values[position] is not None:
            values[position] = _stored_time(position, values[position])
    status = values[_DATA_STATUS] = _execution_status_text(values[_DATA_STATUS])
    for position in _DATA_FLAGS:
        values[position] = int(bool(values[position]))
    finished = status in _FINISHED_STATUSES
    for position in _DATA_HISTORY:
        values[position] = _stored_history(position, values[position], finished)
    return values


def _stored_time(position: int, value: datetime) -> str:
    return stored_time(value, f"ExecutionRow.{EXECUTION_DATA[position]}")


def _stored_history(position: int, text: str | None, finished: bool) -> str | bytes | None:
    # A finished execution is history: its longest fields are stored packed. Options are
    # packed from the insert on: a row written long and shrunk when it finished left its
    # page part empty (rows go to the table's end, never back into an earlier page), and
    # a session with compaction kept 600 KiB of Step history in 1 KiB pages, not 450.
    if text is None or not (finished or position == _DATA_OPTIONS):
        return text
    return pack_history_field(text)


_DATA_HISTORY_SET = frozenset(_DATA_HISTORY)
_DATA_POSITIONS = range(len(EXECUTION_DATA))


def changed_execution_values(
    fields_now: Sequence[Any], fields_before: Sequence[Any], stored_before: Sequence[object]
) -> tuple[list[object], list[int]]:
    """The stored values of a row whose fields went from ``fields_before`` (stored as
    ``stored_before``) to ``fields_now``, and the ``EXECUTION_DATA`` positions that changed.

    Equal to ``stored_execution_values(fields_now)``, but a field that did not change is not
    encoded (or checked) again: an update of a Step's row changes a few of its fields.
    """
    if len(fields_now) != len(fields_before):
        raise ValueError(f"{len(fields_now)} fields now against {len(fields_before)} before")
    stored = list(stored_before)
    changed: list[int] = []
    # An update keeps most fields as the very objects it read: those are passed over in C,
    # not looked at one by one (a turn updates about 15 rows of 24 fields).
    for position in itertools.compress(
        _DATA_POSITIONS, map(operator.is_not, fields_now, fields_before)
    ):
        new, old = fields_now[position], fields_before[position]
        if new == old or position in _DATA_HISTORY_SET:
            continue
        if position == _DATA_STATUS:
            new = _execution_status_text(new)
        elif position in _DATA_FLAGS:
            new = int(bool(new))
        elif position in _DATA_TIMES and new is not None:
            new = _stored_time(position, new)
        if new != stored[position]:
            stored[position] = new
            changed.append(position)
    # The status decides how wait fields are stored: a change of it stores them anew. Options
    # are stored packed whatever the status, so only a change of their text does.
    status_changed = _DATA_STATUS in changed
    finished = stored[_DATA_STATUS] in _FINISHED_STATUSES
    for position in _DATA_HISTORY:
        text, before = fields_now[position], fields_before[position]
        unchanged = text is before or text == before
        if unchanged and (not status_changed or position == _DATA_OPTIONS):
            continue
        value = _stored_history(position, text, finished)
        if value != stored[position]:
            stored[position] = value
            changed.append(position)
    changed.sort()
    return stored, changed
