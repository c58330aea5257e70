"""Errors of the MCP adapter.

::

    DexAgentsError
    └── McpToolCallInterruptedError   a tools/call that may have run: a Step failure
    ToolExecutionError (core)         the call failed or was never sent; the model sees it
    ToolOutcomeUnknownError (core)    the server said its outcome is unknown

``McpConnectionError`` is internal: no attempt to connect reached the server, so
the request was never sent.
"""

from __future__ import annotations

from dex_agents.domain.errors import DexAgentsError


class McpToolCallInterruptedError(DexAgentsError):
    """A ``tools/call`` that was sent and may have run, but gave no answer to record.

    The stream broke, the server exited, the request timed out, or the answer was an
    internal error (``-32603``), an HTTP error status or a body that is not JSON-RPC
    (``-32700``). It is a Step failure: ``CallTool`` sends a ``read`` or
    ``idempotent_write`` call again with the same idempotency key, up to 3 attempts;
    other effects record ``outcome_unknown`` and are never sent again. A resource or
    prompt tool's request that got no answer raises it too.
    """


class McpConnectionError(Exception):
    """Every attempt to connect to a server failed, so no request was sent."""

    def __init__(self, server: str, attempts: int, cause: BaseException | None) -> None:
        cause = None if cause is None else _innermost(cause)
        detail = "" if cause is None else f": {type(cause).__name__}: {cause}"
        super().__init__(
            f"could not connect to MCP server {server!r} in {attempts} "
            f"{'attempt' if attempts == 1 else 'attempts'}{detail}"
        )
        self.server = server


def _innermost(error: BaseException) -> BaseException:
    # The SDK raises a failed handshake out of its task groups, so a refused
    # connection read "ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)".
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error
