"""Why a session's page takes no controls: the session ended, or this console does not run it."""

from __future__ import annotations

from dex_agents.console.catalog import ConsoleFlow
from dex_agents.ports.flow_client import FlowInfo


def read_only_reason(entry: ConsoleFlow, info: FlowInfo) -> str:
    """Why the page of a session takes no controls: a stopped, failed or completed session
    takes no more, whichever Flow type it is, and this console serves only its own."""
    if info.status != "running":
        return ended(info)
    return f"this console does not run {entry.flow.flow_type} sessions"


def ended(info: FlowInfo) -> str:
    """How a session that no longer runs ended; a failed one says why (a stop's reason is the
    stopper's own words, for its own page)."""
    if info.status == "failed" and info.failure_reason:
        return f"this session is failed: {info.failure_reason}"
    return f"this session is {info.status}"
