"""The ``ContextSummary`` Attribute that compaction writes."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import attrs

from dex_agents.domain.messages import AgentMessage


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


@attrs.frozen(kw_only=True)
class ContextSummaryRequest:
    """What ``CompactContext`` asks a runner to summarize (``summarize_context``).

    ``messages`` are the stored messages after ``previous_summary`` through
    ``through_sequence``; ``input_token_budget`` carries the compaction policy's
    ``context_window_tokens``; ``session_settings`` the running turn's settings.
    """

    flow_id: str
    turn_id: str
    messages: tuple[AgentMessage, ...]
    through_sequence: int
    input_token_budget: int
    previous_summary: ContextSummary | None = None
    session_settings: Mapping[str, Any] = attrs.field(factory=dict)
