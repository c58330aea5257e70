"""``wait_for_person`` reads the snapshot when the Stream says something may have changed,
and again once the Stream has been quiet, never going longer than
``SNAPSHOT_RECHECK_INTERVAL`` without one.

The client here is a fake ``FlowClient`` whose Stream plays a script of events
at set times; the snapshot is whatever the test says the session is now. The
windows are set far apart (milliseconds of events against seconds of quiet), so
a slow machine cannot turn one case into another.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from dex_agents.app import session_waits
from dex_agents.app.session_waits import wait_for_person
from dex_agents.domain.events import AgentEventType
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.state import AgentState, AgentStatus
from dex_agents.ports.engine import FlowDefinition
from dex_agents.ports.errors import StreamReadTimeoutError
from dex_agents.ports.flow_client import FlowClient

BUSY = AgentSnapshot(state=AgentState(status=AgentStatus.RUNNING_MODEL, active_turn_id="t1"))
IDLE = AgentSnapshot(state=AgentState(status=AgentStatus.WAITING_FOR_USER_MESSAGE, turn_count=1))
WAIT = timedelta(seconds=30)


@dataclass(frozen=True)
class _Event:
    """All the wait looks at of an ``AgentEvent``: its type."""

    type: str


class ScriptedStream:
    """A ``FlowClient``'s Stream side: event ``n`` comes ``gap`` seconds after event ``n - 1``."""

    def __init__(self, kinds: Sequence[AgentEventType], gap: float) -> None:
        self._kinds = list(kinds)
        self._gap = gap
        self._sent = 0
        self._next_at: float | None = None

    async def stream_tail_marked(
        self, flow: Any, session_id: str
    ) -> tuple[str, _Event | None, int]:
        # No events yet; the mark goes unused, as this client has no session_changed_since.
        return "", None, 0

    async def read_stream(
        self, flow: Any, session_id: str, resume_token: str = "", poll_timeout: Any = None
    ) -> Any:
        loop = asyncio.get_running_loop()
        if self._next_at is None:
            self._next_at = loop.time() + self._gap
        deadline = loop.time() + poll_timeout.total_seconds()
        if self._sent >= len(self._kinds) or self._next_at > deadline:
            await asyncio.sleep(max(0.0, deadline - loop.time()))
            raise StreamReadTimeoutError("quiet")
        await asyncio.sleep(max(0.0, self._next_at - loop.time()))
        kind = self._kinds[self._sent]
        self._sent += 1
        self._next_at = loop.time() + self._gap
        return _Message(_Event(kind.value), str(self._sent), datetime.now(UTC), "Step")

    @property
    def sent(self) -> int:
        return self._sent


class _Message:
    def __init__(self, value: _Event, token: str, created_at: datetime, source: str) -> None:
        self.value, self.resume_token, self.created_at, self.source = (
            value,
            token,
            created_at,
            source,
        )


class Snapshots:
    """The session's snapshot, counting reads; ``now`` is what the next read returns."""

    def __init__(self) -> None:
        self.now = BUSY
        self.reads = 0

    async def read(self) -> AgentSnapshot:
        self.reads += 1
        return self.now

    def idle_once_sent(
        self, stream: ScriptedStream | RetainedStream, sent: int
    ) -> Callable[[], Awaitable[AgentSnapshot]]:
        """A read that finds the session idle once ``stream`` has sent ``sent`` events."""

        async def read() -> AgentSnapshot:
            if stream.sent == sent:
                self.now = IDLE
            return await self.read()

        return read


async def _wait(
    stream: ScriptedStream, read_snapshot: Callable[[], Awaitable[AgentSnapshot]]
) -> AgentSnapshot:
    # The wait uses the Stream side of a client alone, and passes the flow through untouched.
    client = cast(FlowClient, stream)
    return await wait_for_person(client, cast(FlowDefinition, None), "s1", read_snapshot, WAIT)


def _windows(monkeypatch: pytest.MonkeyPatch, quiet: float, longest: float) -> None:
    monkeypatch.setattr(session_waits, "FIRST_SNAPSHOT_RECHECK", timedelta(seconds=quiet))
    monkeypatch.setattr(session_waits, "SNAPSHOT_RECHECK_INTERVAL", timedelta(seconds=longest))


async def test_events_of_a_turn_in_progress_put_off_the_recheck(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Text pieces 1 ms apart for over a second, against a quiet window of 0.3 s.
    _windows(monkeypatch, quiet=0.3, longest=60.0)
    pieces = [AgentEventType.TEXT_DELTA] * 1000
    stream = ScriptedStream([*pieces, AgentEventType.TURN_COMPLETED], 0.001)
    snapshots = Snapshots()
    assert await _wait(stream, snapshots.idle_once_sent(stream, len(pieces) + 1)) is IDLE
    # The first read, then the one the turn's end asked for: the text pieces asked for none.
    assert snapshots.reads == 2


async def test_a_quiet_stream_gets_a_recheck(monkeypatch: pytest.MonkeyPatch) -> None:
    _windows(monkeypatch, quiet=0.01, longest=60.0)
    stream = ScriptedStream([], 1.0)
    snapshots = Snapshots()

    async def idle_on_the_second_read() -> AgentSnapshot:
        if snapshots.reads == 1:
            snapshots.now = IDLE  # a change that wrote no event
        return await snapshots.read()

    assert await _wait(stream, idle_on_the_second_read) is IDLE
    assert snapshots.reads == 2


async def test_a_stream_that_never_goes_quiet_still_gets_a_recheck(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _windows(monkeypatch, quiet=0.2, longest=0.4)
    stream = ScriptedStream([AgentEventType.TEXT_DELTA] * 100_000, 0.001)
    snapshots = Snapshots()

    async def idle_on_the_second_read() -> AgentSnapshot:
        if snapshots.reads == 1:
            snapshots.now = IDLE
        return await snapshots.read()

    assert await _wait(stream, idle_on_the_second_read) is IDLE
    assert snapshots.reads == 2
    assert stream.sent < 100_000  # the recheck came while the events still came


class StreamWithTail(ScriptedStream):
    """A client whose Stream's newest event, as ``stream_tail_marked`` names it, is ``newest``."""

    def __init__(self, newest: AgentEventType | None, kinds: Sequence[AgentEventType]) -> None:
        super().__init__(kinds, 0.01)
        self._newest = None if newest is None else _Event(newest.value)

    async def stream_tail_marked(
        self, flow: Any, session_id: str
    ) -> tuple[str, _Event | None, int]:
        return ("0" if self._newest else ""), self._newest, 0


async def test_after_an_event_of_a_turn_in_progress_the_first_read_waits_for_the_turns_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _windows(monkeypatch, quiet=30.0, longest=60.0)
    in_turn = [AgentEventType.TOOL_CALL_STARTED, AgentEventType.TOOL_CALL_FINISHED]
    stream = StreamWithTail(AgentEventType.TURN_STARTED, [*in_turn, AgentEventType.TURN_COMPLETED])
    snapshots = Snapshots()
    assert await _wait(stream, snapshots.idle_once_sent(stream, len(in_turn) + 1)) is IDLE
    assert snapshots.reads == 1  # the one the turn's end asked for


@pytest.mark.parametrize("newest", [None, AgentEventType.TURN_COMPLETED])
async def test_after_any_other_newest_event_the_snapshot_is_read_at_once(
    newest: AgentEventType | None,
) -> None:
    stream = StreamWithTail(newest, [])
    snapshots = Snapshots()
    snapshots.now = IDLE
    assert await _wait(stream, snapshots.read) is IDLE
    assert snapshots.reads == 1
    assert stream.sent == 0


async def test_a_session_idle_after_an_event_of_a_turn_in_progress_is_found_by_the_recheck(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The turn's end wrote no event the wait saw: the quiet Stream's recheck still finds it.
    _windows(monkeypatch, quiet=0.01, longest=60.0)
    stream = StreamWithTail(AgentEventType.TEXT_DELTA, [])
    snapshots = Snapshots()
    snapshots.now = IDLE
    assert await _wait(stream, snapshots.read) is IDLE
    assert snapshots.reads == 1


class RetainedStream:
    """A client without ``stream_tail_marked`` (Dex's): the wait reads the retained events up to the
    newest, then the turn's ``later`` events come 10 ms apart."""

    def __init__(self, retained: Sequence[AgentEventType], later: Sequence[AgentEventType]):
        self._events = [*retained, *later]
        self._retained = len(retained)
        self.sent = 0

    async def read_stream(
        self, flow: Any, session_id: str, resume_token: str = "", poll_timeout: Any = None
    ) -> Any:
        n = int(resume_token or 0)
        wait = poll_timeout.total_seconds()
        if n >= len(self._events) or (n >= self._retained and wait < 0.01):
            await asyncio.sleep(wait)
            raise StreamReadTimeoutError("quiet")
        if n >= self._retained:
            await asyncio.sleep(0.01)
        self.sent = max(self.sent, n + 1)
        return _Message(_Event(self._events[n].value), str(n + 1), datetime.now(UTC), "Step")


@pytest.mark.parametrize(
    ("newest", "reads"), [(AgentEventType.TURN_STARTED, 1), (AgentEventType.TURN_COMPLETED, 2)]
)
async def test_without_a_tail_the_newest_retained_event_decides_the_first_read(
    monkeypatch: pytest.MonkeyPatch, newest: AgentEventType, reads: int
) -> None:
    _windows(monkeypatch, quiet=30.0, longest=60.0)
    stream = RetainedStream([AgentEventType.USAGE_RECORDED, newest], [AgentEventType.TURN_FAILED])
    snapshots = Snapshots()
    client = cast(FlowClient, stream)
    read = snapshots.idle_once_sent(stream, 3)
    assert await wait_for_person(client, cast(FlowDefinition, None), "s1", read, WAIT) is IDLE
    # After turn_started only the turn's end asks for a read; after turn_completed the wait
    # reads at once (busy here), and again at the end.
    assert snapshots.reads == reads


class LoggedStream(ScriptedStream):
    """A quiet Stream of a client that can tell whether the session changed since a mark: it
    did not for the first ``unchanged`` looks, and did from then on."""

    def __init__(
        self, unchanged: int, kinds: Sequence[AgentEventType] = (), gap: float = 1.0
    ) -> None:
        super().__init__(kinds, gap)
        self.unchanged = unchanged
        self.marks: list[int] = []
        self.looks: list[int] = []

    async def session_change_mark(self) -> int:
        self.marks.append(len(self.looks))
        return len(self.marks)

    async def session_changed_since(self, session_id: str, mark: int) -> bool:
        assert session_id == "s1"
        assert mark == len(self.marks)  # the mark of the latest read
        self.looks.append(mark)
        return len(self.looks) > self.unchanged


async def test_a_quiet_stream_rereads_the_snapshot_only_once_the_session_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _windows(monkeypatch, quiet=0.01, longest=60.0)
    stream = LoggedStream(unchanged=5)
    snapshots = Snapshots()

    async def idle_once_changed() -> AgentSnapshot:
        # Without the looks, the sixth read would find it idle all the same.
        if len(stream.looks) > stream.unchanged or snapshots.reads == 5:
            snapshots.now = IDLE
        return await snapshots.read()

    assert await _wait(stream, idle_once_changed) is IDLE
    # The first read, then the one after the look that saw the session change; each read
    # took its mark first, and the five quiet windows before that read nothing.
    assert snapshots.reads == 2
    assert stream.marks == [0, 6]
    assert len(stream.looks) == 6


async def test_an_event_that_may_change_the_answer_is_read_without_a_look(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _windows(monkeypatch, quiet=30.0, longest=60.0)
    stream = LoggedStream(unchanged=1000, kinds=[AgentEventType.TURN_COMPLETED])  # in 1 s
    snapshots = Snapshots()
    assert await _wait(stream, snapshots.idle_once_sent(stream, 1)) is IDLE
    assert snapshots.reads == 2
    assert stream.looks == []


class MarkedTail(LoggedStream):
    """A ``LoggedStream`` whose newest event is ``newest``, looked up with a mark of its own
    (the embedded engine's ``stream_tail_marked``)."""

    def __init__(
        self,
        newest: AgentEventType,
        unchanged: int,
        kinds: Sequence[AgentEventType] = (),
        gap: float = 1.0,
    ) -> None:
        super().__init__(unchanged, kinds, gap)
        self._newest = _Event(newest.value)

    async def stream_tail_marked(self, flow: Any, session_id: str) -> tuple[str, _Event, int]:
        return "0", self._newest, await self.session_change_mark()


async def test_a_first_read_put_off_stays_off_while_the_session_is_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A turn slower than the quiet window: the Stream is quiet until the turn's end, 1 s on,
    # and no commit changed the session before it. Without the tail's mark each quiet
    # window's end read a snapshot that said busy.
    _windows(monkeypatch, quiet=0.01, longest=60.0)
    stream = MarkedTail(AgentEventType.TURN_STARTED, 1000, [AgentEventType.TURN_COMPLETED])
    snapshots = Snapshots()
    assert await _wait(stream, snapshots.idle_once_sent(stream, 1)) is IDLE
    assert snapshots.reads == 1  # the one the turn's end asked for
    # The tail's mark, then the read's; between them, quiet windows of 10, 20, 40, 80, 160 ms
    # and more each ended in a look.
    assert len(stream.marks) == 2
    assert len(stream.looks) >= 5


async def test_a_first_read_put_off_reads_once_the_session_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _windows(monkeypatch, quiet=0.01, longest=60.0)
    stream = MarkedTail(AgentEventType.TURN_STARTED, unchanged=2)
    snapshots = Snapshots()

    async def idle_once_changed() -> AgentSnapshot:
        if len(stream.looks) > stream.unchanged:
            snapshots.now = IDLE  # a change that wrote no event
        return await snapshots.read()

    assert await _wait(stream, idle_once_changed) is IDLE
    assert snapshots.reads == 1
    assert len(stream.looks) == 3


async def test_a_first_read_put_off_on_the_newest_event_alone_comes_after_the_longest_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The newest event says a turn is in progress, but the session is idle and no commit
    # changes it: no look would ever ask for a read, and the longest interval still does.
    _windows(monkeypatch, quiet=0.01, longest=0.3)
    stream = MarkedTail(AgentEventType.TEXT_DELTA, unchanged=1_000_000)
    snapshots = Snapshots()
    snapshots.now = IDLE
    loop = asyncio.get_running_loop()
    began = loop.time()
    assert await _wait(stream, snapshots.read) is IDLE
    assert loop.time() - began >= 0.3
    assert snapshots.reads == 1
    assert stream.looks  # it looked first, and the looks said unchanged


async def test_a_first_read_put_off_on_the_newest_event_alone_is_due_at_the_longest_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Quiet windows of 0.6 s then 0.9 s would end at 0.6 and 1.5 s, and the turn's end comes
    # at 1.25 s. The put-off read is due at 0.9 s: it finds the session busy, and the turn's
    # end asks for a second. Were it read only at the first recheck after 0.9 s, the turn's
    # end would come first and one read would do.
    _windows(monkeypatch, quiet=0.6, longest=0.9)
    stream = MarkedTail(
        AgentEventType.TEXT_DELTA, 1_000_000, [AgentEventType.TURN_COMPLETED], gap=1.25
    )
    snapshots = Snapshots()
    assert await _wait(stream, snapshots.idle_once_sent(stream, 1)) is IDLE
    assert snapshots.reads == 2
    assert len(stream.looks) == 1  # at 0.6 s, which said unchanged
