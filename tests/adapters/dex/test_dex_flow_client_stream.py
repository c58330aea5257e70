"""``DexFlowClient.read_stream``: the next Stream event, decoded, and its errors.

The reads of a Stream holding an event that no longer decodes run the real SDK
clients against a fake FlowService with a Stream Store (``fake_stream_service``).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import dex
import pytest

from dex_agents import AgentSessionFlow
from dex_agents.adapters.dex.errors import DexEngineError
from dex_agents.adapters.dex.flow_client import DexFlowClient
from dex_agents.adapters.dex.poll_timeouts import DEX_STREAM_POLL_TIMEOUT
from dex_agents.adapters.dex.stream_reads import DexStreamPageReader
from dex_agents.adapters.dex.sync_flow_client import DexSyncFlowClient
from dex_agents.domain.events import AgentEvent, TextDeltaPayload
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.domain.wire import to_json
from dex_agents.ports.errors import (
    FlowDefinitionError,
    FlowNotFoundError,
    InvalidResumeTokenError,
    StreamReadTimeoutError,
)
from dex_agents.ports.flow_client import StreamMessage
from dex_agents.ui_stream import agent_event_frame, stream_agent_event_frames
from tests.adapters.dex.fake_async_client import T0, FakeDexClient, dex_error
from tests.adapters.dex.fake_stream_service import serving_streams
from tests.adapters.dex.toy_agent_flow import ToyFlow
from tests.app.scripted_runner import ScriptedRunner


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


def text_delta(text: str) -> AgentEvent:
    return AgentEvent(
        type="text_delta",
        payload=TextDeltaPayload(text=text),
        turn_id="turn-1",
        step_execution_id="RunModel-1",
        attempt=1,
    )


async def test_an_event_that_no_longer_decodes_is_skipped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The middle event is JSON no AgentEvent decodes from (another program's, or another
    # version's). Raising at it stopped every reader there for good: each read again
    # from the token before it met it again.
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="SupportAgent")
    one, two = text_delta("one"), text_delta("two")
    second = timedelta(seconds=1)
    async with serving_streams([flow]) as (service, client, sync_client):
        key = (flow.flow_type, flow.agent_events.name, "s-1")
        service.streams[key] = [to_json(one), '{"type": 42}', to_json(two)]
        reads, sync_reads = DexFlowClient(client), DexSyncFlowClient(sync_client)
        first = await reads.read_stream(flow, "s-1", poll_timeout=second)
        with caplog.at_level(logging.WARNING, logger="dex_agents.engine"):
            after = await reads.read_stream(flow, "s-1", first.resume_token, second)
            in_thread = await asyncio.to_thread(
                sync_reads.read_stream, flow, "s-1", first.resume_token, second
            )
            page = await DexStreamPageReader(client).list_stream_messages(flow, "s-1", 10)
            sync_page = await asyncio.to_thread(sync_reads.list_stream_messages, flow, "s-1", 10)
            frames = await stream_agent_event_frames(
                reads, flow, "s-1", resume_token=first.resume_token
            )
            frame = await anext(frames)
            await frames.aclose()
    assert (first.value, first.resume_token) == (one, "s-1:1")
    assert (after.value, after.resume_token) == (two, "s-1:3")
    assert (in_thread.value, in_thread.resume_token) == (two, "s-1:3")
    assert [(m.value, m.resume_token) for m in page.messages] == [(two, "s-1:3"), (one, "s-1:1")]
    assert sync_page == page
    assert frame == agent_event_frame(two, "s-1:3")
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 5
    assert all(
        warning.startswith("skipped Stream event 's-1:2' of session 's-1', which no longer decodes")
        for warning in warnings
    )


async def test_a_session_of_another_flow_type_or_none_is_not_found() -> None:
    # Dex keeps a Stream per Flow type and reads it by Flow ID without looking the Flow
    # up: read through another type's Flow, or for a session never started, every read
    # found nothing, so the browser stream sent keep-alives for ever, where the
    # embedded engine says the session is not found.
    support = AgentSessionFlow(ScriptedRunner(), flow_type="SupportAgent")
    sales = AgentSessionFlow(ScriptedRunner(), flow_type="SalesAgent")
    second = timedelta(seconds=1)
    async with serving_streams([support, sales]) as (service, client, sync_client):
        service.flows["s-1"] = support.flow_type
        service.streams[support.flow_type, support.agent_events.name, "s-1"] = [
            to_json(text_delta("one"))
        ]
        reads, sync_reads = DexFlowClient(client), DexSyncFlowClient(sync_client)
        first = await reads.read_stream(support, "s-1", poll_timeout=second)
        with pytest.raises(StreamReadTimeoutError):  # at the tail of its own type's Stream
            await reads.read_stream(support, "s-1", first.resume_token, second)
        with pytest.raises(StreamReadTimeoutError):
            await asyncio.to_thread(
                sync_reads.read_stream, support, "s-1", first.resume_token, second
            )
        for flow, session_id in ((sales, "s-1"), (support, "nobody")):
            wrong = f"^no {flow.flow_type} session with ID {session_id!r}$"
            with pytest.raises(FlowNotFoundError, match=wrong):
                await reads.read_stream(flow, session_id, poll_timeout=second)
            with pytest.raises(FlowNotFoundError, match=wrong):
                await asyncio.to_thread(sync_reads.read_stream, flow, session_id, "", second)
            with pytest.raises(FlowNotFoundError, match=wrong):
                await stream_agent_event_frames(reads, flow, session_id)


async def test_a_read_whose_session_cannot_be_looked_up_keeps_its_own_outcome() -> None:
    # "stream_owners": a describe_flow failing for another reason than a missing
    # Flow says nothing of the session, so the read's own timeout stands.
    support = AgentSessionFlow(ScriptedRunner(), flow_type="SupportAgent")
    second = timedelta(seconds=1)
    async with serving_streams([support]) as (service, client, sync_client):
        service.summaries_fail = True
        reads, sync_reads = DexFlowClient(client), DexSyncFlowClient(sync_client)
        with pytest.raises(StreamReadTimeoutError):
            await reads.read_stream(support, "nobody", poll_timeout=second)
        with pytest.raises(StreamReadTimeoutError):
            await asyncio.to_thread(sync_reads.read_stream, support, "nobody", "", second)


async def test_a_session_removed_after_a_read_found_it_is_not_found() -> None:
    # Found by an audit: each client remembered a session it had found for good, so
    # once Dex removed it (retention deletes a closed session), every read at its
    # tail waited out its long poll again, and the browser stream sent keep-alives
    # for ever, where the embedded engine says the session is not found.
    support = AgentSessionFlow(ScriptedRunner(), flow_type="SupportAgent")
    second = timedelta(seconds=1)
    async with serving_streams([support]) as (service, client, sync_client):
        service.flows["s-1"] = support.flow_type
        service.streams[support.flow_type, support.agent_events.name, "s-1"] = [
            to_json(text_delta("one"))
        ]
        reads, sync_reads = DexFlowClient(client), DexSyncFlowClient(sync_client)
        first = await reads.read_stream(support, "s-1", poll_timeout=second)
        with pytest.raises(StreamReadTimeoutError):  # the session is looked up, and found
            await reads.read_stream(support, "s-1", first.resume_token, second)
        with pytest.raises(StreamReadTimeoutError):
            await asyncio.to_thread(
                sync_reads.read_stream, support, "s-1", first.resume_token, second
            )
        del service.flows["s-1"]  # removed; its Stream's retained events stay here
        gone = "^no SupportAgent session with ID 's-1'$"
        with pytest.raises(FlowNotFoundError, match=gone):
            await reads.read_stream(support, "s-1", first.resume_token, second)
        with pytest.raises(FlowNotFoundError, match=gone):
            await asyncio.to_thread(
                sync_reads.read_stream, support, "s-1", first.resume_token, second
            )
