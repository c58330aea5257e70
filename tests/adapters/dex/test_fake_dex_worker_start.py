"""The fake-Dex harness starts a real ``dex.AsyncWorker`` against the fake FlowService.

The Worker negotiates the protocol and syncs its indexes with the fake before it
serves; a protocol the fake does not offer fails the start.
"""

from __future__ import annotations

import dex
import pytest

from tests.adapters.dex.fake_dex import FakeFlowService, running_worker
from tests.adapters.dex.harness_flow import toy_registry


async def test_the_worker_starts_against_the_fake_and_syncs_its_indexes() -> None:
    async with running_worker(toy_registry()) as driver:
        assert driver.flow_service.index_sync_requests == [{"status": "INDEX_TYPE_KEYWORD"}]
        assert driver.flow_service.unimplemented_calls == []
        assert driver.worker.worker_target.address.startswith("127.0.0.1:")


async def test_a_worker_that_cannot_negotiate_the_protocol_fails_to_start() -> None:
    registry = toy_registry()
    service = FakeFlowService(
        dex.dexpb.dex_pb2.ServerInfo(
            minimum_supported_protocol_version=4, current_protocol_version=5
        )
    )

    with pytest.raises(RuntimeError, match=r"protocol intervals do not overlap$"):
        async with running_worker(registry, flow_service=service):
            pass
    assert service.index_sync_requests == []
