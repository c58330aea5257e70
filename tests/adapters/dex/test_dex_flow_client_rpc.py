"""``DexFlowClient.invoke_rpc``: wire values both ways and Dex's refusals as port errors.

A Flow that is closed or missing is told apart with a ``describe_flow`` probe, as the
embedded engine tells them apart.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import dex
import grpc  # type: ignore[import-untyped]
import pytest

from dex_agents.adapters.dex.errors import (
    DexEngineError,
    DexFlowNotActiveOrNotFoundError,
    DexWorkerInvocationError,
)
from dex_agents.adapters.dex.flow_client import DexFlowClient
from dex_agents.adapters.dex.sync_flow_client import DexSyncFlowClient
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.ports.errors import (
    ChannelMessageNotFoundError,
    FlowDefinitionError,
    FlowNotActiveError,
    FlowNotFoundError,
    RpcLockConflictError,
)
from tests.adapters.dex.fake_async_client import (
    FakeDexClient,
    dex_error,
    dex_info,
    not_found,
    unavailable,
)
from tests.adapters.dex.toy_agent_flow import ToyFlow

T = TypeVar("T")


@pytest.mark.parametrize(
    ("rpc", "value", "sent", "answer", "output"),
    [
        (
            "echo",
            AgentUserMessage(text="hi"),
            ('{"images":[],"plan_mode":false,"text":"hi"}',),
            '{"images":[],"plan_mode":true,"text":"back"}',
            AgentUserMessage(text="back", plan_mode=True),
        ),
        ("count", None, (), 3, 3),
        ("forget", "m-1", ("m-1",), None, None),
    ],
    ids=["wire value both ways", "no input", "no output"],
)
async def test_invoke_rpc_maps_input_and_output(
    fake: FakeDexClient,
    flow: ToyFlow,
    rpc: str,
    value: Any,
    sent: tuple[Any, ...],
    answer: Any,
    output: Any,
) -> None:
    fake.rpc_output = answer
    assert await DexFlowClient(fake).invoke_rpc(flow, "s-1", rpc, value) == output
    assert fake.calls == [("invoke_rpc", flow.dex_rpc_method(rpc), "s-1", sent)]


@pytest.mark.parametrize(
    ("refusal", "expected_type", "message"),
    [
        (
            dex_error(dex.RpcLockConflictError, "ABORTED", "WORKER_API_ERROR", "invoke_rpc"),
            RpcLockConflictError,
            "a running Step of session 's-1' holds a lock the RPC needs: refused",
        ),
        (
            dex_error(
                dex.ChannelMessageNotFoundError,
                "FAILED_PRECONDITION",
                "CHANNEL_MESSAGE_NOT_FOUND",
                "invoke_rpc",
            ),
            ChannelMessageNotFoundError,
            "a Channel message named by an RPC of session 's-1' "
            "was consumed or deleted meanwhile: refused",
        ),
        (
            dex.WorkerInvocationError(
                grpc.StatusCode.UNKNOWN,
                dex.ErrorSubStatus.WORKER_API_ERROR,
                "worker failed",
                "invoke_rpc",
                "s-1",
                grpc.StatusCode.UNKNOWN,
                "builtins.KeyError",
                "'turn'",
            ),
            DexWorkerInvocationError,
            "the Worker failed invoke_rpc of session 's-1': builtins.KeyError: 'turn'",
        ),
        (
            unavailable("invoke_rpc"),
            DexEngineError,
            "Dex invoke_rpc failed (UNAVAILABLE): refused",
        ),
    ],
    ids=["lock conflict", "message consumed", "worker failure", "dead server"],
)
async def test_invoke_rpc_raises_port_errors(
    fake: FakeDexClient,
    flow: ToyFlow,
    refusal: dex.DexServiceError,
    expected_type: type[Exception],
    message: str,
) -> None:
    fake.failures["invoke_rpc"] = refusal
    with pytest.raises(expected_type) as caught:
        await DexFlowClient(fake).invoke_rpc(flow, "s-1", "count", None)
    assert type(caught.value) is expected_type
    assert str(caught.value) == message
    assert caught.value.__cause__ is refusal


class BlockingDex:
    """The ``dex.Client`` calls ``DexSyncFlowClient.invoke_rpc`` makes, answered by a ``FakeDexClient``.

    The fake's coroutines never await, so each runs to its end at once.
    """

    def __init__(self, fake: FakeDexClient) -> None:
        self.fake = fake

    @staticmethod
    def _done(coroutine: Coroutine[Any, Any, T]) -> T:
        try:
            coroutine.send(None)
        except StopIteration as stop:
            result: T = stop.value
            return result
        raise AssertionError("the fake awaited")

    def invoke_rpc(self, rpc_method: Callable[..., Any], flow_id: str, *input: Any) -> Any:
        return self._done(self.fake.invoke_rpc(rpc_method, flow_id, *input))

    def describe_flow(self, flow_id: str) -> dex.FlowInfo:
        return self._done(self.fake.describe_flow(flow_id))


async def _invoke_echo(client: str, fake: FakeDexClient, flow: ToyFlow) -> Any:
    """``echo`` through ``DexFlowClient``, or through ``DexSyncFlowClient`` over the same fake."""
    message = AgentUserMessage(text="x")
    if client == "sync":
        blocking = DexSyncFlowClient(BlockingDex(fake))  # type: ignore[arg-type]
        return blocking.invoke_rpc(flow, "s-1", "echo", message)
    return await DexFlowClient(fake).invoke_rpc(flow, "s-1", "echo", message)


@pytest.mark.parametrize(
    ("probe", "expected_type", "message"),
    [
        (not_found("describe_flow"), FlowNotFoundError, "no ToyAgent session with ID 's-1'"),
        (
            dex_info(dex.FlowStatus.RUNNING, "OtherAgent"),
            FlowNotFoundError,
            "no ToyAgent session with ID 's-1'",
        ),
        (dex_info(dex.FlowStatus.CANCELED), FlowNotActiveError, "session 's-1' is stopped"),
        (dex_info(dex.FlowStatus.COMPLETED), FlowNotActiveError, "session 's-1' is completed"),
        (dex_info(dex.FlowStatus.FAILED), FlowNotActiveError, "session 's-1' is failed"),
        (
            dex_info(dex.FlowStatus.RUNNING),
            DexFlowNotActiveOrNotFoundError,
            "session 's-1' is closed or does not exist: refused",
        ),
        (
            unavailable("describe_flow"),
            DexFlowNotActiveOrNotFoundError,
            "session 's-1' is closed or does not exist: refused",
        ),
    ],
    ids=[
        "missing",
        "another Flow type",
        "stopped",
        "completed",
        "failed",
        "running",
        "probe failed",
    ],
)
@pytest.mark.parametrize("client", ["async", "sync"])
async def test_invoke_rpc_tells_closed_from_missing_as_the_embedded_engine(
    fake: FakeDexClient,
    flow: ToyFlow,
    client: str,
    probe: dex.FlowInfo | Exception,
    expected_type: type[Exception],
    message: str,
) -> None:
    fake.refuse_as_closed_or_missing("invoke_rpc", probe)
    with pytest.raises(expected_type) as caught:
        await _invoke_echo(client, fake, flow)
    assert type(caught.value) is expected_type
    assert str(caught.value) == message
    assert [call[0] for call in fake.calls] == ["invoke_rpc", "describe_flow"]


async def test_invoke_rpc_of_an_unknown_rpc(fake: FakeDexClient, flow: ToyFlow) -> None:
    with pytest.raises(FlowDefinitionError, match=r"^Flow type ToyAgent has no RPC nope$"):
        await DexFlowClient(fake).invoke_rpc(flow, "s-1", "nope", None)
    assert fake.calls == []


async def test_invoke_rpc_refuses_input_for_an_rpc_without_one(
    fake: FakeDexClient, flow: ToyFlow
) -> None:
    with pytest.raises(ValueError, match=r"^RPC count takes no input, got str$"):
        await DexFlowClient(fake).invoke_rpc(flow, "s-1", "count", "x")
    assert fake.calls == []
