"""Stream readers of one process beside another process that appends: they wake for their
own session's events only, never miss one, and read no more than they must."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.adapters.local.stream_pages import LocalStreamPageReader
from dex_agents.adapters.local.sync_client import SyncLocalFlowClient
from dex_agents.ports.errors import StreamReadTimeoutError
from dex_agents.ports.flow_client import StreamMessage
from tests.adapters.test_engine import Stack, running_stack
from tests.adapters.traced_sql import traced_statements


@dataclass
class Beside:
    """A running stack on a file, and a second connection to it: another process's."""

    stack: Stack
    store: SqliteFlowStore
    other: SqliteFlowStore

    def append(self, session: str, text: str) -> None:
        """Append a Stream event of ``session`` through the other connection."""
        flow_type = self.stack.flow.flow_type
        self.other.run(
            lambda tx: tx.append_event(flow_type, session, f'"{text}"', "other", datetime.now(UTC))
        )

    async def start(self, *sessions: str) -> None:
        for session in sessions:
            await self.stack.client.start_flow(self.stack.flow, session, "x")

    def reader(self, session: str, token: str) -> asyncio.Task[StreamMessage[Any]]:
        """A long poll of ``session``'s Stream after ``token``, as a task."""
        return asyncio.create_task(
            self.stack.client.read_stream(
                self.stack.flow, session, token, poll_timeout=timedelta(seconds=10)
            )
        )


def stream_reads(statements: list[str]) -> int:
    """How many of ``statements`` read single Stream events."""
    return sum("FROM stream_events" in sql for sql in statements)


@contextlib.asynccontextmanager
async def beside(tmp_path: Path, *, worker: bool = False) -> AsyncIterator[Beside]:
    store = SqliteFlowStore(tmp_path / "engine.sqlite3")
    other = SqliteFlowStore(tmp_path / "engine.sqlite3")
    try:
        async with running_stack(store, worker=worker) as stack:
            yield Beside(stack, store, other)
    finally:
        other.close()


async def test_a_long_poll_wakes_for_an_event_another_connection_appended(
    tmp_path: Path,
) -> None:
    # What the client's store keeps of the session (its newest event among it) must not hide
    # an event another process appends: it wakes the long poll, and the tail includes it.
    async with beside(tmp_path, worker=True) as two:
        client, flow = two.stack.client, two.stack.flow
        await two.start("s1")
        first = await client.read_stream(flow, "s1", "", poll_timeout=timedelta(seconds=5))
        await client.stream_tail_token(flow, "s1")
        reader = two.reader("s1", first.resume_token)
        await asyncio.sleep(0.05)
        two.append("s1", "from another")
        message = await reader
        assert message.value == "from another"
        assert await client.stream_tail_token(flow, "s1") == message.resume_token


async def test_a_waiting_reader_reads_again_only_when_its_own_stream_grew(
    tmp_path: Path,
) -> None:
    async with beside(tmp_path) as two:
        client, flow = two.stack.client, two.stack.flow
        await two.start("s1", "s2")
        two.append("s1", "first")
        first = await client.read_stream(flow, "s1", "", poll_timeout=timedelta(seconds=5))
        with traced_statements(two.store) as statements:
            reader = two.reader("s1", first.resume_token)
            await asyncio.sleep(0.05)
            reads_before = stream_reads(statements)
            for n in range(5):
                two.append("s2", f"other session {n}")
                await asyncio.sleep(0.05)  # more than the poll interval: each is seen
            assert stream_reads(statements) == reads_before
            two.append("s1", "second")
            message = await reader
        assert message.value == "second"


async def test_a_reader_at_the_newest_event_waits_without_reading_again(tmp_path: Path) -> None:
    async with beside(tmp_path) as two:
        client, flow = two.stack.client, two.stack.flow
        await two.start("s1")
        two.append("s1", "first")
        first = await client.read_stream(flow, "s1", "")
        tail = await client.stream_tail_token(flow, "s1")
        assert tail == first.resume_token
        # Both reads found "first" the newest, and the Stream has not grown since.
        for token in (first.resume_token, tail):
            with traced_statements(two.store) as statements, pytest.raises(StreamReadTimeoutError):
                await client.read_stream(flow, "s1", token, poll_timeout=timedelta(milliseconds=60))
            assert stream_reads(statements) == 0, statements
            await client.stream_tail_token(flow, "s1")  # found the newest again
        two.append("s1", "second")
        with traced_statements(two.store) as statements:
            second = await client.read_stream(flow, "s1", tail, poll_timeout=timedelta(seconds=5))
        assert second.value == "second"
        assert stream_reads(statements) == 1


async def test_many_waiting_readers_wake_only_for_their_own_session(tmp_path: Path) -> None:
    sessions = [f"s{n}" for n in range(20)]
    async with beside(tmp_path) as two:
        await two.start(*sessions)
        tails = [await two.stack.client.stream_tail_token(two.stack.flow, s) for s in sessions]
        with traced_statements(two.store) as statements:
            readers = [two.reader(s, tail) for s, tail in zip(sessions, tails, strict=True)]
            await asyncio.sleep(0.05)
            for n in range(3):
                two.append("s7", f"event {n}")
                await asyncio.sleep(0.05)  # more than the poll interval: each is seen
            message = await readers[7]
            assert message.value == "event 0"
            assert not any(reader.done() for reader in readers if reader is not readers[7])
        # The one reader read its Stream once; no other reader read at all.
        assert stream_reads(statements) == 1
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)


def _append_here(two: Beside, session: str, text: str) -> None:
    """Append a Stream event of ``session`` through the stack's own store, as its worker does."""
    flow_type = two.stack.flow.flow_type
    two.store.run(
        lambda tx: tx.append_event(flow_type, session, f'"{text}"', "here", datetime.now(UTC))
    )


async def _read_first_of_mine(two: Beside) -> StreamMessage[Any]:
    """Start session "s1", append "first" through the stack's own store, and read it."""
    await two.start("s1")
    _append_here(two, "s1", "first")
    return await two.stack.client.read_stream(two.stack.flow, "s1", "")


async def test_a_reader_at_the_event_its_own_process_committed_last_waits_without_a_read(
    tmp_path: Path,
) -> None:
    async with beside(tmp_path) as two:
        client, flow = two.stack.client, two.stack.flow
        first = await _read_first_of_mine(two)
        _append_here(two, "s1", "second")
        with traced_statements(two.store) as statements:
            second = await client.read_stream(flow, "s1", first.resume_token)
            assert second.value == "second"  # the store committed it right after "first"
            # It committed "second" as the newest, and the log names no later commit.
            with pytest.raises(StreamReadTimeoutError):
                await client.read_stream(
                    flow, "s1", second.resume_token, poll_timeout=timedelta(milliseconds=60)
                )
        assert stream_reads(statements) == 0, statements
        _append_here(two, "s1", "third")
        third = await client.read_stream(flow, "s1", second.resume_token)
        assert third.value == "third"
        # Nor does the tail need a read: no transaction at all.
        with traced_statements(two.store) as statements:
            assert await client.stream_tail_token(flow, "s1") == third.resume_token
        assert statements == []
        two.append("s1", "from another")
        with traced_statements(two.store) as statements:
            tail = await client.stream_tail_token(flow, "s1")
        assert stream_reads(statements) == 1
        assert (await client.read_stream(flow, "s1", third.resume_token)).resume_token == tail


async def test_an_event_another_process_appended_after_this_one_s_newest_is_read(
    tmp_path: Path,
) -> None:
    # What this process committed last is no longer the run's newest: the log names the
    # other's commit, so the reader reads instead of waiting for a change that came already.
    async with beside(tmp_path) as two:
        client, flow = two.stack.client, two.stack.flow
        first = await _read_first_of_mine(two)
        _append_here(two, "s1", "mine")
        mine = await client.read_stream(flow, "s1", first.resume_token)
        two.append("s1", "from another")
        with traced_statements(two.store) as statements:
            message = await client.read_stream(
                flow, "s1", mine.resume_token, poll_timeout=timedelta(seconds=2)
            )
        assert message.value == "from another"
        assert stream_reads(statements) == 1
        # Appended after the other's, this process's event is the newest again.
        _append_here(two, "s1", "mine again")
        again = await client.read_stream(flow, "s1", message.resume_token)
        assert again.value == "mine again"
        with traced_statements(two.store) as statements, pytest.raises(StreamReadTimeoutError):
            await client.read_stream(
                flow, "s1", again.resume_token, poll_timeout=timedelta(milliseconds=60)
            )
        assert stream_reads(statements) == 0, statements


async def test_the_stream_tail_names_the_newest_event_and_reads_none_of_its_own(
    tmp_path: Path,
) -> None:
    async with beside(tmp_path) as two:
        client, flow = two.stack.client, two.stack.flow
        await two.start("s1")
        assert (await client.stream_tail_marked(flow, "s1"))[:2] == ("", None)
        two.append("s1", "from another")  # another process's commit: read
        token, value, _ = await client.stream_tail_marked(flow, "s1")
        assert value == "from another"
        assert token == await client.stream_tail_token(flow, "s1")
        flow_type = flow.flow_type
        two.store.run(  # this process's own commit: known without a read
            lambda tx: tx.append_event(flow_type, "s1", '"own"', "test", datetime.now(UTC))
        )
        with traced_statements(two.store) as statements:
            token, value, _ = await client.stream_tail_marked(flow, "s1")
        assert value == "own"
        assert stream_reads(statements) == 0, statements
        message = await client.read_stream(flow, "s1", "", poll_timeout=timedelta(seconds=5))
        while message.value != "own":
            message = await client.read_stream(flow, "s1", message.resume_token)
        assert token == message.resume_token


async def test_the_marked_stream_tail_gives_a_mark_of_before_the_tail_was_read(
    tmp_path: Path,
) -> None:
    # A wait for a person that puts off its first read asks, with this mark, whether the
    # session changed since the newest event was looked up.
    async with beside(tmp_path) as two:
        client, flow = two.stack.client, two.stack.flow
        await two.start("s1", "s2")
        two.append("s1", "from another")
        token, value, mark = await client.stream_tail_marked(flow, "s1")
        assert token == await client.stream_tail_token(flow, "s1")
        assert value == "from another"
        assert not await client.session_changed_since("s1", mark)
        two.other.run(lambda tx: tx.put_value("s2", "Guarded", "", '"by another"'))
        assert not await client.session_changed_since("s1", mark)
        two.other.run(lambda tx: tx.put_value("s1", "Guarded", "", '"by another"'))
        assert await client.session_changed_since("s1", mark)


async def test_a_session_changed_since_a_mark_only_when_a_commit_changed_it(
    tmp_path: Path,
) -> None:
    # What a wait for a person asks before it rereads a snapshot on a quiet Stream.
    async with beside(tmp_path) as two:
        client = two.stack.client
        await two.start("s1", "s2")
        mark = await client.session_change_mark()
        assert not await client.session_changed_since("s1", mark)
        # Another process's commits: a value of s2 (no event), then an event of s1.
        two.other.run(lambda tx: tx.put_value("s2", "Guarded", "", '"by another"'))
        assert [await client.session_changed_since(s, mark) for s in ("s1", "s2")] == [False, True]
        later = await client.session_change_mark()
        two.append("s1", "from another")
        assert [await client.session_changed_since(s, later) for s in ("s1", "s2")] == [True, False]
        # A commit of this process counts too: an RPC that writes s2's state.
        latest = await client.session_change_mark()
        assert await client.invoke_rpc(two.stack.flow, "s2", "guarded_write", "mine") is True
        assert [await client.session_changed_since(s, latest) for s in ("s1", "s2")] == [
            False,
            True,
        ]


async def test_an_event_that_no_longer_decodes_is_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # This Stream's values are strings: 42 is what another program (or version) left that no
    # longer decodes. Raising at it stopped every reader there for good: each read again
    # from the last good token met it again.
    async with beside(tmp_path, worker=True) as two:
        client, flow = two.stack.client, two.stack.flow
        await two.start("s1")
        first = await client.read_stream(flow, "s1", "", poll_timeout=timedelta(seconds=5))
        waiting = two.reader("s1", first.resume_token)
        bad = two.other.run(
            lambda tx: tx.append_event(flow.flow_type, "s1", "42", "other", datetime.now(UTC))
        )
        _, newest, _ = await client.stream_tail_marked(flow, "s1")
        assert newest is None  # the newest event, unread: the session's state is read instead
        two.append("s1", "after")
        with caplog.at_level(logging.WARNING, logger="dex_agents.engine"):
            assert (await waiting).value == "after"
            again = await client.read_stream(flow, "s1", first.resume_token)
            page = await LocalStreamPageReader(two.stack.engine).list_stream_messages(
                flow, "s1", 10
            )
            sync_client = SyncLocalFlowClient(two.stack.engine)
            in_thread = await asyncio.to_thread(
                sync_client.read_stream, flow, "s1", first.resume_token
            )
        assert again.value == in_thread.value == "after"
        assert [message.value for message in page.messages] == ["after", "started x"]
        warnings = [record.getMessage() for record in caplog.records]
        assert warnings
        assert all(f"Stream event {bad} of session 's1'" in warning for warning in warnings)
