"""What the reliability scenarios share: the soak switch, measured figures, and invariant checks.

``DEX_AGENTS_SOAK=1`` turns the default run (sized for ``./ci.sh``) into a soak
with more rounds, seeds and examples (``soak(default, longer)`` picks). With
``DEX_AGENTS_RELIABILITY_FIGURES=<file>`` set, each scenario appends one JSON
line of what it measured (kills survived, inputs tried, messages lost, writes
duplicated, seconds) for ``docs/reliability.md``.

The checks read a session only through its public client: every stored
message by paging ``list_agent_messages``, and "idle" by
``session_attention``, the rule ``wait_for_user`` follows.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

from dex_agents import AgentSessionClient, SessionAttention, session_attention
from dex_agents.domain.events import ToolCallFinishedPayload
from dex_agents.domain.interrupts import InterruptKind
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.tool_calls import ToolCallStatus
from dex_agents.ports.errors import StreamReadTimeoutError
from dex_agents.ports.flow_client import FlowClient
from dex_agents.testing import wait_until

SOAK_ENV = "DEX_AGENTS_SOAK"
FIGURES_ENV = "DEX_AGENTS_RELIABILITY_FIGURES"
SOAK = os.environ.get(SOAK_ENV) == "1"
REPO_ROOT = Path(__file__).resolve().parents[2]

SETTLE_SECONDS = 90.0
"""How long a session may take to become idle once the faults stop: generous, for a
loaded two-core machine."""


def soak(default: int, longer: int) -> int:
    """``longer`` under ``DEX_AGENTS_SOAK=1``, else ``default``."""
    return longer if SOAK else default


def record_figures(scenario: str, **figures: float | int | str) -> None:
    """Append ``{"scenario": ..., **figures}`` to the figures file, when one is named."""
    path = os.environ.get(FIGURES_ENV)
    if not path:
        return
    line = json.dumps({"scenario": scenario, "soak": SOAK, **figures}, sort_keys=True)
    with open(path, "a", encoding="utf-8") as figures_file:
        figures_file.write(line + "\n")


class Stopwatch:
    """Seconds since it was made, for the figures."""

    def __init__(self) -> None:
        self._start = time.monotonic()

    def seconds(self) -> float:
        return round(time.monotonic() - self._start, 1)


def is_idle(snapshot: AgentSnapshot) -> bool:
    """No turn is active, nothing is queued or pending: the session waits for a message."""
    return session_attention(snapshot) in (SessionAttention.IDLE, SessionAttention.TURN_FAILED)


async def stored_messages(sessions: AgentSessionClient, session_id: str) -> list[AgentMessage]:
    """Every stored message of the session, oldest first, paged through ``list_agent_messages``.

    Paged forwards from sequence 0 (with neither cursor a page is the newest one). No
    session here has retention, so a deleted message would be a lost one: it fails.
    """
    messages: list[AgentMessage] = []
    after = 0
    while True:
        page = await sessions.list_agent_messages(session_id, after_sequence=after, limit=200)
        assert page.deleted_before_sequence is None, f"{session_id}: messages were deleted"
        messages.extend(page.messages)
        if not page.has_more or not page.messages:
            return messages
        after = page.messages[-1].sequence


async def finished_tool_calls(
    client: FlowClient, sessions: AgentSessionClient, session_id: str
) -> dict[str, ToolCallStatus]:
    """Each finished tool call's final status by tool call ID, from the session's Stream.

    A turn's records leave the snapshot when the turn ends; its
    ``tool_call_finished`` events stay.
    """
    statuses: dict[str, ToolCallStatus] = {}
    token = ""
    while True:
        try:
            message = await client.read_stream(
                sessions.flow, session_id, token, poll_timeout=timedelta(milliseconds=30)
            )
        except StreamReadTimeoutError:
            return statuses
        payload = message.value.payload
        if isinstance(payload, ToolCallFinishedPayload):
            assert payload.tool_call_id not in statuses, f"{payload.tool_call_id} finished twice"
            statuses[payload.tool_call_id] = payload.status
        token = message.resume_token


def user_texts(messages: Iterable[AgentMessage]) -> list[str]:
    """The text of every stored user message, in order."""
    return [m.text or "" for m in messages if m.role is MessageRole.USER]


def lost_and_duplicated(acknowledged: Iterable[str], stored: Sequence[str]) -> tuple[int, int]:
    """How many acknowledged texts are not stored, and how many stored more than once."""
    counts = Counter(stored)
    lost = sum(1 for text in acknowledged if counts[text] == 0)
    duplicated = sum(count - 1 for count in counts.values() if count > 1)
    return lost, duplicated


async def approve_pending(sessions: AgentSessionClient, session_id: str) -> None:
    """Approve every approval the session waits for now."""
    snapshot = await sessions.get_agent_snapshot(session_id)
    for interrupt in snapshot.pending_interrupts:
        if interrupt.kind is InterruptKind.APPROVAL:
            await sessions.resolve_interrupt(session_id, interrupt.interrupt_id, approved=True)


@asynccontextmanager
async def approving(
    sessions: AgentSessionClient, session_ids: Sequence[str]
) -> AsyncIterator[None]:
    """Approve every approval of ``session_ids`` as it appears, while the block runs.

    The approvals come from this process, so they go on while Worker children
    are killed and restarted.
    """
    stop = asyncio.Event()

    async def approve_all() -> bool | None:
        for session_id in session_ids:
            await approve_pending(sessions, session_id)
        return True if stop.is_set() else None

    task: asyncio.Task[bool] = asyncio.create_task(
        wait_until("the approver to stop", approve_all, timeout=3600)
    )
    try:
        yield
    finally:
        stop.set()
        await task


async def wait_idle(
    sessions: AgentSessionClient, session_id: str, within: float = SETTLE_SECONDS
) -> AgentSnapshot:
    """The session's snapshot once it is idle; ``TimeoutError`` naming it after ``within`` s."""
    last: list[AgentSnapshot] = []

    async def idle() -> AgentSnapshot | None:
        snapshot = await sessions.get_agent_snapshot(session_id)
        last[:] = [snapshot]
        return snapshot if is_idle(snapshot) else None

    try:
        return await wait_until(f"session {session_id!r} to be idle", idle, within)
    except TimeoutError as error:
        seen = repr(last[0])[:3000] if last else "none"
        raise TimeoutError(f"{error}; stuck at: {seen}") from None
