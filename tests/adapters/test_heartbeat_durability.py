"""A heartbeat's commit waits for the disk unless the Step says it need not, and never
when it carries a checkpoint (``LocalStepContext.heartbeat``)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from dex_agents.adapters.local.registry import register_flows
from dex_agents.adapters.local.staged_state import Snapshot, SnapshotSource, StagedState
from dex_agents.adapters.local.step_context import LocalStepContext
from tests.adapters.engine_flows import EngineTestFlow
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

    flow = register_flows([EngineTestFlow()])["EngineTest"]
    row = execution()
    state = StagedState(row.flow_id, SnapshotSource(Snapshot()), ())
    context = LocalStepContext(
        flow, row, state, datetime(2026, 12, 1, tzinfo=UTC), beat=beat, flush=flush
    )
    await context.heartbeat(checkpoint, durable=durable)
    assert beats == [(checkpoint, synced)]
    assert context.started
