"""``DexFlowClient``: the port's ``FlowClient`` over a Dex ``AsyncClient``.

No Dex server exists here, so most tests drive it with ``FakeDexClient``: an
object with the real ``AsyncClient``'s method signatures that records each call,
answers with real Dex values and raises real Dex errors, built as the SDK
builds them. One test shows that a real ``AsyncClient`` pointed at no server
is built without contacting anything and fails as a port error.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dex
import grpc  # type: ignore[import-untyped]
import pytest

from dex_agents.adapters.dex.errors import (
    DexCapabilityUnavailableError,
    DexEngineError,
    DexFlowNotActiveOrNotFoundError,
    DexWorkerInvocationError,
)
from dex_agents.adapters.dex.flow_client import (
    DEX_STREAM_POLL_TIMEOUT,
    DexFlowClient,
    port_flow_status,
)
from dex_agents.adapters.dex.schema import DexSchema, build_dex_schema
from dex_agents.adapters.dex.search import session_start_options
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.domain.state import AgentSessionStartInput
from dex_agents.domain.wire import to_json
from dex_agents.ports.engine import Rpc, RpcContext, RpcResult, Step, StepContext, StepDecision
from dex_agents.ports.errors import (
    ChannelMessageNotFoundError,
    EngineError,
    FlowAlreadyStartedError,
    FlowDefinitionError,
    FlowNotActiveError,
    FlowNotFoundError,
    InvalidResumeTokenError,
    RpcLockConflictError,
    StreamReadTimeoutError,
)
from dex_agents.ports.flow_client import FlowInfo, StreamMessage
from dex_agents.ports.persistence import (
    AttributeDef,
    AttributeMapDef,
    ChannelDef,
    ChannelMapDef,
    StreamDef,
)

FLOW_TYPE = "ToyAgent"
STATUS = AttributeDef[str]("status", str)
LAST_MESSAGE = AttributeDef[AgentUserMessage]("last_message", AgentUserMessage)
EVENTS = StreamDef[AgentUserMessage]("events", AgentUserMessage, 4096)
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


class StartToy(Step[AgentSessionStartInput]):
    input_type = AgentSessionStartInput

    async def execute(self, context: StepContext, input: AgentSessionStartInput) -> StepDecision:
        raise AssertionError("no Step runs in these tests")


def _no_handler(context: RpcContext, value: Any) -> RpcResult[Any]:
    raise AssertionError("no RPC handler runs in these tests")


class ToyFlow(dex.Flow[None]):
    """A port Flow definition that is also a registrable ``dex.Flow`` bound to its Dex schema."""

    def __init__(self, *, with_stream: bool = True) -> None:
        self._stream = EVENTS if with_stream else None
        self._schema = build_dex_schema((STATUS, LAST_MESSAGE), self._stream)
        self._start = StartToy()
        self._rpcs: dict[str, Rpc[Any, Any]] = {
            "echo": Rpc("echo", AgentUserMessage, AgentUserMessage, _no_handler),
            "count": Rpc("count", type(None), int, _no_handler),
            "forget": Rpc("forget", str, type(None), _no_handler),
        }

    def get_flow_type(self) -> str:
        return FLOW_TYPE

    def get_persistence_schema(self) -> dex.PersistenceSchema:
        return self._schema.persistence_schema()

    @property
    def flow_type(self) -> str:
        return FLOW_TYPE

    @property
    def start_step(self) -> Step[Any] | None:
        return self._start

    @property
    def steps(self) -> Sequence[Step[Any]]:
        return (self._start,)

    @property
    def schema(
        self,
    ) -> Sequence[AttributeDef[Any] | AttributeMapDef[Any] | ChannelDef[Any] | ChannelMapDef[Any]]:
        return (STATUS, LAST_MESSAGE)

    @property
    def stream(self) -> StreamDef[Any] | None:
        return self._stream

    @property
    def rpcs(self) -> Mapping[str, Rpc[Any, Any]]:
        return self._rpcs

    @property
    def dex_schema(self) -> DexSchema:
        return self._schema

    def dex_rpc_method(self, name: str) -> Callable[..., Any]:
        methods: dict[str, Callable[..., Any]] = {
            "echo": self.echo,
            "count": self.count,
            "forget": self.forget,
        }
        return methods[name]

    @dex.rpc
    def echo(self, context: dex.Context, input: str) -> dex.RPCResult[str]:
        raise AssertionError("no RPC handler runs in these tests")

    @dex.rpc
    def count(self, context: dex.Context) -> dex.RPCResult[int]:
        raise AssertionError("no RPC handler runs in these tests")

    @dex.rpc
    def forget(self, context: dex.Context, input: str) -> None:
        raise AssertionError("no RPC handler runs in these tests")


def dex_error(
    error_class: type[dex.DexServiceError],
    code: str,
    sub_status: str,
    operation: str,
    detail: str = "refused",
) -> dex.DexServiceError:
    """A Dex error built as ``dex._grpc_errors.translate_rpc_error`` builds it."""
    return error_class(
        grpc.StatusCode[code], dex.ErrorSubStatus[sub_status], detail, operation, "s-1"
    )


def closed_or_missing(operation: str) -> dex.DexServiceError:
    return dex_error(dex.FlowNotActiveOrNotFoundError, "NOT_FOUND", "FLOW_NOT_EXISTS", operation)


def unavailable(operation: str) -> dex.DexServiceError:
    return dex_error(dex.DexServiceError, "UNAVAILABLE", "UNCATEGORIZED", operation)


def not_found(operation: str) -> dex.DexServiceError:
    return dex_error(dex.FlowNotFoundError, "NOT_FOUND", "FLOW_NOT_EXISTS", operation)


def dex_info(status: dex.FlowStatus, flow_type: str = FLOW_TYPE) -> dex.FlowInfo:
    return dex.FlowInfo("s-1", "run-1", flow_type, status, T0)


class FakeDexClient:
    """The ``dex.AsyncClient`` calls ``DexFlowClient`` makes, recorded and answered from fields.

    ``failures`` maps an operation name to the Dex error it raises.
    """

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.failures: dict[str, Exception] = {}
        self.rpc_output: Any = None
        self.info: dex.FlowInfo = dex_info(dex.FlowStatus.RUNNING)
        self.message: dex.StreamMessage[Any] = dex.StreamMessage("", "tok", T0, "")
        self.pages: dict[str, dex.SearchFlowsPage] = {"": dex.SearchFlowsPage([], "")}

    def _record(self, operation: str, *args: Any) -> None:
        self.calls.append((operation, *args))
        failure = self.failures.get(operation)
        if failure is not None:
            raise failure

    async def start_flow(
        self,
        flow: dex.Flow[Any],
        flow_id: str,
        input: Any,
        options: dex.StartFlowOptions = dex.StartFlowOptions(),  # noqa: B008 - the SDK's default
    ) -> str:
        self._record("start_flow", flow, flow_id, input, options)
        return "run-1"

    async def invoke_rpc(
        self,
        rpc_method: Callable[..., Any],
        flow_id: str,
        *input: Any,
        run_id: str = "",
        options: dex.RPCInvokeOptions = dex.RPCInvokeOptions(),  # noqa: B008 - the SDK's default
    ) -> Any:
        self._record("invoke_rpc", rpc_method, flow_id, input)
        return self.rpc_output

    async def stop_flow(
        self,
        flow_id: str,
        options: dex.StopFlowOptions = dex.StopFlowOptions(),  # noqa: B008 - the SDK's default
    ) -> None:
        self._record("stop_flow", flow_id, options)

    async def describe_flow(self, flow_id: str) -> dex.FlowInfo:
        self._record("describe_flow", flow_id)
        return self.info

    async def read_stream(
        self,
        flow_id: str,
        stream: dex.Stream[Any],
        resume_token: str = "",
        timeout: timedelta | None = None,  # noqa: ASYNC109 - the SDK's own signature
    ) -> dex.StreamMessage[Any]:
        self._record("read_stream", flow_id, stream, resume_token, timeout)
        return self.message

    async def search_flows(
        self,
        query: str,
        page_size: int,
        next_page_token: str = "",
        *,
        include_continued_as_new: bool = False,
    ) -> dex.SearchFlowsPage:
        self._record("search_flows", query, page_size, next_page_token)
        return self.pages[next_page_token]


@pytest.fixture
def fake() -> FakeDexClient:
    return FakeDexClient()


@pytest.fixture
def flow() -> ToyFlow:
    return ToyFlow()


# --- start options ---------------------------------------------------------

WITH_WAIT_FOR = dex.ActiveStepSearchMode.WITH_WAIT_FOR
BASE = dex.StartFlowOptions(
    timeout=timedelta(hours=1),
    id_reuse_policy=dex.IdReusePolicy.ALLOW_IF_NOT_RUNNING,
    request_id="start-s-1",
    ignore_already_started=True,
)


@pytest.mark.parametrize(
    ("given", "mode", "expected"),
    [
        (None, WITH_WAIT_FOR, dex.StartFlowOptions(config_override=dex.FlowConfig(WITH_WAIT_FOR))),
        (
            BASE,
            WITH_WAIT_FOR,
            dataclasses.replace(BASE, config_override=dex.FlowConfig(WITH_WAIT_FOR)),
        ),
        (
            dex.StartFlowOptions(config_override=dex.FlowConfig(continue_as_new_threshold=1000)),
            WITH_WAIT_FOR,
            dex.StartFlowOptions(
                config_override=dex.FlowConfig(WITH_WAIT_FOR, continue_as_new_threshold=1000)
            ),
        ),
        (
            dex.StartFlowOptions(config_override=dex.FlowConfig(dex.ActiveStepSearchMode.DISABLED)),
            WITH_WAIT_FOR,
            dex.StartFlowOptions(config_override=dex.FlowConfig(dex.ActiveStepSearchMode.DISABLED)),
        ),
        (
            None,
            dex.ActiveStepSearchMode.ALL,
            dex.StartFlowOptions(config_override=dex.FlowConfig(dex.ActiveStepSearchMode.ALL)),
        ),
        (BASE, None, BASE),
        (None, None, dex.StartFlowOptions()),
    ],
    ids=[
        "defaults",
        "base options kept",
        "other config kept",
        "explicit mode wins",
        "another mode",
        "no mode",
        "nothing",
    ],
)
def test_session_start_options(
    given: dex.StartFlowOptions | None,
    mode: dex.ActiveStepSearchMode | None,
    expected: dex.StartFlowOptions,
) -> None:
    assert session_start_options(given, mode) == expected
    client = DexFlowClient(FakeDexClient(), active_step_search_mode=mode, start_options=given)
    assert client.start_options == expected


def test_sessions_start_searchable_by_default(fake: FakeDexClient) -> None:
    config = DexFlowClient(fake).start_options.config_override
    assert config is not None
    assert config.active_step_search_mode is WITH_WAIT_FOR


# --- start_flow ---------------------------------------------------------------


async def test_start_flow_sends_the_wire_input_and_the_session_options(
    fake: FakeDexClient, flow: ToyFlow
) -> None:
    client = DexFlowClient(fake)
    start = AgentSessionStartInput(initial_message="Refund order 7")
    assert await client.start_flow(flow, "s-1", start) == "run-1"
    assert fake.calls == [("start_flow", flow, "s-1", to_json(start), client.start_options)]


async def test_start_flow_writes_initial_attributes_in_their_wire_form(
    fake: FakeDexClient, flow: ToyFlow
) -> None:
    client = DexFlowClient(fake)
    message = AgentUserMessage(text="hello")
    await client.start_flow(
        flow,
        "s-1",
        AgentSessionStartInput(),
        initial_attributes={STATUS: "waiting", LAST_MESSAGE: message},
    )
    options = fake.calls[0][4]
    expected = client.start_options.with_attribute(
        flow.dex_schema.attribute(STATUS), "waiting"
    ).with_attribute(
        flow.dex_schema.attribute(LAST_MESSAGE),
        '{"images":[],"plan_mode":false,"text":"hello"}',
    )
    assert options == expected


async def test_start_flow_of_a_used_id_raises_flow_already_started(
    fake: FakeDexClient, flow: ToyFlow
) -> None:
    refusal = dex_error(
        dex.FlowAlreadyStartedError, "ALREADY_EXISTS", "FLOW_ALREADY_STARTED", "start_flow"
    )
    fake.failures["start_flow"] = refusal
    with pytest.raises(FlowAlreadyStartedError) as caught:
        await DexFlowClient(fake).start_flow(flow, "s-1", AgentSessionStartInput())
    assert str(caught.value) == "a session with ID 's-1' was already started"
    assert caught.value.__cause__ is refusal


@pytest.mark.parametrize("flow_id", ["", "a/b"])
async def test_start_flow_rejects_a_bad_session_id(
    fake: FakeDexClient, flow: ToyFlow, flow_id: str
) -> None:
    message = f"a session ID must be non-empty and contain no '/': {flow_id!r}"
    with pytest.raises(ValueError, match=f"^{message}$"):
        await DexFlowClient(fake).start_flow(flow, flow_id, AgentSessionStartInput())
    assert fake.calls == []


class UnboundFlow:
    """A port Flow definition with no Dex definitions."""

    flow_type = "Plain"
    start_step = None
    steps: Sequence[Step[Any]] = ()
    schema: Sequence[Any] = ()
    stream = None
    rpcs: Mapping[str, Rpc[Any, Any]] = {}


async def test_a_flow_not_bound_to_dex_is_refused(fake: FakeDexClient) -> None:
    with pytest.raises(TypeError, match=r"^Flow type Plain is not bound to Dex"):
        await DexFlowClient(fake).start_flow(UnboundFlow(), "s-1", None)


# --- invoke_rpc ---------------------------------------------------------------


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
async def test_invoke_rpc_tells_closed_from_missing_as_the_embedded_engine(
    fake: FakeDexClient,
    flow: ToyFlow,
    probe: dex.FlowInfo | Exception,
    expected_type: type[Exception],
    message: str,
) -> None:
    fake.failures["invoke_rpc"] = closed_or_missing("invoke_rpc")
    if isinstance(probe, dex.FlowInfo):
        fake.info = probe
    else:
        fake.failures["describe_flow"] = probe
    with pytest.raises(expected_type) as caught:
        await DexFlowClient(fake).invoke_rpc(flow, "s-1", "echo", AgentUserMessage(text="x"))
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


# --- stop_flow ----------------------------------------------------------------


async def test_stop_flow_cancels_with_the_reason(fake: FakeDexClient) -> None:
    await DexFlowClient(fake).stop_flow("s-1", "user left")
    options = dex.StopFlowOptions(type=dex.StopType.CANCEL, reason="user left")
    assert fake.calls == [("stop_flow", "s-1", options)]


async def test_stopping_a_closed_session_does_nothing(fake: FakeDexClient) -> None:
    fake.failures["stop_flow"] = closed_or_missing("stop_flow")
    fake.info = dex_info(dex.FlowStatus.COMPLETED)
    await DexFlowClient(fake).stop_flow("s-1")
    assert [call[0] for call in fake.calls] == ["stop_flow", "describe_flow"]


@pytest.mark.parametrize(
    ("probe", "expected_type", "message"),
    [
        (not_found("describe_flow"), FlowNotFoundError, "no session with ID 's-1'"),
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
    ids=["missing", "running", "probe failed"],
)
async def test_stop_flow_refusals(
    fake: FakeDexClient,
    probe: dex.FlowInfo | Exception,
    expected_type: type[Exception],
    message: str,
) -> None:
    fake.failures["stop_flow"] = closed_or_missing("stop_flow")
    if isinstance(probe, dex.FlowInfo):
        fake.info = probe
    else:
        fake.failures["describe_flow"] = probe
    with pytest.raises(expected_type) as caught:
        await DexFlowClient(fake).stop_flow("s-1")
    assert type(caught.value) is expected_type
    assert str(caught.value) == message


async def test_stop_flow_against_a_dead_server(fake: FakeDexClient) -> None:
    fake.failures["stop_flow"] = unavailable("stop_flow")
    with pytest.raises(DexEngineError) as caught:
        await DexFlowClient(fake).stop_flow("s-1")
    assert caught.value.retryable is True


# --- describe_flow and list_flows -------------------------------------------


@pytest.mark.parametrize(
    ("status", "text"),
    [
        (dex.FlowStatus.RUNNING, "running"),
        (dex.FlowStatus.CONTINUED_AS_NEW, "running"),
        (dex.FlowStatus.COMPLETED, "completed"),
        (dex.FlowStatus.FAILED, "failed"),
        (dex.FlowStatus.SERVER_SIDE_TIMEOUT_INTERNAL_ONLY, "failed"),
        (dex.FlowStatus.CANCELED, "stopped"),
        (dex.FlowStatus.TERMINATED, "stopped"),
    ],
)
async def test_describe_flow_maps_the_status(
    fake: FakeDexClient, status: dex.FlowStatus, text: str
) -> None:
    assert port_flow_status(status) == text
    fake.info = dex_info(status)
    info = await DexFlowClient(fake).describe_flow("s-1")
    assert info == FlowInfo(
        flow_id="s-1",
        flow_type=FLOW_TYPE,
        status=text,
        started_at=T0,
        closed_at=None,
        active_step_types=(),
    )


def test_every_dex_status_has_a_port_status() -> None:
    assert {port_flow_status(status) for status in dex.FlowStatus} == {
        "running",
        "completed",
        "failed",
        "stopped",
    }


async def test_describe_flow_of_a_missing_session(fake: FakeDexClient) -> None:
    fake.failures["describe_flow"] = not_found("describe_flow")
    with pytest.raises(FlowNotFoundError, match=r"^no session with ID 's-1'$"):
        await DexFlowClient(fake).describe_flow("s-1")


def _entry(flow_id: str, started_at: datetime, closed_at: datetime | None) -> dex.SearchFlowEntry:
    status = dex.FlowStatus.RUNNING if closed_at is None else dex.FlowStatus.CANCELED
    return dex.SearchFlowEntry(
        flow_id, f"run-{flow_id}", FLOW_TYPE, status, started_at, closed_at, {}
    )


async def test_list_flows_pages_through_the_search_oldest_first(fake: FakeDexClient) -> None:
    closed = T0 + timedelta(hours=3)
    fake.pages = {
        "": dex.SearchFlowsPage(
            [_entry("s-3", T0 + timedelta(hours=2), None), _entry("s-2", T0, closed)], "p2"
        ),
        "p2": dex.SearchFlowsPage([_entry("s-1", T0, None)], ""),
    }
    flows = await DexFlowClient(fake).list_flows(FLOW_TYPE)
    assert [(info.flow_id, info.status, info.closed_at) for info in flows] == [
        ("s-1", "running", None),
        ("s-2", "stopped", closed),
        ("s-3", "running", None),
    ]
    assert all(info.active_step_types == () for info in flows)
    assert fake.calls == [
        ("search_flows", 'FlowType = "ToyAgent"', 50, ""),
        ("search_flows", 'FlowType = "ToyAgent"', 50, "p2"),
    ]


async def test_list_flows_needs_a_flow_type(fake: FakeDexClient) -> None:
    with pytest.raises(ValueError, match=r"^DexFlowClient\.list_flows needs a flow_type"):
        await DexFlowClient(fake).list_flows()
    assert fake.calls == []


async def test_list_flows_against_a_dead_server(fake: FakeDexClient) -> None:
    fake.failures["search_flows"] = unavailable("search_flows")
    with pytest.raises(DexEngineError, match=r"^Dex search_flows failed \(UNAVAILABLE\)"):
        await DexFlowClient(fake).list_flows(FLOW_TYPE)


# --- read_stream --------------------------------------------------------------


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


# --- what SDK 1.23.0 cannot do -------------------------------------------------


async def test_read_step_history_is_an_honest_gap(fake: FakeDexClient) -> None:
    with pytest.raises(DexCapabilityUnavailableError) as caught:
        await DexFlowClient(fake).read_step_history("s-1")
    assert str(caught.value) == (
        "read_step_history is not available on Dex: Dex SDK 1.23.0 has no client API for "
        "a Flow's history; read it with `dexcli flow history s-1` or in Dex Web"
    )
    assert isinstance(caught.value, NotImplementedError)
    assert fake.calls == []


async def test_read_attribute_is_an_honest_gap(fake: FakeDexClient) -> None:
    with pytest.raises(DexCapabilityUnavailableError) as caught:
        await DexFlowClient(fake).read_attribute("s-1", STATUS)
    assert str(caught.value) == (
        "read_attribute(status) is not available on Dex: Dex SDK 1.23.0 has no client API to "
        "read Attributes (get_attributes); read session state through the get_agent_snapshot "
        "RPC (AgentSessionClient.get_agent_snapshot) or `dexcli flow state s-1`"
    )
    assert isinstance(caught.value, EngineError)
    assert fake.calls == []


# --- a real AsyncClient, no server ---------------------------------------------

Call = Callable[[DexFlowClient, ToyFlow], Awaitable[object]]

REAL_CALLS: dict[str, tuple[str, Call]] = {
    "describe_flow": ("describe_flow", lambda client, _: client.describe_flow("s-1")),
    "invoke_rpc": (
        "invoke_rpc",
        lambda client, flow: client.invoke_rpc(flow, "s-1", "count", None),
    ),
    "list_flows": ("search_flows", lambda client, _: client.list_flows(FLOW_TYPE)),
}


@pytest.mark.parametrize("name", sorted(REAL_CALLS))
async def test_a_real_client_without_a_server_fails_as_a_retryable_engine_error(
    tmp_path: Path, name: str
) -> None:
    operation, call = REAL_CALLS[name]
    flow = ToyFlow()
    registry = dex.Registry([flow])
    cache = dex.open_blob_cache(dex.BlobCacheConfig(str(tmp_path / "blobs"), 1 << 20))
    try:
        options = dex.ClientOptions(server_address="127.0.0.1:1")
        async with dex.AsyncClient(registry, cache, options) as real:
            client = DexFlowClient(real)  # builds a lazy channel: contacts nothing
            with pytest.raises(DexEngineError) as caught:
                await asyncio.wait_for(call(client, flow), timeout=30)
    finally:
        cache.close()
    assert caught.value.code == "UNAVAILABLE"
    assert caught.value.operation == operation
    assert caught.value.retryable is True
    assert isinstance(caught.value.__cause__, dex.DexServiceError)
