"""Dex's errors as the port's errors, in one table.

``AgentSessionClient`` handles the port's errors (``dex_agents.ports.errors``)
whatever engine runs the session, so every Dex call of the adapter goes through
:func:`port_error`. The mapping:

==================================  =============================================
Dex SDK 1.23.0 error                port error
==================================  =============================================
``FlowAlreadyStartedError``         ``FlowAlreadyStartedError``
``FlowNotFoundError``               ``FlowNotFoundError``
any error with sub-status           ``FlowNotFoundError``
``FLOW_NOT_EXISTS``
``FlowNotActiveOrNotFoundError``    ``DexFlowNotActiveOrNotFoundError``: both a
                                    ``FlowNotFoundError`` and a
                                    ``FlowNotActiveError``, because Dex does not
                                    say which; ``DexFlowClient`` asks
                                    ``describe_flow`` to tell them apart
``FlowClosingError``                ``FlowNotActiveError``
``RpcLockConflictError``            ``RpcLockConflictError`` (retryable)
``ChannelMessageNotFoundError``     ``ChannelMessageNotFoundError``
``LongPollTimeoutError``            ``StreamReadTimeoutError`` for ``read_stream``,
                                    else ``DexTimeoutError`` (both retryable)
``RequestTimeoutError``             ``DexTimeoutError`` (retryable)
``WorkerInvocationError``           the port error the Worker raised, when its
                                    type is one of the port's; else
                                    ``DexWorkerInvocationError``
``FlowDefinitionError`` (SDK)       ``FlowDefinitionError``
any other ``DexServiceError``       ``DexEngineError``; retryable when its gRPC
                                    code is UNAVAILABLE, DEADLINE_EXCEEDED or
                                    RESOURCE_EXHAUSTED (a dead server is
                                    UNAVAILABLE)
==================================  =============================================

Callers raise the result ``from`` the Dex error, so its code, sub-status and
transport cause stay on ``__cause__``.
"""

from __future__ import annotations

from typing import Any

import dex

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

RETRYABLE_STATUS_CODES = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED"})
"""gRPC status code names of a ``DexServiceError`` that the same request may outlive."""

_PORT_ERRORS: tuple[type[EngineError], ...] = (
    FlowDefinitionError,
    FlowNotFoundError,
    FlowAlreadyStartedError,
    FlowNotActiveError,
    RpcLockConflictError,
    ChannelMessageNotFoundError,
    InvalidResumeTokenError,
    StreamReadTimeoutError,
)

# Dex reports a Worker failure's type as "<module>.<qualname>" of the raised exception.
PORT_ERRORS_BY_WORKER_TYPE: dict[str, type[EngineError]] = {
    f"{error.__module__}.{error.__qualname__}": error for error in _PORT_ERRORS
}
"""The port errors a Worker's handler may raise on purpose, by the type name Dex reports."""


class DexEngineError(EngineError):
    """Dex refused or could not perform a request, for a reason the port has no error for.

    ``code`` is the gRPC status code's name (``"UNAVAILABLE"`` when no Dex server
    answers), ``sub_status`` Dex's classification, ``operation`` the Dex client
    call and ``flow_id`` the session it targeted (``None`` for a search).
    """

    def __init__(
        self,
        message: str,
        *,
        code: str,
        sub_status: str,
        operation: str,
        flow_id: str | None,
        retryable: bool = False,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.sub_status = sub_status
        self.operation = operation
        self.flow_id = flow_id
        self.retryable = retryable


class DexTimeoutError(DexEngineError, TimeoutError):
    """A Dex long poll or request budget ran out; the same request may succeed later."""


class DexWorkerInvocationError(DexEngineError):
    """The Worker's handler of an RPC or Step failed with an error the port does not define.

    ``worker_error_type`` is the raised exception's ``<module>.<qualname>``,
    ``worker_error_detail`` its message and ``worker_code`` the Worker's gRPC
    status code name, or ``None`` when Dex did not report one.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str,
        sub_status: str,
        operation: str,
        flow_id: str | None,
        worker_code: str | None,
        worker_error_type: str,
        worker_error_detail: str,
    ) -> None:
        super().__init__(
            message, code=code, sub_status=sub_status, operation=operation, flow_id=flow_id
        )
        self.worker_code = worker_code
        self.worker_error_type = worker_error_type
        self.worker_error_detail = worker_error_detail


class DexFlowNotActiveOrNotFoundError(FlowNotFoundError, FlowNotActiveError):
    """Dex refused a request because the session is closed or does not exist, without saying which.

    It is both a ``FlowNotFoundError`` and a ``FlowNotActiveError``, so a handler
    of either catches it. ``DexFlowClient`` raises it only when ``describe_flow``
    cannot tell the two apart either.
    """


class DexCapabilityUnavailableError(EngineError, NotImplementedError):
    """Dex SDK 1.23.0 has no client API for this port operation.

    This is an honest gap, not a failure of the request: the message names the
    missing SDK API and what to use instead. ``missing_api`` names the SDK call
    that would be needed.
    """

    def __init__(self, operation: str, missing_api: str, instead: str) -> None:
        super().__init__(
            f"{operation} is not available on Dex: Dex SDK 1.23.0 has no {missing_api}; {instead}"
        )
        self.operation = operation
        self.missing_api = missing_api
        self.instead = instead


def _name(value: Any) -> str:
    name = getattr(value, "name", None)
    return name if isinstance(name, str) else str(value)


def _session(flow_id: str | None) -> str:
    return "a session" if flow_id is None else f"session {flow_id!r}"


def port_error(error: dex.DexServiceError | dex.FlowDefinitionError) -> Exception:
    """The port error that stands for a Dex error; raise it ``from`` the Dex error."""
    if isinstance(error, dex.FlowDefinitionError):
        return FlowDefinitionError(str(error))
    flow_id = error.flow_id
    detail = error.detail
    if isinstance(error, dex.FlowAlreadyStartedError):
        return FlowAlreadyStartedError(f"a session with ID {flow_id!r} was already started")
    if isinstance(error, dex.FlowNotActiveOrNotFoundError):
        return DexFlowNotActiveOrNotFoundError(
            f"{_session(flow_id)} is closed or does not exist: {detail}"
        )
    if isinstance(error, dex.FlowNotFoundError) or _name(error.sub_status) == "FLOW_NOT_EXISTS":
        return FlowNotFoundError(f"no session with ID {flow_id!r}")
    if isinstance(error, dex.FlowClosingError):
        return FlowNotActiveError(f"{_session(flow_id)} is closing: {detail}")
    if isinstance(error, dex.RpcLockConflictError):
        return RpcLockConflictError(
            f"a running Step of {_session(flow_id)} holds a lock the RPC needs: {detail}"
        )
    if isinstance(error, dex.ChannelMessageNotFoundError):
        return ChannelMessageNotFoundError(
            f"a Channel message named by an RPC of {_session(flow_id)} "
            f"was consumed or deleted meanwhile: {detail}"
        )
    if isinstance(error, dex.LongPollTimeoutError) and error.operation == "read_stream":
        return StreamReadTimeoutError(f"no new event of {_session(flow_id)} arrived")
    if isinstance(error, dex.WorkerInvocationError):
        return _worker_error(error)
    code = _name(error.code)
    fields: dict[str, Any] = {
        "code": code,
        "sub_status": _name(error.sub_status),
        "operation": error.operation,
        "flow_id": flow_id,
    }
    if isinstance(error, dex.LongPollTimeoutError | dex.RequestTimeoutError):
        return DexTimeoutError(
            f"Dex {error.operation} of {_session(flow_id)} timed out: {detail}",
            retryable=True,
            **fields,
        )
    return DexEngineError(
        f"Dex {error.operation} failed ({code}): {detail}",
        retryable=code in RETRYABLE_STATUS_CODES,
        **fields,
    )


def _worker_error(error: dex.WorkerInvocationError) -> Exception:
    port_class = PORT_ERRORS_BY_WORKER_TYPE.get(error.worker_error_type)
    if port_class is not None:
        return port_class(error.worker_error_detail)
    worker_code = None if error.worker_code is None else _name(error.worker_code)
    return DexWorkerInvocationError(
        f"the Worker failed {error.operation} of {_session(error.flow_id)}: "
        f"{error.worker_error_type or 'unknown error'}: {error.worker_error_detail or error.detail}",
        code=_name(error.code),
        sub_status=_name(error.sub_status),
        operation=error.operation,
        flow_id=error.flow_id,
        worker_code=worker_code,
        worker_error_type=error.worker_error_type,
        worker_error_detail=error.worker_error_detail,
    )


def stream_read_error(
    error: dex.DexServiceError | dex.FlowDefinitionError, flow_id: str, resume_token: str
) -> Exception:
    """The port error for a failed ``read_stream``; raise it ``from`` the Dex error.

    A resume token Dex refuses as an invalid argument is ``InvalidResumeTokenError``
    (how Dex refuses a foreign token is not verified against a server); anything
    else is :func:`port_error`'s, so a Stream the client's Registry does not hold
    is the port's ``FlowDefinitionError``.
    """
    if (
        resume_token
        and isinstance(error, dex.DexServiceError)
        and _name(error.code) == "INVALID_ARGUMENT"
    ):
        return InvalidResumeTokenError(
            f"session {flow_id!r} never issued Stream resume token {resume_token!r}"
        )
    return port_error(error)
