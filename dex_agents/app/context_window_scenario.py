"""``ContextWindowSessionScenario``: the same session run past a small context window.

An adapter's runner implements ``ContextCompactionRunner``; this scenario is how
its own tests show that compaction, retention and the summary hold for it. The
adapter's test builds its session Flow with ``scenario.compaction`` and
``scenario.session_options(...)``, serves it on any engine (``LocalRuntime``,
``AgentTestStack``), and awaits ``scenario.run(sessions)``. The scenario sends
``turns`` user messages of about ``user_message_tokens`` tokens each, one turn
at a time, and checks after every turn and at the end:

- every turn ends without ``last_turn_error``;
- the ``ContextSummary`` starts at sequence 1, has text, and only moves forward:
  a new generation summarizes through a later sequence than the one before;
- retention deletes only summarized messages and keeps at least
  ``retained_message_limit`` of the newest ones;
- the session compacted at least ``min_compactions`` times, and retention
  deleted at least one chunk;
- every message retention kept is still listed, in sequence, ending where
  ``deleted_before_sequence`` says, and each kept user message is the one the
  scenario sent;
- each summary generation wrote its ``compaction_finished`` event.

A failed check raises ``AssertionError`` naming the turn and what broke. The
returned ``ContextWindowSessionResult`` carries the summaries and the kept
messages, so the adapter's test can also check what its own framework received
(for the built-in loop: a model input that starts with the summary note).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta

from dex_agents.app.options import AgentSessionOptions
from dex_agents.app.session_client import PortableSessionClient
from dex_agents.domain.compaction import CompactionPolicy
from dex_agents.domain.context_summary import ContextSummary
from dex_agents.domain.events import CompactionFinishedPayload
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.session_ids import validate_session_id
from dex_agents.ports.errors import StreamReadTimeoutError

# The last event read waits this long for one more before the check ends; every event of
# a finished turn is already stored, so the wait only has to outlast a poll.
_EVENT_POLL_TIMEOUT = timedelta(milliseconds=100)

_FILLER = "Please keep this request in mind for later, together with its number. "


@dataclass(frozen=True)
class ContextWindowSessionResult:
    """What ``ContextWindowSessionScenario.run`` saw.

    ``snapshot`` is the session after the last turn. ``summaries`` holds each
    ``ContextSummary`` generation seen after a turn, oldest first (a generation
    replaced within the same turn is not seen). ``deleted_before_sequence`` is
    where retention's deletions end, and ``messages`` every message it kept,
    oldest first.
    """

    session_id: str
    snapshot: AgentSnapshot
    summaries: tuple[ContextSummary, ...]
    deleted_before_sequence: int
    messages: tuple[AgentMessage, ...]


@dataclass(frozen=True, kw_only=True)
class ContextWindowSessionScenario:
    """The same session run past a small context window, for any adapter's runner.

    ``context_window_tokens`` is the window of ``compaction`` (the default
    trigger and keep ratios). ``turns`` user messages of about
    ``user_message_tokens`` tokens each (three UTF-8 bytes per token, as
    ``estimate_text_tokens`` counts) fill it several times over. The message
    storage fields are small, so retention deletes summarized chunks within the
    run. ``min_compactions`` is how many summary generations the run must reach.
    ``session_id`` names the session ``run`` starts, and ``turn_timeout`` (a
    positive ``timedelta``) bounds each turn. Raises ``ValueError`` for a setting
    the run cannot meet, and the session ID rule's error for a bad ``session_id``.
    """

    context_window_tokens: int = 2_000
    turns: int = 20
    user_message_tokens: int = 200
    message_window_size: int = 8
    message_chunk_size: int = 4
    retained_message_limit: int = 8
    min_compactions: int = 2
    session_id: str = "context-window-session"
    turn_timeout: timedelta = timedelta(seconds=60)

    def __post_init__(self) -> None:
        for name in ("turns", "user_message_tokens", "retained_message_limit", "min_compactions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int of at least 1, not {value!r}")
        self.session_options()  # validates the window and the storage fields, naming the bad one
        # Checked here, not where run() first uses them: a bad turn_timeout failed only
        # after the scenario had opened the session and sent its first turn.
        validate_session_id(self.session_id)
        timeout: object = self.turn_timeout
        if not isinstance(timeout, timedelta) or timeout <= timedelta(0):
            raise ValueError(f"turn_timeout must be a positive timedelta, not {timeout!r}")
        if self.user_message_tokens >= self.context_window_tokens:
            raise ValueError(
                "user_message_tokens must be below context_window_tokens, or no turn fits"
            )

    @property
    def compaction(self) -> CompactionPolicy:
        """The scenario's ``CompactionPolicy``: ``context_window_tokens`` with the default ratios.

        The built-in loop takes it as ``AgentDefinition.compaction``.
        """
        return CompactionPolicy(context_window_tokens=self.context_window_tokens)

    def session_options(self, options: AgentSessionOptions | None = None) -> AgentSessionOptions:
        """``options`` (the defaults when ``None``) with the scenario's compaction and storage.

        Everything else in ``options``, such as tool policies or tracing, is kept.
        """
        return replace(
            options if options is not None else AgentSessionOptions(),
            compaction=self.compaction,
            message_window_size=self.message_window_size,
            message_chunk_size=self.message_chunk_size,
            retained_message_limit=self.retained_message_limit,
        )

    def user_message(self, turn: int) -> str:
        """The text of turn ``turn`` (1-based): distinct per turn, about ``user_message_tokens``."""
        head = f"Request {turn}: "
        size = self.user_message_tokens * 3
        body = (_FILLER * (size // len(_FILLER) + 1))[: max(size - len(head), 0)]
        return head + body

    async def run(self, sessions: PortableSessionClient) -> ContextWindowSessionResult:
        """Run the session turn by turn, check it after each turn and at the end, and return it.

        ``sessions`` is an ``AgentSessionClient`` (any ``PortableSessionClient``) of a Flow built with
        ``session_options`` whose Worker is running. The session ``session_id``
        must not exist yet. Raises ``AssertionError`` on the first broken check.
        """
        session_id = self.session_id
        if not await sessions.open_session(session_id):
            raise AssertionError(f"session {session_id!r} existed before the scenario started")
        summaries: list[ContextSummary] = []
        deleted_before = 1
        snapshot: AgentSnapshot | None = None
        for turn in range(1, self.turns + 1):
            if not await sessions.send_user_message(session_id, self.user_message(turn)):
                raise AssertionError(f"turn {turn}: send_user_message was refused")
            snapshot = await sessions.wait_for_user(session_id, timeout=self.turn_timeout)
            deleted_before = self._check_turn(turn, snapshot, summaries, deleted_before)
        assert snapshot is not None  # turns >= 1
        if len(summaries) == 0 or summaries[-1].generation < self.min_compactions:
            reached = summaries[-1].generation if summaries else 0
            raise AssertionError(
                f"the session compacted {reached} times in {self.turns} turns, not at least"
                f" {self.min_compactions}: does the runner's estimate_input_tokens count the"
                " stored messages, and select_compaction_cutoff return a cut?"
            )
        if deleted_before == 1:
            raise AssertionError(
                f"retention deleted no message in {self.turns} turns although"
                f" {summaries[-1].last_sequence} messages are summarized"
            )
        messages = await self._check_kept_messages(sessions, snapshot, deleted_before)
        await self._check_compaction_events(sessions, summaries[-1].generation)
        return ContextWindowSessionResult(
            session_id=session_id,
            snapshot=snapshot,
            summaries=tuple(summaries),
            deleted_before_sequence=deleted_before,
            messages=messages,
        )

    def _check_turn(
        self,
        turn: int,
        snapshot: AgentSnapshot,
        summaries: list[ContextSummary],
        deleted_before: int,
    ) -> int:
        """Check the session after ``turn``; record a new summary; return the new deletion mark."""
        state = snapshot.state
        if state is None or state.turn_count != turn or state.active_turn_id is not None:
            raise AssertionError(f"turn {turn}: the session is not idle after it: {state}")
        if state.last_turn_error is not None:
            raise AssertionError(f"turn {turn} failed: {state.last_turn_error}")
        summary = snapshot.context_summary
        previous = summaries[-1] if summaries else None
        if summary is None:
            if previous is not None:
                raise AssertionError(f"turn {turn}: the context summary disappeared")
        elif previous is None or summary != previous:
            if summary.first_sequence != 1 or not summary.text.strip():
                raise AssertionError(f"turn {turn}: a summary must start at 1 with text: {summary}")
            if summary.last_sequence >= state.last_sequence:
                raise AssertionError(
                    f"turn {turn}: the summary reaches sequence {summary.last_sequence}, but the"
                    f" session's last message is {state.last_sequence}"
                )
            if previous is not None and not (
                summary.generation > previous.generation
                and summary.last_sequence > previous.last_sequence
            ):
                raise AssertionError(
                    f"turn {turn}: summary generation {summary.generation} through"
                    f" {summary.last_sequence} does not move past generation"
                    f" {previous.generation} through {previous.last_sequence}"
                )
            summaries.append(summary)
        mark = snapshot.deleted_before_sequence or 1
        if mark < deleted_before:
            raise AssertionError(
                f"turn {turn}: deleted_before_sequence went back from {deleted_before} to {mark}"
            )
        if mark > 1:
            summarized = summary.last_sequence if summary is not None else 0
            if mark - 1 > summarized:
                raise AssertionError(
                    f"turn {turn}: retention deleted messages before {mark}, but only"
                    f" {summarized} are summarized"
                )
            kept = state.last_sequence - mark + 1
            if kept < self.retained_message_limit:
                raise AssertionError(
                    f"turn {turn}: retention kept {kept} messages, fewer than"
                    f" retained_message_limit {self.retained_message_limit}"
                )
        return mark

    async def _check_kept_messages(
        self, sessions: PortableSessionClient, snapshot: AgentSnapshot, deleted_before: int
    ) -> tuple[AgentMessage, ...]:
        """Page back from the newest message to the deletion mark; check each kept message."""
        assert snapshot.state is not None
        last = snapshot.state.last_sequence
        messages: list[AgentMessage] = []
        before: int | None = None
        while True:
            page = await sessions.list_agent_messages(
                self.session_id, before_sequence=before, limit=50
            )
            if page.deleted_before_sequence != deleted_before:
                raise AssertionError(
                    f"a message page says deleted_before_sequence"
                    f" {page.deleted_before_sequence}, the snapshot {deleted_before}"
                )
            messages[:0] = page.messages
            if not page.has_more or not page.messages:
                break
            before = page.messages[0].sequence
        sequences = [message.sequence for message in messages]
        if sequences != list(range(deleted_before, last + 1)):
            raise AssertionError(
                f"the kept messages are {sequences}, not {deleted_before} through {last}"
            )
        sent = {self.user_message(turn) for turn in range(1, self.turns + 1)}
        kept_user_texts = [message.text for message in messages if message.role is MessageRole.USER]
        if not kept_user_texts or any(text not in sent for text in kept_user_texts):
            raise AssertionError(f"the kept user messages are not the ones sent: {kept_user_texts}")
        newest = kept_user_texts[-1]
        if newest != self.user_message(self.turns):
            raise AssertionError(f"the newest user message is {newest!r}, not the last one sent")
        return tuple(messages)

    async def _check_compaction_events(
        self, sessions: PortableSessionClient, generation: int
    ) -> None:
        """Every summary generation up to ``generation`` wrote ``compaction_finished``."""
        finished: list[int] = []
        token = ""
        while True:
            try:
                message = await sessions.flow_client.read_stream(
                    sessions.flow, self.session_id, token, poll_timeout=_EVENT_POLL_TIMEOUT
                )
            except StreamReadTimeoutError:
                break
            token = message.resume_token
            payload = message.value.payload
            # A retried CompactContext attempt may write its event again; count generations.
            if (
                isinstance(payload, CompactionFinishedPayload)
                and payload.generation not in finished
            ):
                finished.append(payload.generation)
        if finished != list(range(1, generation + 1)):
            raise AssertionError(
                f"compaction_finished events name generations {finished}, not 1 through"
                f" {generation}"
            )
