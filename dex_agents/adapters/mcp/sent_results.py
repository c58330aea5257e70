"""Results as the server sent them, for the resource and prompt tools ("Resources and prompts").

Their outputs are the server's items as it sent them, but the SDK reads each result
into pydantic models that leave out a field they do not know, such as a server's own
field on a resource. ``keep_sent_results`` makes a connection's session read each
result as JSON first, keep it as ``SentResults.last``, and then read it with the
type the SDK asked for, exactly as the session would have: the SDK's checks and its
handling of the answer (input requests, retries) are unchanged. ``complete_result``
gives a result as sent even when the SDK's models then refused it, and
``read_as_sent`` returns it so: an item the models cannot hold, such as a resource's
contents with neither ``text`` nor ``blob``, which MCP 2026-07-28 lets through the
protocol's own check of a result, is still the server's item.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from mcp import Client
from pydantic import TypeAdapter, ValidationError

_AS_SENT: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


class SentResults:
    """The last result a connection's session read, as the JSON object the server sent."""

    def __init__(self) -> None:
        self.last: dict[str, Any] = {}


def keep_sent_results(client: Client) -> SentResults:
    """Keep each result this connection's session reads from now on, as sent."""
    # Typed for results that are models; it reads any TypeAdapter's type, a dict too.
    send: Any = client.session.send_request
    kept = SentResults()

    async def send_request(request: Any, result_type: Any, *args: Any, **kwargs: Any) -> Any:
        sent = await send(request, _AS_SENT, *args, **kwargs)
        kept.last = sent
        if isinstance(result_type, TypeAdapter):
            return result_type.validate_python(sent, by_name=False)
        return result_type.model_validate(sent, by_name=False)

    # ``send_request`` is the public method the SDK reads every result with (see
    # sent_annotations.py); the session checks the result against the protocol
    # version before it reads it with the type it is given.
    client.session.send_request = send_request  # type: ignore[method-assign]
    return kept


def complete_result(kept: SentResults) -> dict[str, Any] | None:
    """The result ``kept`` holds, as sent, when it is a complete one.

    ``None`` when it holds none (cleared with ``{}`` before a request: a result the
    protocol's check let through is never ``{}``), and for an input request or a
    result of an extension, such as a task.
    """
    result = kept.last
    if not result or result.get("resultType", "complete") != "complete":
        return None
    return result


async def read_as_sent(request: Awaitable[object], kept: SentResults) -> dict[str, Any]:
    """The result of ``request``, an SDK call on ``kept``'s connection, as the server sent it.

    A complete result the SDK's models refused to read is returned as sent; the
    SDK's ``ValidationError`` is raised for an answer that failed the protocol's
    check, and for an input request or a result of an extension.
    """
    kept.last = {}  # cleared: complete_result reads only this request's answer
    try:
        await request
    except ValidationError:
        if complete_result(kept) is None:
            raise
    return kept.last
