"""A worker's wait between claim rounds (``WakeUp``, ``LocalEngine.wait_for_work``).

Quiet commits of the process (every work in them took what it made runnable)
must not end the wait; loud ones, a wake-up and a move of the counter that
came before the wait must.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from datetime import timedelta

import pytest

from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.wake_up import WakeUp
from dex_agents.ports.flow_store import StoreTransaction

# Long enough that no poll or deadline passes in a test: only a wake-up ends a wait.
NEVER = timedelta(hours=1)


def _write(tx: StoreTransaction) -> bool:
    tx.put_value("run", "Name", "", "value")
    return True


async def _settled(task: asyncio.Task[object]) -> bool:
    """Whether ``task`` finishes once the loop has run every callback that is ready."""
    for _ in range(20):
        if task.done():
            return True
        await asyncio.sleep(0)
    return task.done()


@pytest.fixture
def engine() -> Iterator[LocalEngine]:
    engine = LocalEngine(MemoryFlowStore(), [], poll_interval=NEVER)
    yield engine
    engine.close()


async def test_a_set_before_the_wait_is_kept_for_it_and_used_once() -> None:
    wake = WakeUp()
    wake.set()
    assert await wake.wait(3600) is True
    assert await wake.wait(0) is False  # that set was used up


async def test_a_set_while_waiting_wakes_the_waiter() -> None:
    wake = WakeUp()
    waiter = asyncio.create_task(wake.wait(3600))
    assert not await _settled(waiter)
    wake.set()
    assert await _settled(waiter)
    assert waiter.result() is True


async def test_a_cancelled_wait_leaves_a_later_set_for_the_next_wait() -> None:
    wake = WakeUp()
    waiter = asyncio.create_task(wake.wait(3600))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    wake.set()
    assert await wake.wait(3600) is True


async def test_a_set_after_the_time_ran_out_but_before_the_waiter_resumed_is_kept() -> None:
    # The wait's timer and the set fall in one pass of the loop, timer first: the wait's
    # future is already settled when the set comes, and its waiter has not run since. The
    # set was lost, and a stopping worker then slept until its next full claim round.
    wake = WakeUp()
    waiter = asyncio.create_task(wake.wait(0))
    await asyncio.sleep(0)  # the waiter's timer is scheduled first
    asyncio.get_running_loop().call_later(0, wake.set)
    assert await waiter is False  # its time ran out before the set
    assert await wake.wait(0) is True
    assert await wake.wait(0) is False  # the set is used once


async def test_a_set_after_the_waiter_was_cancelled_but_before_it_resumed_is_kept() -> None:
    # Cancelling the waiter cancels the future it awaits at once; the waiter runs its
    # cleanup only later. A set in between must neither raise the cancellation into the
    # one who sets (a commit waking every waiter) nor be lost.
    wake = WakeUp()
    waiter = asyncio.create_task(wake.wait(3600))
    await asyncio.sleep(0)
    waiter.cancel()
    wake.set()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert await wake.wait(0) is True


@pytest.mark.parametrize(
    ("commit", "ends_the_wait"),
    [
        pytest.param(lambda engine: engine.run_quietly(_write, quiet=bool), False, id="quiet"),
        pytest.param(lambda engine: engine.run(_write), True, id="loud"),
        pytest.param(
            lambda engine: engine.run_quietly(_write, quiet=lambda _: False), True, id="not-quiet"
        ),
    ],
)
async def test_only_a_commit_that_may_leave_steps_to_claim_ends_the_wait(
    engine: LocalEngine,
    commit: Callable[[LocalEngine], Awaitable[bool]],
    ends_the_wait: bool,
) -> None:
    since = await engine.change_counter()
    waiter = asyncio.create_task(engine.wait_for_work(since, NEVER, WakeUp()))
    assert not await _settled(waiter)
    await commit(engine)
    assert await _settled(waiter) is ends_the_wait
    waiter.cancel()


async def test_the_counter_after_a_quiet_commit_is_noted_and_a_loud_one_clears_it(
    engine: LocalEngine,
) -> None:
    noted = [(engine.quiet_counter, engine.loud_commits)]
    await engine.run_quietly(_write, quiet=bool)
    noted.append((engine.quiet_counter, engine.loud_commits))
    after_quiet = await engine.change_counter()
    await engine.run(_write)
    noted.append((engine.quiet_counter, engine.loud_commits))
    assert noted == [(None, 0), (after_quiet, 0), (None, 1)]


async def test_a_wake_up_or_a_change_before_the_wait_ends_it(engine: LocalEngine) -> None:
    wake = WakeUp()
    since = await engine.change_counter()
    waiter = asyncio.create_task(engine.wait_for_work(since, NEVER, wake))
    assert not await _settled(waiter)
    wake.set()  # a stopping worker, or a slot that came free
    assert await _settled(waiter)
    # A commit between the claim round's counter read and the wait: the wait returns at once.
    await engine.run_quietly(_write, quiet=bool)
    assert await _settled(asyncio.create_task(engine.wait_for_work(since, NEVER, WakeUp())))


async def test_the_wait_ends_when_its_time_is_up(engine: LocalEngine) -> None:
    since = await engine.change_counter()
    await engine.wait_for_work(since, timedelta(0), WakeUp())
