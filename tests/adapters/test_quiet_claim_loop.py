"""A worker running one session's Steps one after another leaves its claim loop asleep.

Each Step's commit leases the next Step to its worker (a hand-off), so the claim
loop has nothing to do between them: it wakes neither for the slot a finished
Step frees nor for a claim round that a Step's commit, short of slots, made loud.
"""

from __future__ import annotations

import asyncio

import pytest

from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.handoff import HandOff
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.round_slots import RoundSlots
from dex_agents.adapters.local.worker import LocalWorker
from dex_agents.ports.flow_store import StoreTransaction
from tests.adapters.engine_flows import EngineTestFlow


async def test_a_step_s_commit_borrows_the_slots_a_claim_round_holds() -> None:
    # A claim round in flight holds every free slot. A Step committing meanwhile had its
    # own slot alone, so finding its one next Step it could not tell it took everything:
    # its commit was loud, and the round it asked for held the slots from the next
    # Step's commit in turn.
    engine = LocalEngine(MemoryFlowStore(), [EngineTestFlow()])
    worker = LocalWorker(engine, max_concurrent_tasks=4)
    offered: list[int] = []
    try:
        worker._round = RoundSlots(worker._reserve(0))

        def work(tx: StoreTransaction, limit: int) -> HandOff:
            offered.append(limit)
            return HandOff(committed=True)

        assert await worker.handing_off(work)
    finally:
        engine.close()
    assert offered == [4]


@pytest.mark.parametrize(
    ("starved", "waiting", "woken"),
    [(False, True, False), (True, True, True), (False, False, True)],
    ids=["waiting-nothing-starved", "waiting-starved", "mid-pass"],
)
async def test_a_freed_slot_wakes_the_claim_loop_only_when_it_may_need_it(
    starved: bool, waiting: bool, woken: bool
) -> None:
    engine = LocalEngine(MemoryFlowStore(), [EngineTestFlow()])
    worker = LocalWorker(engine)
    try:
        worker._starved = starved
        finished = asyncio.create_task(asyncio.sleep(0))
        await finished
        if waiting:
            wait = asyncio.create_task(worker._wake.wait(10))
            await asyncio.sleep(0)  # the claim loop waits
            worker._finished(1, finished)
            await asyncio.sleep(0)
            assert wait.done() is woken
            wait.cancel()
        else:
            # Mid-pass, its round may come back starved with this slot unseen: the wake
            # waits for the loop's next wait, which returns at once.
            worker._finished(1, finished)
            assert await asyncio.wait_for(worker._wake.wait(10), 1) is True
        assert worker._slot_freed.is_set()
    finally:
        engine.close()
