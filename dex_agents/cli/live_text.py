"""Following a session's ``AgentEvents`` Stream in the background, for the chat.

The Stream says when to look at the session again and carries the model's text
while the model still writes it; the snapshot stays the source of truth for
everything else.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Collection
from datetime import timedelta
from typing import Any

from dex_agents.domain.events import (
    AgentEvent,
    InterruptResolvedPayload,
    PlanExecutionStartedPayload,
    TextDeltaPayload,
    ToolCallFinishedPayload,
)
from dex_agents.domain.tool_calls import CancellationReason, ToolCallStatus
from dex_agents.ports.engine import FlowDefinition
from dex_agents.ports.errors import StreamReadTimeoutError
from dex_agents.ports.flow_client import FlowClient, StreamMessage

LiveKey = tuple[str, str, int]
"""One model call's live text: ``(turn_id, step_execution_id, attempt)``, as UIs group it."""

_NO_WAIT = timedelta(milliseconds=1)
_LONG_POLL = timedelta(seconds=5)


class LiveText:
    """Follows the session's Stream and collects model text as it arrives.

    ``take`` hands out the text that arrived since the last call; ``event_count``
    and ``wait_for_event`` let a reader sleep until the next event of any kind.
    """

    def __init__(self, client: FlowClient, flow: FlowDefinition, session_id: str) -> None:
        self._client = client
        self._flow = flow
        self._session = session_id
        self._token = ""
        self._arrived: list[tuple[LiveKey, str]] = []
        self._finished: dict[str, ToolCallStatus] = {}
        # Keyed by turn too: a later turn's call may reuse an interrupt ID.
        self._resolved: dict[tuple[str, str], InterruptResolvedPayload] = {}
        self._plan_executions: dict[str, int] = {}  # turn ID -> the approved plan revision
        self._events = 0
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Skip the events already on the Stream, then follow new ones."""
        while True:
            try:
                message = await self._read(_NO_WAIT)
            except StreamReadTimeoutError:
                break
            self._token = message.resume_token
        self._task = asyncio.create_task(self._follow(), name="dex-agents live text")

    async def _read(self, poll: timedelta) -> StreamMessage[Any]:
        return await self._client.read_stream(
            self._flow, self._session, self._token, poll_timeout=poll
        )

    async def _follow(self) -> None:
        while True:
            try:
                message = await self._read(_LONG_POLL)
            except StreamReadTimeoutError:
                continue
            self._token = message.resume_token
            event = message.value
            if (
                isinstance(event, AgentEvent)
                and isinstance(event.payload, TextDeltaPayload)
                and event.payload.text
            ):
                key = (event.turn_id or "", event.step_execution_id, event.attempt)
                self._arrived.append((key, event.payload.text))
            elif isinstance(event, AgentEvent) and isinstance(
                event.payload, ToolCallFinishedPayload
            ):
                self._finished[event.payload.tool_call_id] = event.payload.status
            elif isinstance(event, AgentEvent) and isinstance(
                event.payload, InterruptResolvedPayload
            ):
                resolved = (event.turn_id or "", event.payload.interrupt_id)
                self._resolved[resolved] = event.payload
            elif isinstance(event, AgentEvent) and isinstance(
                event.payload, PlanExecutionStartedPayload
            ):
                self._plan_executions[event.turn_id or ""] = event.payload.revision
            self._events += 1
            changed, self._changed = self._changed, asyncio.Event()
            changed.set()

    @property
    def event_count(self) -> int:
        """How many events arrived since ``start``."""
        return self._events

    async def wait_for_event(self, seen: int, within: timedelta) -> None:
        """Return once more than ``seen`` events arrived, or after ``within``."""
        if self._events != seen:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within.total_seconds()):
                await self._changed.wait()

    def finished_status(self, tool_call_id: str) -> ToolCallStatus | None:
        """The final status a ``tool_call_finished`` event gave the call, if one arrived.

        A turn's call records leave the snapshot when the turn ends, so a turn that
        ended between two snapshots leaves only the stored result and this status.
        """
        return self._finished.get(tool_call_id)

    async def wait_for_finished(self, tool_call_ids: Collection[str], within: timedelta) -> None:
        """Return once a ``tool_call_finished`` event of each call arrived, or after ``within``.

        The event commits before the result is stored, so a snapshot that shows the
        result only waits for this reader to catch up with the Stream.
        """
        await self._wait_until(
            lambda: all(call_id in self._finished for call_id in tool_call_ids), within
        )

    def finished_ids(self) -> frozenset[str]:
        """The calls whose ``tool_call_finished`` event arrived so far."""
        return frozenset(self._finished)

    def forget_finished(self, tool_call_ids: Collection[str]) -> None:
        """Forget the final status of calls whose stored results were shown already."""
        for tool_call_id in tool_call_ids:
            self._finished.pop(tool_call_id, None)

    def resolved_interrupts(self) -> frozenset[tuple[str, str]]:
        """The ``(turn ID, interrupt ID)`` of each ``interrupt_resolved`` event kept now."""
        return frozenset(self._resolved)

    def forget_resolved(self, keys: Collection[tuple[str, str]]) -> None:
        """Forget how interrupts were resolved, once the chat can no longer ask (``keys``
        as ``resolved_interrupts`` gives them)."""
        for key in keys:
            self._resolved.pop(key, None)

    def plan_execution_turns(self) -> frozenset[str]:
        """The turns whose ``plan_execution_started`` event is kept now."""
        return frozenset(self._plan_executions)

    def forget_plan_executions(self, turn_ids: Collection[str]) -> None:
        """Forget the plan revisions of turns whose first message was shown already."""
        for turn in turn_ids:
            self._plan_executions.pop(turn, None)

    def plan_execution(self, turn_id: str) -> int | None:
        """The plan revision whose approval started ``turn_id`` (its ``plan_execution_started``
        event), if that event arrived."""
        return self._plan_executions.get(turn_id)

    async def wait_for_plan_executions(self, turn_ids: Collection[str], within: timedelta) -> None:
        """Return once a ``plan_execution_started`` event of each turn arrived, or after
        ``within``: the event commits with the turn's first message."""
        await self._wait_until(
            lambda: all(turn in self._plan_executions for turn in turn_ids), within
        )

    async def _wait_until(self, arrived: Callable[[], bool], within: timedelta) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within.total_seconds()
        while not arrived():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            await self.wait_for_event(self._events, timedelta(seconds=remaining))

    async def cancellation_reason(
        self, turn_id: str, interrupt_id: str, within: timedelta
    ) -> CancellationReason | None:
        """Why steering or ``cancel_turn`` removed the interrupt, by its ``interrupt_resolved``
        event; ``None`` when it was answered, or no such event arrived within ``within``.

        A cancelled turn's call records leave the snapshot when the turn ends, so
        once it ended only the Stream still says that the interrupt was cancelled.
        """
        key = (turn_id, interrupt_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within.total_seconds()
        while key not in self._resolved:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            await self.wait_for_event(self._events, timedelta(seconds=remaining))
        return self._resolved[key].cancellation_reason

    def resolution(self, turn_id: str, interrupt_id: str) -> InterruptResolvedPayload | None:
        """How the interrupt was resolved (its ``interrupt_resolved`` event), if that arrived."""
        return self._resolved.get((turn_id, interrupt_id))

    def take(self) -> list[tuple[LiveKey, str]]:
        """The text that arrived since the last call, in arrival order, with its model call."""
        taken, self._arrived = self._arrived, []
        return taken

    async def stop(self) -> None:
        """Stop following the Stream."""
        if self._task is not None:
            self._task.cancel()
            # A Stream that failed only cost the chat its live text; say nothing on the way out.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
