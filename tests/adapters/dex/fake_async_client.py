"""``FakeDexClient``: the ``dex.AsyncClient`` calls ``DexFlowClient`` makes, faked.

No Dex server exists here, so the ``DexFlowClient`` tests drive it with an object
with the real ``AsyncClient``'s method signatures that records each call, answers
with real Dex values and raises real Dex errors, built as the SDK builds them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import dex
import grpc  # type: ignore[import-untyped]

from tests.adapters.dex.toy_agent_flow import FLOW_TYPE

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


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
    """The error Dex raises for a Flow that is closed or does not exist."""
    return dex_error(dex.FlowNotActiveOrNotFoundError, "NOT_FOUND", "FLOW_NOT_EXISTS", operation)


def unavailable(operation: str) -> dex.DexServiceError:
    """The error Dex raises when its server cannot be reached."""
    return dex_error(dex.DexServiceError, "UNAVAILABLE", "UNCATEGORIZED", operation)


def not_found(operation: str) -> dex.DexServiceError:
    """The error Dex raises for a Flow that does not exist."""
    return dex_error(dex.FlowNotFoundError, "NOT_FOUND", "FLOW_NOT_EXISTS", operation)


def dex_info(status: dex.FlowStatus, flow_type: str = FLOW_TYPE) -> dex.FlowInfo:
    """The ``dex.FlowInfo`` of session ``s-1`` in ``status``."""
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

    def refuse_as_closed_or_missing(self, operation: str, probe: dex.FlowInfo | Exception) -> None:
        """Make ``operation`` fail as for a closed or missing Flow.

        ``probe`` answers the ``describe_flow`` that tells which: the Flow's info, or
        the error the probe raises.
        """
        self.failures[operation] = closed_or_missing(operation)
        if isinstance(probe, dex.FlowInfo):
            self.info = probe
        else:
            self.failures["describe_flow"] = probe

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
