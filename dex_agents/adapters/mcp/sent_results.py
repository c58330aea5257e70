"""Results as the server sent them, for the resource and prompt tools ("Resources and prompts").

Their outputs are the server's items as it sent them, but the SDK reads each result
into pydantic models that leave out a field they do not know, such as a server's own
field on a resource. ``keep_sent_results`` makes a connection's session read each
result as JSON first, keep it as ``SentResults.last``, and then read it with the
type the SDK asked for, exactly as the session would have: the SDK's checks and its
handling of the answer (input requests, retries) are unchanged. ``complete_result``
gives a result as sent even when the SDK's models then refused it.
"""

from __future__ import annotations

from typing import Any

from mcp import Client
from pydantic import TypeAdapter

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
