"""Dex Stream messages as the port's, and a message that no longer decodes skipped with a warning.

Dex hands an ``AgentEvents`` message over as the JSON text it was written as
(``wire_values``); the session decodes it as an ``AgentEvent``. Text that no
longer decodes (written by another program, or by a version whose events this
one reads differently) raised ``WireFormatError`` from every read: a reader (a
browser's ``EventSource``, ``wait_for_user``, a CLI follower) resumes from the
message before it and met it again, so it stopped there for good. Streams are
best effort (a reader rebuilds from the session's snapshot), so readers skip the
message, as the embedded engine does, and a warning on ``ENGINE_LOGGER``
names it. A message the SDK itself cannot decode raises ``dex.ValueMappingError``
inside ``read_stream``, before its resume token is known, so it cannot be skipped.
"""

from __future__ import annotations

from typing import Any

import dex

from dex_agents.adapters.dex.wire_values import from_dex
from dex_agents.domain.errors import WireFormatError
from dex_agents.ports.engine import ENGINE_LOGGER as logger
from dex_agents.ports.flow_client import StreamMessage
from dex_agents.ports.persistence import StreamDef


def port_stream_message(
    declaration: StreamDef[Any], flow_id: str, message: dex.StreamMessage[Any]
) -> StreamMessage[Any] | None:
    """A Dex Stream message as the port's ``StreamMessage``, its value decoded; ``None``
    (logged) when the value no longer decodes."""
    try:
        value = from_dex(declaration.value_type, message.value)
    except (WireFormatError, TypeError) as error:
        logger.warning(
            "skipped Stream event %r of session %r, which no longer decodes: %s",
            message.resume_token,
            flow_id,
            error,
        )
        return None
    return StreamMessage(
        value=value,
        resume_token=message.resume_token,
        created_at=message.created_time,
        source=message.source,
    )
