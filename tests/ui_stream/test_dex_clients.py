"""The browser stream helpers over Dex's clients.

No Dex server runs here. A real ``dex.Client`` and ``dex.AsyncClient`` pointed
at no server show that every helper fails as a retryable ``DexEngineError``
(``UNAVAILABLE``). ``FakeSyncDex`` answers the ``dex.Client`` calls
``DexSyncFlowClient`` makes with real Dex values and errors, built as the SDK
builds them, so the Dex mapping of pages, long polls and refused tokens is
checked; how a real server pages and refuses tokens is not verified here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import dex
import grpc  # type: ignore[import-untyped]
import pytest

from dex_agents import AgentSessionFlow
from dex_agents.adapters.dex.errors import DexEngineError
from dex_agents.adapters.dex.flow_client import DexAsyncClientLike, DexFlowClient
from dex_agents.adapters.dex.poll_timeouts import dex_poll_timeout
from dex_agents.adapters.dex.sync_flow_client import DexSyncFlowClient
from dex_agents.domain.events import (
    AgentEvent,
    TextDeltaPayload,
    TurnCompletedPayload,
    TurnStartedPayload,
)
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.state import AgentState, AgentStatus
from dex_agents.domain.wire import to_json
from dex_agents.ui_stream import (
    KEEP_ALIVE_FRAME,
    InvalidAgentEventResumeTokenError,
    agent_event_frame,
    read_agent_event_stream_snapshot,
    read_agent_event_stream_snapshot_sync,
    stream_agent_event_frames,
    stream_agent_event_frames_sync,
)
from tests.ui_stream.agent import make_flow

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
SHORT = timedelta(milliseconds=50)


def dex_error(error_class: type[dex.DexServiceError], code: str, operation: str) -> Exception:
    """A Dex error as ``dex._grpc_errors.translate_rpc_error`` builds it."""
    return error_class(
        grpc.StatusCode[code], dex.ErrorSubStatus["UNCATEGORIZED"], "refused", operation, "s-1"
    )


def event(event_type: str, turn_id: str, payload: Any) -> AgentEvent:
    return AgentEvent(
        type=event_type, payload=payload, turn_id=turn_id, step_execution_id="S-1", attempt=1
    )


EVENTS = [
    event("turn_started", "turn-1", TurnStartedPayload(sequence=1)),
    event("text_delta", "turn-1", TextDeltaPayload(text="one")),
    event("turn_completed", "turn-1", TurnCompletedPayload(message_count=2)),
    event("turn_started", "turn-2", TurnStartedPayload(sequence=3)),
    event("text_delta", "turn-2", TextDeltaPayload(text="two")),
]
RUNNING = AgentSnapshot(
    state=AgentState(status=AgentStatus.RUNNING_MODEL, active_turn_id="turn-2", turn_count=2)
)


class FakeSyncDex:
    """The ``dex.Client`` calls of ``DexSyncFlowClient``: a Stream of ``events`` and one snapshot.

    Each message's token is ``dex-<n>`` (it resumes after the n-th event); a page
    token is ``before-<n>``.
    """

    def __init__(self, flow: AgentSessionFlow, events: list[AgentEvent]) -> None:
        self._flow = flow
        self.waits: list[timedelta | None] = []
        self.messages = [
            dex.StreamMessage(to_json(value), f"dex-{n}", T0, "#S-1")
            for n, value in enumerate(events, 1)
        ]

    def invoke_rpc(
        self,
        rpc_method: Callable[..., Any],
        flow_id: str,
        input: Any = None,
        *,
        run_id: str = "",
        options: dex.RPCInvokeOptions | None = None,
    ) -> Any:
        assert rpc_method == self._flow.get_agent_snapshot
        assert input is None
        return to_json(RUNNING)

    def describe_flow(self, flow_id: str) -> dex.FlowInfo:
        return dex.FlowInfo(flow_id, "run-1", self._flow.flow_type, dex.FlowStatus.RUNNING, T0)

    def read_stream(
        self, flow_id: str, stream: Any, resume_token: str = "", timeout: timedelta | None = None
    ) -> Any:
        assert stream is self._flow.agent_events
        # The SDK's rule: whole seconds within int32, else ValueError.
        assert timeout is not None
        assert timeout.total_seconds().is_integer()
        self.waits.append(timeout)
        if resume_token and not resume_token.startswith("dex-"):
            raise dex_error(dex.DexServiceError, "INVALID_ARGUMENT", "read_stream")
        after = int(resume_token.removeprefix("dex-") or 0)
        if after >= len(self.messages):
            raise dex_error(dex.LongPollTimeoutError, "DEADLINE_EXCEEDED", "read_stream")
        return self.messages[after]

    def list_stream_messages(
        self, flow_id: str, stream: Any, page_size: int, before_page_token: str = ""
    ) -> Any:
        assert stream is self._flow.agent_events
        end = int(before_page_token.removeprefix("before-") or len(self.messages))
        start = max(end - page_size, 0)
        token = f"before-{start}" if start else ""
        return dex.StreamMessagesPage(self.messages[start:end][::-1], token)


@pytest.mark.parametrize(
    ("wait", "expected"),
    [
        (timedelta(milliseconds=1), timedelta(seconds=1)),
        (timedelta(0), timedelta(seconds=1)),
        (timedelta(seconds=1.2), timedelta(seconds=2)),
        (timedelta(seconds=15), timedelta(seconds=15)),
        (None, timedelta(seconds=30)),
        # The SDK sends an int32 of seconds: a longer wait is Dex's longest.
        (timedelta(days=30000), timedelta(seconds=2**31 - 1)),
        (timedelta.max, timedelta(seconds=2**31 - 1)),
    ],
)
def test_a_wait_is_rounded_up_to_the_whole_seconds_dex_takes(
    wait: timedelta | None, expected: timedelta
) -> None:
    assert dex_poll_timeout(wait) == expected


def test_a_negative_wait_is_refused_as_the_embedded_engine_refuses_it() -> None:
    with pytest.raises(ValueError, match="poll_timeout must be None or a timedelta of 0 or more"):
        dex_poll_timeout(timedelta(seconds=-1))


@pytest.fixture
def flow() -> AgentSessionFlow:
    return make_flow(threading.Event())


def test_the_snapshot_over_dex_replays_the_active_turn(flow: AgentSessionFlow) -> None:
    client = DexSyncFlowClient(FakeSyncDex(flow, EVENTS))
    value = read_agent_event_stream_snapshot_sync(client, flow, "s-1")
    assert value.resume_token == "dex-3"
    assert value.to_json()["snapshot"]["state"]["active_turn_id"] == "turn-2"
    frames = stream_agent_event_frames_sync(
        client, flow, "s-1", resume_token=value.resume_token, poll_timeout=SHORT
    )
    assert [next(frames) for _ in range(3)] == [
        agent_event_frame(EVENTS[3], "dex-4"),
        agent_event_frame(EVENTS[4], "dex-5"),
        KEEP_ALIVE_FRAME,
    ]


LATER_EVENTS = [
    event("turn_completed", "turn-2", TurnCompletedPayload(message_count=4)),
    event("turn_started", "turn-3", TurnStartedPayload(sequence=5)),
]


class EndsTheTurnMeanwhile(FakeSyncDex):
    """A session whose turn 2 ends, and turn 3 begins, as its snapshot (turn 2 running) is read."""

    def invoke_rpc(self, *args: Any, **kwargs: Any) -> Any:
        snapshot = super().invoke_rpc(*args, **kwargs)
        for n, value in enumerate(LATER_EVENTS, len(self.messages) + 1):
            self.messages.append(dex.StreamMessage(to_json(value), f"dex-{n}", T0, "#S-1"))
        return snapshot


def test_a_turn_that_ends_as_the_snapshot_is_read_is_replayed_to_its_end(
    flow: AgentSessionFlow,
) -> None:
    client = DexSyncFlowClient(EndsTheTurnMeanwhile(flow, EVENTS))
    value = read_agent_event_stream_snapshot_sync(client, flow, "s-1")
    assert value.resume_token == "dex-3"
    frames = stream_agent_event_frames_sync(
        client, flow, "s-1", resume_token=value.resume_token, poll_timeout=SHORT
    )
    assert [next(frames) for _ in range(4)] == [
        agent_event_frame(EVENTS[3], "dex-4"),
        agent_event_frame(EVENTS[4], "dex-5"),
        agent_event_frame(LATER_EVENTS[0], "dex-6"),
        agent_event_frame(LATER_EVENTS[1], "dex-7"),
    ]


class FakeAsyncDex:
    """``FakeSyncDex`` behind the ``dex.AsyncClient`` calls of ``DexFlowClient`` and the page reader."""

    def __init__(self, fake: FakeSyncDex) -> None:
        self.fake = fake

    async def invoke_rpc(self, rpc_method: Callable[..., Any], flow_id: str, *args: Any) -> Any:
        return self.fake.invoke_rpc(rpc_method, flow_id, *args)

    async def describe_flow(self, flow_id: str) -> dex.FlowInfo:
        return self.fake.describe_flow(flow_id)

    async def read_stream(
        self,
        flow_id: str,
        stream: Any,
        resume_token: str = "",
        timeout: timedelta | None = None,  # noqa: ASYNC109 - the SDK's own signature
    ) -> Any:
        return self.fake.read_stream(flow_id, stream, resume_token, timeout)

    async def list_stream_messages(
        self, flow_id: str, stream: Any, page_size: int, before_page_token: str = ""
    ) -> Any:
        return self.fake.list_stream_messages(flow_id, stream, page_size, before_page_token)


async def test_the_async_helpers_read_dex_with_whole_second_waits(flow: AgentSessionFlow) -> None:
    fake = FakeSyncDex(flow, EVENTS)
    client = DexFlowClient(cast(DexAsyncClientLike, FakeAsyncDex(fake)))
    value = await read_agent_event_stream_snapshot(client, flow, "s-1")
    assert value.resume_token == "dex-3"
    frames = await stream_agent_event_frames(
        client, flow, "s-1", resume_token=value.resume_token, poll_timeout=SHORT
    )
    assert [await anext(frames) for _ in range(3)] == [
        agent_event_frame(EVENTS[3], "dex-4"),
        agent_event_frame(EVENTS[4], "dex-5"),
        KEEP_ALIVE_FRAME,
    ]
    await frames.aclose()
    # The 1 ms token check and the 50 ms polls, as the whole second Dex takes at least.
    assert set(fake.waits) == {timedelta(seconds=1)}
    with pytest.raises(InvalidAgentEventResumeTokenError):
        await stream_agent_event_frames(client, flow, "s-1", resume_token="foreign")


def test_a_token_dex_refuses_raises_before_the_stream_starts(flow: AgentSessionFlow) -> None:
    client = DexSyncFlowClient(FakeSyncDex(flow, EVENTS))
    with pytest.raises(InvalidAgentEventResumeTokenError):
        stream_agent_event_frames_sync(client, flow, "s-1", resume_token="foreign")


def test_an_empty_stream_gives_an_empty_token_and_keep_alives(flow: AgentSessionFlow) -> None:
    client = DexSyncFlowClient(FakeSyncDex(flow, []))
    assert read_agent_event_stream_snapshot_sync(client, flow, "s-1").resume_token == ""
    frames = stream_agent_event_frames_sync(client, flow, "s-1", poll_timeout=SHORT)
    assert [next(frames) for _ in range(2)] == [KEEP_ALIVE_FRAME] * 2


@pytest.fixture
def blob_cache(tmp_path: Path) -> Iterator[Any]:
    cache = dex.open_blob_cache(dex.BlobCacheConfig(str(tmp_path / "blobs"), 1 << 20))
    yield cache
    cache.close()


NO_SERVER = dex.ClientOptions(server_address="127.0.0.1:1")


def assert_unavailable(error: BaseException) -> None:
    assert isinstance(error, DexEngineError)
    assert error.code == "UNAVAILABLE"
    assert error.retryable is True
    assert isinstance(error.__cause__, dex.DexServiceError)


def test_the_sync_helpers_without_a_server_fail_as_retryable_engine_errors(
    flow: AgentSessionFlow, blob_cache: Any
) -> None:
    registry = dex.Registry([flow], allow_async_handlers=True)
    with dex.Client(registry, blob_cache, NO_SERVER) as real:
        for call in (
            lambda: read_agent_event_stream_snapshot_sync(real, flow, "s-1"),
            lambda: stream_agent_event_frames_sync(real, flow, "s-1"),
            lambda: DexSyncFlowClient(real).invoke_rpc(flow, "s-1", "get_agent_snapshot", None),
            lambda: DexSyncFlowClient(real).read_stream(flow, "s-1", "", SHORT),
        ):
            with pytest.raises(DexEngineError) as caught:
                call()
            assert_unavailable(caught.value)


async def test_the_async_helpers_without_a_server_fail_as_retryable_engine_errors(
    flow: AgentSessionFlow, blob_cache: Any
) -> None:
    registry = dex.Registry([flow], allow_async_handlers=True)
    async with dex.AsyncClient(registry, blob_cache, NO_SERVER) as real:
        with pytest.raises(DexEngineError) as caught:
            await read_agent_event_stream_snapshot(real, flow, "s-1")
        assert_unavailable(caught.value)
        assert caught.value.operation == "list_stream_messages"
        with pytest.raises(DexEngineError) as caught:
            await stream_agent_event_frames(real, flow, "s-1")
        assert_unavailable(caught.value)
        assert caught.value.operation == "read_stream"
        with (
            dex.Client(registry, blob_cache, NO_SERVER) as sync_client,
            pytest.raises(TypeError, match="synchronous"),
        ):
            await stream_agent_event_frames(sync_client, flow, "s-1")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="asynchronous"):
            read_agent_event_stream_snapshot_sync(real, flow, "s-1")  # type: ignore[arg-type]
