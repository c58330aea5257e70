"""The ``ContextSummary`` Attribute that compaction writes."""

from __future__ import annotations

from datetime import datetime

import attrs


@attrs.frozen(kw_only=True)
class ContextSummary:
    """A summary of messages ``first_sequence`` through ``last_sequence``.

    ``generation`` counts the summaries the session has written.
    """

    generation: int
    first_sequence: int = 1
    last_sequence: int
    text: str
    created_at: datetime
