"""A heartbeat's commit waits for the disk unless the Step says it need not, and never
when it carries a checkpoint (``LocalStepContext.heartbeat``); one that need not leaves
the pending live events to the flush interval. A flush the store fails keeps its events
for the result's commit."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import pytest

from dex_agents.adapters.local.registry import register_flows
from dex_agents.adapters.local.staged_state import (
    StagedState,
)
from dex_agents.adapters.local.state_sources import (
    Snapshot,
    SnapshotSource,
)
from dex_agents.adapters.local.step_context import LocalStepContext
from dex_agents.adapters.local.store_errors import StoreBusyError
from tests.adapters.engine_flows import EVENTS, EngineTestFlow
from tests.adapters.flow_store_rows import execution


@pytest.mark.parametrize(
    ("checkpoint", "durable", "synced"),
    [(None, True, True), (None, False, False), ("cp", False, True), ("cp", True, True)],
)
async def test_a_heartbeat_is_synced_unless_it_may_be_lost(
    checkpoint: str | None, durable: bool, synced: bool
) -> None:
    beats: list[tuple[str | None, bool]] = []

    async def beat(checkpoint: str | None, events: list[str], durable: bool) -> bool:
        beats.append((checkpoint, durable))
        return True

    async def flush(events: list[str]) -> bool:
        return True

    context = _context(beat, flush)
    await context.heartbeat(checkpoint, durable=durable)
    assert beats == [(checkpoint, synced)]
    assert context.started


class _Commits:
    """The events each heartbeat and each flush committed, in order."""

    def __init__(self) -> None:
        self.commits: list[tuple[str, list[str]]] = []
        self.flushed = asyncio.Event()

    async def beat(self, checkpoint: str | None, events: list[str], durable: bool) -> bool:
        self.commits.append(("beat", events))
        return True

    async def flush(self, events: list[str]) -> bool:
        self.commits.append(("flush", events))
        self.flushed.set()
        return True


def _context(
    beat: Callable[[str | None, list[str], bool], Awaitable[bool]],
    flush: Callable[[list[str]], Awaitable[bool]],
    flush_interval: timedelta | None = timedelta(milliseconds=20),
) -> LocalStepContext:
    flow = register_flows([EngineTestFlow()])["EngineTest"]
    row = execution()
    state = StagedState(row.flow_id, SnapshotSource(Snapshot()), ())
    return LocalStepContext(
        flow,
        row,
        state,
        datetime(2026, 12, 1, tzinfo=UTC),
        beat=beat,
        flush=flush,
        flush_interval=flush_interval,
    )


async def test_a_synced_heartbeat_commits_the_pending_events_with_it() -> None:
    commits = _Commits()
    context = _context(commits.beat, commits.flush)
    context.write_event(EVENTS, "started")
    await context.heartbeat(durable=True)
    assert commits.commits == [("beat", ['"started"'])]
    assert context.close() == []


async def test_a_mark_that_may_be_lost_leaves_the_events_to_the_flush_interval() -> None:
    commits = _Commits()
    context = _context(commits.beat, commits.flush)
    context.write_event(EVENTS, "started")
    await context.heartbeat(durable=False)
    assert commits.commits == [("beat", [])]
    await asyncio.wait_for(commits.flushed.wait(), timeout=10)
    assert commits.commits == [("beat", []), ("flush", ['"started"'])]
    assert context.started


async def test_an_attempt_that_ends_within_the_interval_commits_the_events_with_its_result() -> (
    None
):
    commits = _Commits()
    context = _context(commits.beat, commits.flush, flush_interval=timedelta(hours=1))
    context.write_event(EVENTS, "started")
    await context.heartbeat(durable=False)
    assert context.close() == ['"started"']
    await context.wait_closed()
    assert commits.commits == [("beat", [])]


async def test_without_a_flush_interval_every_heartbeat_carries_the_events() -> None:
    commits = _Commits()
    context = _context(commits.beat, commits.flush, flush_interval=None)
    context.write_event(EVENTS, "started")
    await context.heartbeat(durable=False)
    assert commits.commits == [("beat", ['"started"'])]


async def test_a_flush_the_store_fails_leaves_its_events_to_the_result_s_commit() -> None:
    failed = asyncio.Event()

    async def beat(checkpoint: str | None, events: list[str], durable: bool) -> bool:
        return True

    async def flush(events: list[str]) -> bool:
        failed.set()
        raise StoreBusyError("the write lock was held past the busy timeout")

    context = _context(beat, flush)
    context.write_event(EVENTS, "a text delta")
    await failed.wait()
    # The fault does not reach the attempt's end (before, the attempt's task raised it
    # there and its result was never committed), and the events go with the result.
    assert context.close() == ['"a text delta"']
    await context.wait_closed()


async def test_a_heartbeat_the_store_fails_raises_and_keeps_its_events() -> None:
    async def beat(checkpoint: str | None, events: list[str], durable: bool) -> bool:
        raise StoreBusyError("the write lock was held past the busy timeout")

    async def flush(events: list[str]) -> bool:
        return True

    context = _context(beat, flush)
    context.write_event(EVENTS, "a text delta")
    with pytest.raises(StoreBusyError):
        await context.heartbeat()
    # The session's background heartbeat ignores the failure; the events still reach the
    # Stream with a later flush or the result's commit (before, they were lost).
    assert context.close() == ['"a text delta"']


async def test_the_events_a_failed_flush_keeps_reach_the_stream_before_newer_ones() -> None:
    committed: list[str] = []
    flushing, fail, failed = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def beat(checkpoint: str | None, events: list[str], durable: bool) -> bool:
        committed.extend(events)
        return True

    async def flush(events: list[str]) -> bool:
        flushing.set()
        await fail.wait()
        failed.set()  # the flusher puts the events back as this raises
        raise StoreBusyError("the write lock was held past the busy timeout")

    context = _context(beat, flush)
    context.write_event(EVENTS, "first")
    await flushing.wait()
    context.write_event(EVENTS, "second")
    # The session's background heartbeat, while the flush of "first" is on its way: before,
    # it committed "second" at once, and "first", put back when the flush failed, followed.
    heartbeat = asyncio.create_task(context.heartbeat())
    await asyncio.sleep(0)
    fail.set()
    await heartbeat
    await failed.wait()
    committed.extend(context.close())
    assert committed == ['"first"', '"second"']


async def test_the_events_a_failed_heartbeat_keeps_reach_the_stream_before_newer_ones() -> None:
    committed: list[str] = []
    beating, fail = asyncio.Event(), asyncio.Event()

    async def beat(checkpoint: str | None, events: list[str], durable: bool) -> bool:
        beating.set()
        await fail.wait()
        raise StoreBusyError("the write lock was held past the busy timeout")

    async def flush(events: list[str]) -> bool:
        committed.extend(events)
        return True

    context = _context(beat, flush, flush_interval=timedelta(hours=1))
    context.write_event(EVENTS, "first")
    heartbeat = asyncio.create_task(context.heartbeat())
    await beating.wait()
    context.write_event(EVENTS, "second")
    # A flush of "second" while the heartbeat carrying "first" is on its way: before, it
    # committed "second" at once, and "first", put back when the heartbeat failed, followed.
    flushing = asyncio.create_task(context._flush_now())
    await asyncio.sleep(0)
    fail.set()
    with pytest.raises(StoreBusyError):
        await heartbeat
    await flushing
    committed.extend(context.close())
    assert committed == ['"first"', '"second"']


async def test_events_written_while_a_flush_is_on_its_way_are_flushed_after_it() -> None:
    flushes: list[list[str]] = []
    flushing, release, again = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def beat(checkpoint: str | None, events: list[str], durable: bool) -> bool:
        return True

    async def flush(events: list[str]) -> bool:
        flushes.append(events)
        if len(flushes) == 1:
            flushing.set()
            await release.wait()
        else:
            again.set()
        return True

    context = _context(beat, flush)
    context.write_event(EVENTS, "first")
    await flushing.wait()
    # A tool's progress event while the flush of the one before is on its way: before, no
    # flusher was due for it, and it waited for the next event or the attempt's end.
    context.write_event(EVENTS, "second")
    release.set()
    await asyncio.wait_for(again.wait(), timeout=10)
    assert flushes == [['"first"'], ['"second"']]
    assert context.close() == []


async def test_a_heartbeat_cancelled_mid_commit_that_then_fails_keeps_its_events() -> None:
    beating = asyncio.Event()
    # A queued commit lands or fails whether or not its caller still waits for it.
    outcome: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

    async def beat(checkpoint: str | None, events: list[str], durable: bool) -> bool:
        beating.set()
        return await asyncio.shield(outcome)

    async def flush(events: list[str]) -> bool:
        return True

    context = _context(beat, flush, flush_interval=timedelta(hours=1))
    context.write_event(EVENTS, "first")
    # The session's background heartbeat, cancelled as the attempt's model call ends.
    heartbeat = asyncio.create_task(context.heartbeat())
    await beating.wait()
    heartbeat.cancel()
    pending = context.close()
    outcome.set_exception(StoreBusyError("the write lock was held past the busy timeout"))
    given_back = await context.wait_closed()
    # Before, "first" went with neither the failed commit nor the result's.
    assert [*given_back, *pending] == ['"first"']
    with pytest.raises(asyncio.CancelledError):
        await heartbeat
