"""A worker's store fault is logged once when it appears and once when it clears.

It clears when a transaction that failed commits. A damaged page of the file
fails only the transactions that read it (a claim round), and until 2026-12-07
each other transaction of the worker that committed meanwhile (a lease
renewal, a read of who holds leases) logged "works again", so the claim
round's next try logged the fault anew: a pair of lines about every second for
as long as the file stayed damaged.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from dex_agents.adapters.local.store_errors import StoreCorruptError
from dex_agents.adapters.local.store_faults import StoreFaultLog, until_stored

LOGGER = logging.getLogger("tests.store_fault_log")
DAMAGED = "/tmp/x.sqlite3 is damaged: SQLite found a damaged page"


async def test_a_fault_clears_when_the_transaction_that_failed_commits_not_another(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, LOGGER.name)
    faults = StoreFaultLog(LOGGER, "w1")
    repaired = asyncio.Event()
    tries = 0

    async def claim_round() -> str:
        nonlocal tries
        tries += 1
        if not repaired.is_set():
            raise StoreCorruptError(DAMAGED)
        return "claimed"

    async def renewal() -> str:
        return "renewed"

    claiming = asyncio.create_task(until_stored(claim_round, faults))
    while tries < 3:
        assert await until_stored(renewal, faults) == "renewed"
        await asyncio.sleep(0.01)
    # Other transactions committed while the claim round kept failing: the fault holds.
    held = faults.fault
    repaired.set()
    assert await claiming == "claimed"
    assert (held, faults.fault) == (DAMAGED, None)
    messages = [record.getMessage() for record in caplog.records]
    assert messages == [
        f"w1: the session database failed; retrying until it works again: {DAMAGED}",
        f"w1: the session database works again after {tries - 1} failed tries",
    ]
