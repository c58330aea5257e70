"""Waiting until a session needs a person, driven by its ``AgentEvents`` Stream.

The snapshot is the source of truth and the Stream only says when to look
again: the wait skips to the Stream's newest event, reads the snapshot, and
then long-polls the Stream for the next event, so an event committed after
the snapshot was read always wakes it. When that newest event is one of a
turn in progress (a client that has just sent a message), the snapshot would
say the session is busy, so the first read waits for the next event that is
not, or for the Stream to be quiet. A quiet Stream still gets a fresh
snapshot, once it has been quiet for ``FIRST_SNAPSHOT_RECHECK`` and then for
doubling intervals up to ``SNAPSHOT_RECHECK_INTERVAL``: Streams are best effort
on both engines, and some changes write no event (``StartAgentSession``
committing the session's state). Events of a turn in progress keep the Stream
from being quiet, but a wait never goes longer than ``SNAPSHOT_RECHECK_INTERVAL``
without a snapshot, or, with a client that can tell (the embedded engine's
``session_changed_since``), without a look that says no commit changed the
session since the last snapshot: then the snapshot would be the same, and a
wait beside a busy worker (or on a session waiting for a tool) reads none. A
first read put off after an event of a turn in progress is put off the same way
while no commit changed the session since that event was looked up (the
embedded engine's ``stream_tail_marked``), but for ``SNAPSHOT_RECHECK_INTERVAL``
at most: it stands on the event alone, not on a snapshot. A read that finds
the session busy without a new event to say so also asks whether its Flow
still runs (``closed_status``): a failed or stopped session writes no more
events and will never need a person. So does a read that fails: a session that
failed because its state could not be read raises why it failed, not the
read's own error (until 2026-12-07 the damaged file's, which said neither).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from dex_agents.domain.attention import session_attention
from dex_agents.domain.events import AgentEventType
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.ports.engine import FlowDefinition
from dex_agents.ports.errors import (
    EngineError,
    FlowNotActiveError,
    SessionWaitTimeoutError,
    StreamReadTimeoutError,
)
from dex_agents.ports.flow_client import FlowClient

DEFAULT_WAIT_FOR_USER_TIMEOUT = timedelta(minutes=5)
"""How long ``wait_for_user`` waits when no ``timeout`` is given."""

FIRST_SNAPSHOT_RECHECK = timedelta(milliseconds=50)
"""How long the Stream must stay quiet before a wait first reads the snapshot again."""

SNAPSHOT_RECHECK_INTERVAL = timedelta(seconds=2)
"""The longest a wait goes without reading the snapshot, whatever the Stream does."""

_NO_WAIT = timedelta(milliseconds=1)
# Events of a turn in progress: none of them makes a session need a person, which takes a
# turn's end, an interrupt or a plan. Reading the snapshot after each of them would cost a
# read per tool call and per text piece; the rechecks still cover a missed event.
_IN_TURN_EVENTS = frozenset(
    {
        AgentEventType.TURN_STARTED,
        AgentEventType.TURN_STEERED,
        AgentEventType.TEXT_DELTA,
        AgentEventType.REASONING_DELTA,
        AgentEventType.TOOL_CALL_STARTED,
        AgentEventType.TOOL_CALL_FINISHED,
        AgentEventType.TOOL_CALL_DEFERRED,
        AgentEventType.TIMER_STARTED,
        AgentEventType.TOOL_TASK_STARTED,
        AgentEventType.USAGE_RECORDED,
        AgentEventType.COMPACTION_STARTED,
        AgentEventType.COMPACTION_FINISHED,
        AgentEventType.MCP_TOOL_PROGRESS,
        AgentEventType.MCP_TASK_STATUS,
    }
)


async def _newest(
    client: FlowClient, flow: FlowDefinition, session_id: str
) -> tuple[str, Any, int | None]:
    """The resume token of the session's newest event, its value (``None`` when it has
    none), and a mark taken before it was read, for ``session_changed_since`` (``None``
    when the client gives none)."""
    marked = getattr(client, "stream_tail_marked", None)
    if marked is not None:  # the embedded engine: one query, or none for its own commits
        found: tuple[str, Any, int] = await marked(flow, session_id)
        return found
    # Otherwise skip the retained events one read at a time (Dex keeps few).
    token, newest = "", None
    while True:
        try:
            message = await client.read_stream(flow, session_id, token, poll_timeout=_NO_WAIT)
        except StreamReadTimeoutError:
            return token, newest, None
        token, newest = message.resume_token, message.value


async def wait_for_person(
    client: FlowClient,
    flow: FlowDefinition,
    session_id: str,
    read_snapshot: Callable[[], Awaitable[AgentSnapshot]],
    timeout: timedelta,  # noqa: ASYNC109 (raises SessionWaitTimeoutError, not CancelledError)
    closed_status: Callable[[], Awaitable[str | None]] | None = None,
) -> AgentSnapshot:
    """Return the first snapshot in which the session needs a person (``session_attention``).

    Raises ``SessionWaitTimeoutError`` when ``timeout`` passes first.
    ``closed_status`` says how a Flow that no longer runs ended (the words after
    ``session '<id>' is``: its status, and why), else ``None``; when a read finds
    the session busy with no new event behind it, or fails, and the Flow is
    closed, the wait raises ``FlowNotActiveError`` saying so.
    """
    if timeout <= timedelta(0):
        raise ValueError(f"timeout must be positive, not {timeout}")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout.total_seconds()
    token, newest, tail_mark = await _newest(client, flow, session_id)
    # After an event of a turn in progress the snapshot would say the session is busy (a
    # client that just sent a message): the first read waits for the next relevant event.
    read_now = getattr(newest, "type", None) not in _IN_TURN_EVENTS
    recheck = FIRST_SNAPSHOT_RECHECK
    # Taken before each read: a commit after it makes a quiet Stream's recheck read again.
    take_mark = getattr(client, "session_change_mark", None)
    changed_since = getattr(client, "session_changed_since", None)
    # A first read put off stands on the newest event alone, taken with its own mark: a
    # turn slower than the first quiet window (any real model's) then reads no snapshot
    # that would say busy. It is due SNAPSHOT_RECHECK_INTERVAL after the start at the
    # latest, whatever the looks say (None: no read is put off).
    mark: int | None = None if read_now else tail_mark
    read_due = None if read_now else loop.time() + SNAPSHOT_RECHECK_INTERVAL.total_seconds()
    relevant = False
    while True:
        if read_now:
            if take_mark is not None:
                mark = await take_mark()
            try:
                snapshot = await read_snapshot()
            except EngineError:
                ended = None if closed_status is None else await closed_status()
                if ended is None:
                    raise
                # A session whose state cannot be read failed because of it: why it
                # ended says which value, and that the wait is over.
                raise FlowNotActiveError(f"session {session_id!r} is {ended}") from None
            read_due = None
            if session_attention(snapshot) is not None:
                return snapshot
            # A failed or stopped session stays busy or unstarted for good: the wait
            # ran to its timeout (5 minutes by default) and then said only that.
            if not relevant and closed_status is not None:
                ended = await closed_status()
                if ended is not None:
                    raise FlowNotActiveError(f"session {session_id!r} is {ended}")
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise SessionWaitTimeoutError(
                f"session {session_id!r} did not need a person within {timeout}"
            )
        quiet = min(remaining, recheck.total_seconds())
        longest = min(remaining, SNAPSHOT_RECHECK_INTERVAL.total_seconds())
        if read_due is not None:
            longest = min(longest, max(read_due - loop.time(), 0.0))
        recheck = min(recheck * 2, SNAPSHOT_RECHECK_INTERVAL)
        token, relevant = await _next_relevant_event(
            client, flow, session_id, token, quiet, longest
        )
        read_now = (
            relevant
            or mark is None
            or changed_since is None
            or (read_due is not None and loop.time() >= read_due)
            or await changed_since(session_id, mark)
        )


async def _next_relevant_event(
    client: FlowClient,
    flow: FlowDefinition,
    session_id: str,
    token: str,
    quiet: float,
    longest: float,
) -> tuple[str, bool]:
    """The token after the next event that may change the answer (and ``True``), or once the
    Stream was quiet for ``quiet`` seconds, or after ``longest`` seconds (and ``False``)."""
    loop = asyncio.get_running_loop()
    last_look = loop.time() + longest
    until = min(loop.time() + quiet, last_look)
    while True:
        left = until - loop.time()
        if left <= 0:
            return token, False
        try:
            message = await client.read_stream(
                flow, session_id, token, poll_timeout=timedelta(seconds=left)
            )
        except StreamReadTimeoutError:
            return token, False
        token = message.resume_token
        if getattr(message.value, "type", None) not in _IN_TURN_EVENTS:
            return token, True
        # A turn in progress: the Stream is not quiet, and the snapshot would say it is busy.
        until = min(loop.time() + quiet, last_look)
