"""``AgentSessionClient`` over a Dex ``AsyncClient``, as the spec's "Running an agent" builds it."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import dex
import pytest

from dex_agents import AGENT_SESSION_ACTIVE_STEP_SEARCH_MODE, AgentSessionClient, AgentSessionFlow
from dex_agents.adapters.dex.errors import DexEngineError
from dex_agents.adapters.dex.flow_client import DexFlowClient
from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.app.session_flow import PortableSessionFlow
from dex_agents.domain.requests import AgentSnapshot, ResolveInterruptRequest
from dex_agents.domain.state import AgentSessionStartInput, AgentState, AgentStatus
from dex_agents.domain.wire import from_json, to_json
from dex_agents.ports.errors import FlowNotActiveError
from tests.adapters.dex.fake_async_client import dex_error, dex_info
from tests.app.scripted_runner import ScriptedRunner


async def test_the_spec_example_builds_and_a_call_fails_clearly_without_a_server(
    tmp_path: Path,
) -> None:
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="TriageAgent")
    registry = dex.Registry([flow], allow_async_handlers=True)
    cache = dex.open_blob_cache(dex.BlobCacheConfig(str(tmp_path / ".dex-cache"), 64 * 1024 * 1024))
    try:
        options = dex.ClientOptions(server_address="127.0.0.1:1")
        async with dex.AsyncClient(registry, cache, options) as client:
            sessions = AgentSessionClient(client, flow)
            with pytest.raises(DexEngineError) as caught:
                await asyncio.wait_for(
                    sessions.start_session("session-42", "Find my open tickets"), timeout=30
                )
            with pytest.raises(DexEngineError):
                await asyncio.wait_for(sessions.get_agent_snapshot("session-42"), timeout=30)
    finally:
        cache.close()
    assert caught.value.code == "UNAVAILABLE"


async def test_a_dex_client_needs_the_registered_dex_flow(tmp_path: Path) -> None:
    portable = PortableSessionFlow(ScriptedRunner(), flow_type="TriageAgent")
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="TriageAgent")
    registry = dex.Registry([flow], allow_async_handlers=True)
    cache = dex.open_blob_cache(dex.BlobCacheConfig(str(tmp_path / "blobs"), 1 << 20))
    try:
        async with dex.AsyncClient(registry, cache) as client:
            with pytest.raises(TypeError, match="needs the AgentSessionFlow registered"):
                AgentSessionClient(client, portable)
            sessions = AgentSessionClient(
                client, flow, start_options=dex.StartFlowOptions(timeout=None)
            )
            assert isinstance(sessions._client, DexFlowClient)
    finally:
        cache.close()


def test_the_synchronous_dex_client_is_refused_at_construction(tmp_path: Path) -> None:
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="TriageAgent")
    registry = dex.Registry([flow], allow_async_handlers=True)
    cache = dex.open_blob_cache(dex.BlobCacheConfig(str(tmp_path / "blobs"), 1 << 20))
    try:
        with (
            dex.Client(registry, cache) as client,
            pytest.raises(TypeError, match=r"needs a dex\.AsyncClient, not the synchronous"),
        ):
            AgentSessionClient(client, flow)  # type: ignore[arg-type]
    finally:
        cache.close()


def test_start_options_are_dex_options_and_need_a_dex_client() -> None:
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="TriageAgent")
    engine = LocalEngine(MemoryFlowStore(), [flow])
    try:
        with pytest.raises(TypeError, match="pass them with an AsyncClient"):
            AgentSessionClient(LocalFlowClient(engine), flow, start_options=dex.StartFlowOptions())
    finally:
        engine.close()


class _ConflictingClient(dex.AsyncClient):
    """A real AsyncClient whose RPC calls first meet ``conflicts`` lock conflicts."""

    def __init__(self, registry: dex.Registry, cache: dex.BlobCache, conflicts: int) -> None:
        super().__init__(registry, cache, dex.ClientOptions(server_address="127.0.0.1:1"))
        self.conflicts = conflicts
        self.calls: list[tuple[str, object]] = []

    async def invoke_rpc(
        self, rpc_method: Any, flow_id: str, input: object = None, **_: Any
    ) -> Any:
        self.calls.append((rpc_method.__name__, input))
        if self.conflicts > 0:
            self.conflicts -= 1
            raise dex_error(dex.RpcLockConflictError, "ABORTED", "WORKER_API_ERROR", "InvokeRPC")
        return True


async def test_resolve_interrupt_retries_lock_conflicts_through_dex(tmp_path: Path) -> None:
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="TriageAgent")
    registry = dex.Registry([flow], allow_async_handlers=True)
    cache = dex.open_blob_cache(dex.BlobCacheConfig(str(tmp_path / "blobs"), 1 << 20))
    try:
        client = _ConflictingClient(registry, cache, conflicts=2)
        async with client:
            sessions = AgentSessionClient(client, flow)
            assert await sessions.resolve_interrupt("session-42", "call-1", approved=True)
    finally:
        cache.close()
    assert [name for name, _ in client.calls] == ["resolve_interrupt"] * 3
    sent = from_json(str(client.calls[0][1]), ResolveInterruptRequest)
    assert sent == ResolveInterruptRequest(interrupt_id="call-1", approved=True)


class _StartRecordingClient(dex.AsyncClient):
    """A real AsyncClient that records what ``start_flow`` was asked to start."""

    def __init__(self, registry: dex.Registry, cache: dex.BlobCache) -> None:
        super().__init__(registry, cache, dex.ClientOptions(server_address="127.0.0.1:1"))
        self.started: list[tuple[str, object, dex.StartFlowOptions]] = []

    async def start_flow(  # type: ignore[override]
        self, flow: dex.Flow[Any], flow_id: str, input: object, options: dex.StartFlowOptions
    ) -> str:
        self.started.append((flow_id, input, options))
        return "run-1"


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (AGENT_SESSION_ACTIVE_STEP_SEARCH_MODE, dex.ActiveStepSearchMode.WITH_WAIT_FOR),
        (dex.ActiveStepSearchMode.DISABLED, dex.ActiveStepSearchMode.DISABLED),
    ],
)
async def test_start_session_makes_the_session_searchable_by_its_waiting_steps(
    tmp_path: Path, mode: dex.ActiveStepSearchMode, expected: dex.ActiveStepSearchMode
) -> None:
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="TriageAgent")
    registry = dex.Registry([flow], allow_async_handlers=True)
    cache = dex.open_blob_cache(dex.BlobCacheConfig(str(tmp_path / "blobs"), 1 << 20))
    try:
        client = _StartRecordingClient(registry, cache)
        async with client:
            sessions = AgentSessionClient(client, flow, active_step_search_mode=mode)
            assert await sessions.start_session("session-42", "Refund order 7") == "run-1"
    finally:
        cache.close()
    ((flow_id, sent, options),) = client.started
    assert flow_id == "session-42"
    assert from_json(str(sent), AgentSessionStartInput).initial_message == "Refund order 7"
    assert options.config_override is not None
    assert options.config_override.active_step_search_mode is expected


class _ClosedSessionClient(dex.AsyncClient):
    """A real AsyncClient for one session that is busy in its last snapshot and ``status``."""

    def __init__(
        self, registry: dex.Registry, cache: dex.BlobCache, flow_type: str, status: dex.FlowStatus
    ) -> None:
        super().__init__(registry, cache, dex.ClientOptions(server_address="127.0.0.1:1"))
        self.info = dex_info(status, flow_type)

    async def invoke_rpc(
        self, rpc_method: Any, flow_id: str, input: object = None, **_: Any
    ) -> Any:
        busy = AgentState(status=AgentStatus.RUNNING_MODEL, active_turn_id="turn-1")
        return to_json(AgentSnapshot(state=busy))

    async def read_stream(self, flow_id: str, stream: Any, *_: Any, **__: Any) -> Any:
        raise dex_error(
            dex.LongPollTimeoutError, "DEADLINE_EXCEEDED", "LONG_POLL_TIMEOUT", "read_stream"
        )

    async def describe_flow(self, flow_id: str) -> dex.FlowInfo:
        return self.info


@pytest.mark.parametrize(
    ("status", "said"), [(dex.FlowStatus.FAILED, "failed"), (dex.FlowStatus.CANCELED, "stopped")]
)
async def test_wait_for_user_on_a_closed_busy_session_raises_flow_not_active(
    tmp_path: Path, status: dex.FlowStatus, said: str
) -> None:
    # As on the embedded engine (e3cfedf): a session that failed or was stopped mid-turn
    # writes no more events, so the wait ran out its whole timeout.
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="TriageAgent")
    registry = dex.Registry([flow], allow_async_handlers=True)
    cache = dex.open_blob_cache(dex.BlobCacheConfig(str(tmp_path / "blobs"), 1 << 20))
    try:
        async with _ClosedSessionClient(registry, cache, flow.flow_type, status) as client:
            sessions = AgentSessionClient(client, flow)
            with pytest.raises(FlowNotActiveError, match=f"^session 's-1' is {said}: "):
                await sessions.wait_for_user("s-1", timeout=timedelta(minutes=5))
    finally:
        cache.close()
