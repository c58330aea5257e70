"""``DexFlowClient.read_stream``: the next Stream event, decoded, and its errors."""

from __future__ import annotations

from datetime import timedelta

import dex
import pytest

from dex_agents.adapters.dex.errors import DexEngineError
from dex_agents.adapters.dex.flow_client import DEX_STREAM_POLL_TIMEOUT, DexFlowClient
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.ports.errors import (
    FlowDefinitionError,
    InvalidResumeTokenError,
    StreamReadTimeoutError,
)
from dex_agents.ports.flow_client import StreamMessage
from tests.adapters.dex.fake_async_client import T0, FakeDexClient, dex_error
from tests.adapters.dex.toy_agent_flow import ToyFlow


@pytest.mark.parametrize(
    ("poll_timeout", "sent_timeout"),
    [(None, timedelta(seconds=30)), (timedelta(seconds=5), timedelta(seconds=5))],
)
async def test_read_stream_decodes_the_next_event(
    fake: FakeDexClient,
    flow: ToyFlow,
    poll_timeout: timedelta | None,
    sent_timeout: timedelta,
) -> None:
    fake.message = dex.StreamMessage(
        '{"images":[],"plan_mode":false,"text":"event"}', "tok-2", T0, "#CallModel-1"
    )
    message = await DexFlowClient(fake).read_stream(flow, "s-1", "tok-1", poll_timeout)
    assert message == StreamMessage(
        value=AgentUserMessage(text="event"),
        resume_token="tok-2",
        created_at=T0,
        source="#CallModel-1",
    )
    assert fake.calls == [("read_stream", "s-1", flow.dex_schema.stream, "tok-1", sent_timeout)]
    assert timedelta(seconds=30) == DEX_STREAM_POLL_TIMEOUT


@pytest.mark.parametrize(
    ("refusal", "token", "expected_type", "message"),
    [
        (
            dex_error(
                dex.LongPollTimeoutError, "DEADLINE_EXCEEDED", "LONG_POLL_TIMEOUT", "read_stream"
            ),
            "",
            StreamReadTimeoutError,
            "no new event of session 's-1' arrived",
        ),
        (
            dex_error(dex.DexServiceError, "INVALID_ARGUMENT", "UNCATEGORIZED", "read_stream"),
            "forged",
            InvalidResumeTokenError,
            "session 's-1' never issued Stream resume token 'forged'",
        ),
        (
            dex_error(dex.DexServiceError, "INVALID_ARGUMENT", "UNCATEGORIZED", "read_stream"),
            "",
            DexEngineError,
            "Dex read_stream failed (INVALID_ARGUMENT): refused",
        ),
    ],
    ids=["long poll timeout", "foreign token", "invalid request without a token"],
)
async def test_read_stream_errors(
    fake: FakeDexClient,
    flow: ToyFlow,
    refusal: dex.DexServiceError,
    token: str,
    expected_type: type[Exception],
    message: str,
) -> None:
    fake.failures["read_stream"] = refusal
    with pytest.raises(expected_type) as caught:
        await DexFlowClient(fake).read_stream(flow, "s-1", token)
    assert type(caught.value) is expected_type
    assert str(caught.value) == message


async def test_read_stream_of_a_flow_without_a_stream(fake: FakeDexClient) -> None:
    with pytest.raises(FlowDefinitionError, match=r"^Flow type ToyAgent has no Stream$"):
        await DexFlowClient(fake).read_stream(ToyFlow(with_stream=False), "s-1")
    assert fake.calls == []
