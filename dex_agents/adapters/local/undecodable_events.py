"""Stream events that no longer decode are skipped, with a warning, so readers go on.

The engine checks each event as a reader decodes it before writing it, so an
event that does not decode was damaged in the file, or written by another
program or by a version whose payloads this one reads differently. Raised, it
stopped every reader at it for good: a reader resumes from the event before it
and met it again. Streams are best effort (a reader rebuilds from the session's
snapshot), so readers skip the event and a warning names it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from dex_agents.adapters.local.store_errors import StoredValueError
from dex_agents.domain.errors import WireFormatError
from dex_agents.ports.engine import ENGINE_LOGGER as logger
from dex_agents.ports.flow_rows import EventRow

T = TypeVar("T")


class Skipped:
    """What ``decode_or_skip`` returns for an event it skipped."""


SKIPPED = Skipped()


def decode_or_skip(row: EventRow, decode: Callable[[str], T]) -> T | Skipped:
    """``decode(row.value)``, or ``SKIPPED`` (logged) when the value no longer decodes."""
    try:
        return decode(row.value)
    except (StoredValueError, WireFormatError) as error:
        logger.warning(
            "skipped Stream event %d of session %r, which no longer decodes: %s",
            row.id,
            row.flow_id,
            error,
        )
        return SKIPPED
