"""Printing what changes in a chat's session until the session needs a person.

Lines come in the order things happened: the model's text, then each tool call
it asked for (``agent> calls ...``) followed by that call's status lines
(``tool> ... -> ...``), then the next model text. A user message that another
window sent or steered in shows as ``you (elsewhere)> ...`` before the turn it
starts; the chat's own messages were shown as they were typed, and one that another
window deleted from the queue is said to be (``own_messages``). While a prompt
waits (``while_prompt``), the same lines show above it, and a model's text shows
once it is stored rather than as it grows. While a turn runs (``until_person``) a
prompt may wait below its growing text (``LineInput.reads_during_turns``): a line
sent there ends the model's open line on the screen, and its text goes on below.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import timedelta

from dex_agents.app.session_client import PortableSessionClient
from dex_agents.cli import terminal
from dex_agents.cli.chat_output import ChatOutput
from dex_agents.cli.errors import CliError
from dex_agents.cli.listing import ended_status
from dex_agents.cli.live_text import LiveKey, LiveText
from dex_agents.cli.own_messages import OwnMessages
from dex_agents.domain.attention import SessionAttention, last_turn_cancelled, session_attention
from dex_agents.domain.events import InterruptResolvedPayload
from dex_agents.domain.interrupts import AgentInterrupt
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.plans import executed_plan_revision
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.state import AgentState
from dex_agents.domain.tool_calls import AgentToolCall, CancellationReason, ToolCallStatus
from dex_agents.domain.turns import turn_id
from dex_agents.ports.flow_rows import FlowStatus

# Streams are best effort, so a quiet one still gets a fresh snapshot this often.
_RECHECK = timedelta(seconds=1)
# How long a stored result waits for its call's final status from the Stream.
_CATCH_UP = timedelta(milliseconds=500)

TURN_CANCELLED_TEXT = "turn cancelled elsewhere"
"""What the chat says when another window (the console, an API call) cancelled the turn
it waited on: the chat itself never cancels a turn."""


class Follower:
    """Prints a session's live text, new messages and tool call statuses, each once."""

    def __init__(
        self,
        client: PortableSessionClient,
        session_id: str,
        live: LiveText,
        write: Callable[[str], None] | None = None,
        open_line_ended: Callable[[], bool] | None = None,
    ) -> None:
        """``write`` shows text (``LineInput.write``, above an open prompt); standard
        output by default. ``open_line_ended`` says whether a prompt's line ended the
        line ``write`` left open since it was last asked (``LineInput.open_line_ended``)."""
        self._client = client
        self._session = session_id
        self._live = live
        self._write = write or _write_out
        self._open_line_ended = open_line_ended or (lambda: False)
        # Live text taken with a snapshot that was not shown, for the next one.
        self._held: list[tuple[LiveKey, str]] = []
        self._output = ChatOutput()
        self._last_sequence = 0
        self._statuses: dict[str, ToolCallStatus] = {}
        self._finished: set[str] = set()
        self._failure_shown = -1
        # Turns up to this number ended before the chat followed them: resume_lines said how.
        self._ended_before = 0
        self._ends_shown: set[str] = set()
        self._own = OwnMessages()  # messages this chat sent, not stored yet
        self._last_turn = ""
        self._opening = False  # the messages so far of _last_turn are all user messages

    @property
    def kept_calls(self) -> int:
        """How many tool calls' statuses the follower and its Stream reader keep now."""
        return len(self._statuses) + len(self._finished) + len(self._live.finished_ids())

    @property
    def kept_entries(self) -> int:
        """How many entries about model calls, interrupts, plan approvals and cancelled turns
        the follower, its output and its Stream reader keep now, tool calls' statuses aside."""
        live = self._live
        kept = len(live.resolved_interrupts()) + len(live.plan_execution_turns())
        kept += len(self._ends_shown)
        return kept + self._output.kept_calls + self._output.kept_early_texts

    def mark_seen(self, snapshot: AgentSnapshot) -> None:
        """Treat everything in ``snapshot`` as shown already."""
        self._last_sequence = max((m.sequence for m in snapshot.messages), default=0)
        self._last_turn = snapshot.messages[-1].turn_id if snapshot.messages else ""
        self._opening = False
        self._statuses = {call.tool_call_id: call.status for call in snapshot.tool_calls}
        self._finished = {call.tool_call_id for call in snapshot.tool_calls if call.is_final}
        if snapshot.state is not None and snapshot.state.last_turn_error:
            self._failure_shown = snapshot.state.turn_count
        if snapshot.state is not None:
            active = snapshot.state.active_turn_id is not None
            self._ended_before = snapshot.state.turn_count - (1 if active else 0)

    def sent(self, text: str) -> None:
        """This chat sent ``text``, which the person typed: it is not shown again."""
        self._own.sent(text)

    def _opens_turn(self, message: AgentMessage) -> bool:
        """Whether ``message`` is a user message its turn starts with, not a note the
        session stored as the user's at the end of a failed, steered or cancelled turn."""
        if message.turn_id != self._last_turn:
            self._last_turn = message.turn_id
            self._opening = True
        self._opening = self._opening and message.role == MessageRole.USER
        return self._opening

    def _user_line(self, message: AgentMessage) -> str:
        text = message.text or ""
        revision = self._live.plan_execution(message.turn_id)
        if revision is not None and executed_plan_revision(text) == revision:
            # The session's own words for a plan's approval, not anything a person typed.
            return self._output.line(terminal.plan_approved_line(revision, elsewhere=True))
        if self._own.stored(text):
            return ""
        return self._output.line(f"you (elsewhere)> {terminal.escaped(text, keep_newlines=True)}")

    def cancellation_shown(self, turn: str) -> None:
        """The chat said already that ``turn`` was cancelled (refusing an answer to it)."""
        self._ends_shown.add(turn)

    def say(self, text: str) -> None:
        """Print a line of the chat's own, after any open live line."""
        self._sync()
        self._write(self._output.line(text))

    def _sync(self) -> None:
        """Forget the open live line when a prompt's line ended it on the screen: what
        continues it starts a line of its own, and nothing needs to end it."""
        if self._open_line_ended():
            self._output.close()

    def _close(self) -> None:
        self._sync()
        self._print(self._output.close())

    def _print(self, text: str) -> None:
        if text:
            self._write(text)

    async def cancellation_reason(self, interrupt: AgentInterrupt) -> CancellationReason | None:
        """Why steering or ``cancel_turn`` removed ``interrupt``, as the Stream reported it."""
        return await self._live.cancellation_reason(
            interrupt.turn_id, interrupt.interrupt_id, _CATCH_UP
        )

    def resolution(self, interrupt: AgentInterrupt) -> InterruptResolvedPayload | None:
        """How ``interrupt`` was resolved, if the Stream reported it already."""
        return self._live.resolution(interrupt.turn_id, interrupt.interrupt_id)

    def _status(self, call: AgentToolCall) -> str:
        if self._statuses.get(call.tool_call_id) == call.status:
            return ""
        self._statuses[call.tool_call_id] = call.status
        if call.is_final:
            self._finished.add(call.tool_call_id)
        if call.status is ToolCallStatus.APPROVED and not call.requires_approval:
            return ""  # a call that needs no approval starts approved: nobody decided anything
        return self._output.line(terminal.tool_status_line(call))

    def _message(self, message: AgentMessage, calls: dict[str, AgentToolCall]) -> list[str]:
        output = self._output
        parts: list[str] = []
        if self._opens_turn(message):
            parts.append(self._user_line(message))
        elif message.role == MessageRole.ASSISTANT:
            if message.text:
                parts.append(output.stored(message.turn_id, message.text))
            if message.tool_name:
                parts.append(output.line(terminal.tool_request_line(message)))
                call = calls.get(message.tool_call_id or "")
                if call is not None:
                    parts.append(self._status(call))
        elif message.role == MessageRole.TOOL:
            call = calls.get(message.tool_call_id or "")
            if call is not None:
                parts.append(self._status(call))
            # A result whose final status line was shown already says nothing new.
            if message.tool_call_id not in self._finished:
                status = self._live.finished_status(message.tool_call_id or "")
                parts.append(output.line(terminal.tool_result_line(message, status)))
                self._finished.add(message.tool_call_id or "")
        return parts

    def _plan_execution_turns(self, snapshot: AgentSnapshot) -> list[str]:
        """The turns whose new first message reads as a plan's approval: their
        ``plan_execution_started`` event says whether it is one."""
        return [
            message.turn_id
            for message in snapshot.messages
            if message.sequence > self._last_sequence
            and message.role == MessageRole.USER
            and executed_plan_revision(message.text or "") is not None
        ]

    def _unknown_results(self, snapshot: AgentSnapshot) -> list[str]:
        """The calls whose new stored result would show without a status: their turn ended,
        so their record left the snapshot, and their ``tool_call_finished`` was not read yet."""
        recorded = {call.tool_call_id for call in snapshot.tool_calls}
        return [
            message.tool_call_id
            for message in snapshot.messages
            if message.sequence > self._last_sequence
            and message.role == MessageRole.TOOL
            and message.tool_call_id
            and message.tool_call_id not in recorded
            and message.tool_call_id not in self._finished
        ]

    def show(
        self,
        snapshot: AgentSnapshot,
        live_text: list[tuple[LiveKey, str]],
        *,
        live: bool = True,
        sent_before: int | None = None,
    ) -> None:
        """Print what changed since the last call: ``live_text`` was taken before ``snapshot``
        was read, so every tool call that ended before that text is in ``snapshot``.
        ``sent_before`` is how many messages this chat had sent when ``snapshot`` was read
        (all of them by default): of those, one it no longer lists was deleted elsewhere.

        Without ``live`` (a prompt waits below), a model text shows once it is stored, as
        whole lines: a line still growing cannot stay open above the prompt.
        """
        self._sync()
        for key, fragment in live_text:
            self._output.arrive(key, fragment)
        calls = {call.tool_call_id: call for call in snapshot.tool_calls}
        parts: list[str] = []
        for message in snapshot.messages:
            if message.sequence > self._last_sequence:
                self._last_sequence = message.sequence
                parts.extend(self._message(message, calls))
        parts.extend(self._status(call) for call in snapshot.tool_calls)
        sent = self._own.count if sent_before is None else sent_before
        for text in self._own.deleted(snapshot, sent):
            shown = terminal.escaped(text, keep_newlines=True)
            parts.append(self._output.line(f"your queued message was deleted elsewhere: {shown}"))
        if live:
            parts.append(self._output.flush())
        self._print("".join(parts))

    def _take(self) -> list[tuple[LiveKey, str]]:
        held, self._held = self._held, []
        return held + self._live.take()

    async def until_person(self) -> AgentSnapshot:
        """Print changes until the session needs a person; return that snapshot."""
        while True:
            seen = self._live.event_count
            snapshot = await self._catch_up(live=True)
            attention = session_attention(snapshot)
            if attention is None:
                await self._live.wait_for_event(seen, _RECHECK)
                if self._live.event_count == seen:
                    await self._check_running()
                continue
            self._close()
            self._say_how_it_ended(snapshot, attention)
            return snapshot

    async def _catch_up(
        self, *, live: bool, unless_gone: AgentInterrupt | None = None
    ) -> AgentSnapshot:
        """Read the session and show what changed; with ``unless_gone``, show nothing when
        that interrupt is no longer pending (the prompt that asks it ends first)."""
        live_text = self._take()
        sent_before = self._own.count
        finished_before = self._live.finished_ids()
        resolved_before = self._live.resolved_interrupts()
        planned_before = self._live.plan_execution_turns()
        snapshot = await self._client.get_agent_snapshot(self._session)
        if unless_gone is not None and not _pending(snapshot, unless_gone):
            self._held = live_text
            return snapshot
        await self._live.wait_for_finished(self._unknown_results(snapshot), _CATCH_UP)
        await self._live.wait_for_plan_executions(self._plan_execution_turns(snapshot), _CATCH_UP)
        self.show(snapshot, live_text, live=live, sent_before=sent_before)
        # A chat may follow a session for days. A call the snapshot no longer lists belongs
        # to a turn that ended before the read, so its stored result was shown by now: its
        # status, whether it was shown, and the Stream's status (read before the snapshot)
        # are needed no more. mark_seen keeps the listed calls alone likewise.
        listed = {call.tool_call_id for call in snapshot.tool_calls}
        self._statuses = {key: value for key, value in self._statuses.items() if key in listed}
        self._finished &= listed
        self._live.forget_finished(finished_before - listed)
        # An approval's event commits with the first message of its turn, so that message,
        # in this snapshot, was shown now or before: the revision is needed no more.
        self._live.forget_plan_executions(planned_before)
        if unless_gone is None:
            # No prompt of an interrupt is open, and the next one asks an interrupt that a
            # snapshot read after this one lists as pending: one resolved before this read
            # is never asked, and the chat asks how an interrupt was resolved only after
            # its own prompt of it ended (``_Chat._say_gone``).
            self._live.forget_resolved(resolved_before)
        return snapshot

    def _say_how_it_ended(self, snapshot: AgentSnapshot, attention: SessionAttention) -> None:
        state = snapshot.state
        failed = attention is SessionAttention.TURN_FAILED and state is not None
        if failed and state is not None and state.turn_count != self._failure_shown:
            self._failure_shown = state.turn_count
            error = terminal.escaped(state.last_turn_error or "", keep_newlines=True)
            self.say(f"turn failed: {error}")
        elif attention is SessionAttention.IDLE and state is not None:
            self._say_if_cancelled(state)

    async def while_prompt(self, interrupt: AgentInterrupt | None) -> AgentSnapshot:
        """Print what changes while a prompt waits, until the prompt no longer fits; return
        that snapshot. The message prompt (``interrupt`` ``None``) fits until the session
        asks for a decision; an approval's or a question's prompt until ``interrupt`` is no
        longer pending, and then nothing of that snapshot is shown yet. Raises ``CliError``
        when the session no longer runs."""
        while True:
            seen = self._live.event_count
            snapshot = await self._catch_up(live=False, unless_gone=interrupt)
            if interrupt is not None and not _pending(snapshot, interrupt):
                return snapshot
            if interrupt is None and snapshot.pending_interrupts:
                return snapshot
            attention = session_attention(snapshot)
            if attention is not None:
                self._say_how_it_ended(snapshot, attention)
            await self._live.wait_for_event(seen, _RECHECK)
            if self._live.event_count == seen:
                await self._check_running()

    async def _check_running(self) -> None:
        """Raise ``CliError`` when the session no longer runs: a session another window
        stopped (or one that failed) writes no more events and never needs a person, so
        the chat would wait on its turn for ever."""
        info = await self._client.flow_client.describe_flow(self._session)
        if info.status != FlowStatus.RUNNING:
            self._close()
            # A failed one says why, as the chat's refusal of a failed session does.
            raise CliError(f"session '{terminal.escaped(self._session)}' is {ended_status(info)}")

    def _say_if_cancelled(self, state: AgentState) -> None:
        """Say so, once, when the session's newest turn, which ended while the chat followed
        it, was cancelled (``AgentState.cancelled_turn_id``)."""
        if state.turn_count == 0:  # no turn yet, so none cancelled
            return
        turn = turn_id(state.turn_count)
        # Only the newest turn's end is said, and the turn count never goes back: the ends
        # shown of earlier turns matter no more (one was kept per cancelled turn).
        self._ends_shown &= {turn}
        if state.turn_count <= self._ended_before or not last_turn_cancelled(state):
            return
        if turn in self._ends_shown:
            return
        self._ends_shown.add(turn)
        self.say(TURN_CANCELLED_TEXT)


def _pending(snapshot: AgentSnapshot, interrupt: AgentInterrupt) -> bool:
    return any(i.interrupt_id == interrupt.interrupt_id for i in snapshot.pending_interrupts)


def _write_out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()
