"""``port_error``: every Dex SDK 1.23.0 error the adapter can meet, as the port error it becomes."""

from __future__ import annotations

from typing import Any

import dex
import grpc  # type: ignore[import-untyped]
import pytest
from dex._grpc_errors import _worker_error_status
from dex.dexpb import dex_pb2 as pb

from dex_agents.adapters.dex.errors import (
    PORT_ERRORS_BY_WORKER_TYPE,
    DexCapabilityUnavailableError,
    DexEngineError,
    DexFlowNotActiveOrNotFoundError,
    DexTimeoutError,
    DexWorkerInvocationError,
    port_error,
)
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


def service_error(
    error_class: type[dex.DexServiceError],
    code: str,
    sub_status: str,
    operation: str = "invoke_rpc",
    flow_id: str | None = "s-1",
    detail: str = "refused",
) -> dex.DexServiceError:
    """A Dex error built as ``dex._grpc_errors.translate_rpc_error`` builds it."""
    return error_class(
        grpc.StatusCode[code], dex.ErrorSubStatus[sub_status], detail, operation, flow_id
    )


def worker_error(error_type: str, detail: str, worker_code: str | None = "UNKNOWN") -> Any:
    return dex.WorkerInvocationError(
        grpc.StatusCode.UNKNOWN,
        dex.ErrorSubStatus.WORKER_API_ERROR,
        "worker failed",
        "invoke_rpc",
        "s-1",
        None if worker_code is None else grpc.StatusCode[worker_code],
        error_type,
        detail,
    )


CASES: list[tuple[str, Any, type[Exception], str, bool]] = [
    (
        "already started",
        service_error(
            dex.FlowAlreadyStartedError, "ALREADY_EXISTS", "FLOW_ALREADY_STARTED", "start_flow"
        ),
        FlowAlreadyStartedError,
        "a session with ID 's-1' was already started",
        False,
    ),
    (
        "not found",
        service_error(dex.FlowNotFoundError, "NOT_FOUND", "FLOW_NOT_EXISTS", "describe_flow"),
        FlowNotFoundError,
        "no session with ID 's-1'",
        False,
    ),
    (
        "not exists on a call that needs no Flow",
        service_error(dex.DexServiceError, "NOT_FOUND", "FLOW_NOT_EXISTS", "read_stream"),
        FlowNotFoundError,
        "no session with ID 's-1'",
        False,
    ),
    (
        "closed or not found",
        service_error(dex.FlowNotActiveOrNotFoundError, "NOT_FOUND", "FLOW_NOT_EXISTS"),
        DexFlowNotActiveOrNotFoundError,
        "session 's-1' is closed or does not exist: refused",
        False,
    ),
    (
        "closing",
        service_error(dex.FlowClosingError, "FAILED_PRECONDITION", "FLOW_CLOSING"),
        FlowNotActiveError,
        "session 's-1' is closing: refused",
        False,
    ),
    (
        "lock conflict",
        service_error(dex.RpcLockConflictError, "ABORTED", "WORKER_API_ERROR"),
        RpcLockConflictError,
        "a running Step of session 's-1' holds a lock the RPC needs: refused",
        True,
    ),
    (
        "channel message not found",
        service_error(
            dex.ChannelMessageNotFoundError, "FAILED_PRECONDITION", "CHANNEL_MESSAGE_NOT_FOUND"
        ),
        ChannelMessageNotFoundError,
        "a Channel message named by an RPC of session 's-1' was consumed or deleted meanwhile: refused",
        False,
    ),
    (
        "stream long poll",
        service_error(
            dex.LongPollTimeoutError, "DEADLINE_EXCEEDED", "LONG_POLL_TIMEOUT", "read_stream"
        ),
        StreamReadTimeoutError,
        "no new event of session 's-1' arrived",
        True,
    ),
    (
        "other long poll",
        service_error(
            dex.LongPollTimeoutError, "DEADLINE_EXCEEDED", "LONG_POLL_TIMEOUT", "wait_for_flow"
        ),
        DexTimeoutError,
        "Dex wait_for_flow of session 's-1' timed out: refused",
        True,
    ),
    (
        "request budget",
        service_error(dex.RequestTimeoutError, "DEADLINE_EXCEEDED", "REQUEST_TIMEOUT"),
        DexTimeoutError,
        "Dex invoke_rpc of session 's-1' timed out: refused",
        True,
    ),
    (
        "worker failure",
        worker_error("builtins.RuntimeError", "model provider down"),
        DexWorkerInvocationError,
        "the Worker failed invoke_rpc of session 's-1': builtins.RuntimeError: model provider down",
        False,
    ),
    (
        "worker raised a port error",
        worker_error(
            "dex_agents.ports.errors.ChannelMessageNotFoundError", "queued message 'm' was consumed"
        ),
        ChannelMessageNotFoundError,
        "queued message 'm' was consumed",
        False,
    ),
    (
        "dead server",
        service_error(
            dex.DexServiceError,
            "UNAVAILABLE",
            "UNCATEGORIZED",
            "search_flows",
            None,
            "failed to connect",
        ),
        DexEngineError,
        "Dex search_flows failed (UNAVAILABLE): failed to connect",
        True,
    ),
    (
        "bad request",
        service_error(dex.DexServiceError, "INVALID_ARGUMENT", "UNCATEGORIZED", "start_flow"),
        DexEngineError,
        "Dex start_flow failed (INVALID_ARGUMENT): refused",
        False,
    ),
    (
        "unregistered Flow",
        dex.FlowDefinitionError("Flow instance is not registered"),
        FlowDefinitionError,
        "Flow instance is not registered",
        False,
    ),
]


@pytest.mark.parametrize(
    ("error", "expected_type", "message", "retryable"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_port_error_maps_each_dex_error(
    error: Any, expected_type: type[Exception], message: str, retryable: bool
) -> None:
    mapped = port_error(error)
    assert type(mapped) is expected_type
    assert str(mapped) == message
    assert isinstance(mapped, EngineError)
    assert mapped.retryable is retryable


def test_closed_or_not_found_is_caught_as_either_port_error() -> None:
    mapped = port_error(
        service_error(dex.FlowNotActiveOrNotFoundError, "NOT_FOUND", "FLOW_NOT_EXISTS")
    )
    assert isinstance(mapped, FlowNotFoundError)
    assert isinstance(mapped, FlowNotActiveError)


def test_service_error_keeps_the_dex_metadata() -> None:
    mapped = port_error(
        service_error(dex.DexServiceError, "UNAVAILABLE", "UNCATEGORIZED", "describe_flow")
    )
    assert isinstance(mapped, DexEngineError)
    assert (mapped.code, mapped.sub_status, mapped.operation, mapped.flow_id) == (
        "UNAVAILABLE",
        "UNCATEGORIZED",
        "describe_flow",
        "s-1",
    )


@pytest.mark.parametrize(("worker_code", "expected"), [("INTERNAL", "INTERNAL"), (None, None)])
def test_worker_failure_carries_the_worker_error(
    worker_code: str | None, expected: str | None
) -> None:
    mapped = port_error(worker_error("app.tools.BrokenTool", "no such row", worker_code))
    assert isinstance(mapped, DexWorkerInvocationError)
    assert mapped.worker_error_type == "app.tools.BrokenTool"
    assert mapped.worker_error_detail == "no such row"
    assert mapped.worker_code == expected
    assert mapped.sub_status == "WORKER_API_ERROR"


@pytest.mark.parametrize(
    "error_class",
    [
        FlowDefinitionError,
        FlowNotFoundError,
        FlowAlreadyStartedError,
        FlowNotActiveError,
        RpcLockConflictError,
        ChannelMessageNotFoundError,
        InvalidResumeTokenError,
        StreamReadTimeoutError,
    ],
)
def test_port_error_raised_in_a_worker_comes_back_as_itself(
    error_class: type[EngineError],
) -> None:
    # The type name as a real Worker reports it for a handler's exception.
    status = _worker_error_status(error_class("handler refused"))
    response = pb.WorkerErrorResponse()
    assert status.details[0].Unpack(response)
    assert PORT_ERRORS_BY_WORKER_TYPE[response.error_type] is error_class
    mapped = port_error(worker_error(response.error_type, response.detail))
    assert type(mapped) is error_class
    assert str(mapped) == "handler refused"


def test_capability_unavailable_names_the_gap() -> None:
    error = DexCapabilityUnavailableError("read_thing", "client API for things", "use the RPC")
    assert isinstance(error, EngineError)
    assert isinstance(error, NotImplementedError)
    assert str(error) == (
        "read_thing is not available on Dex: Dex SDK 1.23.0 has no client API for things; "
        "use the RPC"
    )
    assert error.retryable is False
