"""``SyncLocalFlowClient``: a blocking client of the embedded engine, for WSGI servers and threads.

It runs the same store transactions as ``LocalFlowClient`` (``run_rpc``, the
Stream reads), but calls the engine's store directly from the calling thread
instead of handing work to the engine's store thread through an event loop, so
no event loop runs per call. Both stores serialize transactions with a lock of
their own, so any number of threads may share one client, beside the engine's
own thread.

Latency: ``LocalEngine`` wakes its local waiters through an ``asyncio.Event``
that another thread cannot wait on, so ``read_stream`` polls the store's change
counter every ``wake_interval`` (50 ms by default): a new event reaches a
waiting reader within that interval, and an idle long poll costs one cheap
counter query per interval. A write this client commits (an RPC such as
``send_user_message``) is seen by the engine's workers as the engine's own
commits are where the engine watches the file's writes (Linux, ``wal_writes.py``),
and at their next poll (``LocalEngine.poll_interval``, 100 ms by default)
elsewhere.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

from dex_agents.adapters.local.codec import decode_resume_token
from dex_agents.adapters.local.decoded_values import from_stored
from dex_agents.adapters.local.engine import LocalEngine, check_engine_interval
from dex_agents.adapters.local.rpcs import ReadFirstRpcs, RpcNeedsWriteError, rpc_call
from dex_agents.adapters.local.stream_owners import require_flow_type
from dex_agents.adapters.local.stream_pages import (
    decode_event_page,
    event_message,
    event_stream,
    read_event_page,
)
from dex_agents.adapters.local.stream_reads import poll_seconds
from dex_agents.adapters.local.undecodable_events import SKIPPED, decode_or_skip
from dex_agents.ports.engine import FlowDefinition
from dex_agents.ports.errors import StreamReadTimeoutError
from dex_agents.ports.flow_client import StreamMessage
from dex_agents.ports.flow_rows import EventRow
from dex_agents.ports.flow_store import StoreTransaction
from dex_agents.ports.stream_pages import StreamMessagesPage

DEFAULT_SYNC_WAKE_INTERVAL = timedelta(milliseconds=50)
"""How often a waiting ``SyncLocalFlowClient.read_stream`` looks for a commit."""


class SyncLocalFlowClient:
    """A ``SyncFlowClient`` of the embedded engine; share the ``LocalEngine`` of a runtime.

    ``wake_interval`` is how often a long poll checks the store for a commit
    (see the module's note on latency). The client owns nothing: it stops
    working when the runtime that opened the engine closes. A ``read_stream``
    that would wait on a thread running an event loop raises ``RuntimeError``.
    """

    def __init__(
        self, engine: LocalEngine, *, wake_interval: timedelta = DEFAULT_SYNC_WAKE_INTERVAL
    ) -> None:
        # A number of seconds failed with "'<=' not supported between ... 'timedelta'".
        check_engine_interval("wake_interval", wake_interval)
        self._read_first = ReadFirstRpcs()
        self._engine = engine
        self._wake_seconds = wake_interval.total_seconds()

    @property
    def engine(self) -> LocalEngine:
        """The engine this client talks to."""
        return self._engine

    def invoke_rpc(self, flow: FlowDefinition, flow_id: str, rpc: str, input: Any) -> Any:
        """Run an RPC in one transaction and return its output, decoded as its wire type."""
        engine = self._engine
        call = rpc_call(engine.registered(flow), flow_id, rpc, input, engine.now)
        # As LocalFlowClient.invoke_rpc: the handler's output value, which crosses no process,
        # and an RPC that may change nothing is first tried as a read.
        if self._read_first.reads_first(call.rpc):
            try:
                return engine.store.read(call.read)
            except RpcNeedsWriteError:
                self._read_first.wrote(call.rpc)
        return engine.store.run(call.write)

    def read_stream(
        self,
        flow: FlowDefinition,
        flow_id: str,
        resume_token: str = "",
        poll_timeout: timedelta | None = None,
    ) -> StreamMessage[Any]:
        """The next event after ``resume_token``; long-polls up to ``poll_timeout`` (30 s)."""
        stream = event_stream(self._engine.registered(flow))
        after = decode_resume_token(flow_id, resume_token)
        store = self._engine.store
        deadline = time.monotonic() + poll_seconds(poll_timeout)

        def read(tx: StoreTransaction) -> list[EventRow]:
            require_flow_type(tx, flow.flow_type, flow_id)
            return list(tx.events_after(flow_id, after, 1))

        # Read before the events, so a commit between the two is seen as a change.
        counter = store.change_counter()
        while True:
            events = store.read(read)
            if events:
                event = events[0]
                value = decode_or_skip(
                    event, lambda text: from_stored(text, stream.value_type, store)
                )
                if value is SKIPPED:  # read on past it, without waiting
                    after = event.id
                    continue
                return event_message(flow_id, event, value)
            changed = self._wait_for_change(counter, deadline)
            if changed is None:
                raise StreamReadTimeoutError(f"no new event of session {flow_id!r} arrived")
            counter = changed

    def _wait_for_change(self, since: int, deadline: float) -> int | None:
        """The store's counter once it differs from ``since``; ``None`` at the deadline."""
        store = self._engine.store
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            _refuse_to_block_a_running_loop()
            time.sleep(min(remaining, self._wake_seconds))
            counter = store.change_counter()
            if counter != since:
                return counter

    def list_stream_messages(
        self, flow: FlowDefinition, flow_id: str, page_size: int, before_page_token: str = ""
    ) -> StreamMessagesPage[Any]:
        """One page of the session's retained events, newest first; never waits."""
        stream = event_stream(self._engine.registered(flow))
        rows, next_token = self._engine.store.read(
            lambda tx: read_event_page(tx, flow_id, page_size, before_page_token, flow.flow_type)
        )
        return decode_event_page(stream, flow_id, rows, next_token)


def _refuse_to_block_a_running_loop() -> None:
    # Asleep on a loop's thread, the wait froze that loop, and so the runtime's workers
    # when they run on it: the event it waited for could not come, and after the whole
    # poll_timeout it raised StreamReadTimeoutError as if the session were quiet.
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(
        "SyncLocalFlowClient.read_stream would block this thread's running event loop "
        "while it waits: await runtime.flow_client.read_stream in async code, or call "
        "the sync client from a thread with no event loop (such as a WSGI worker)"
    )
