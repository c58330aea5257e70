"""A ``tools/call`` answer the MCP SDK refused to read, read by the design's rules instead.

The SDK reads an answer into its pydantic models after it came, and raises
``ValidationError`` for one its models cannot hold. The server answered, so such an
answer is no broken stream: an ``input_required`` answer whose requests the SDK
could not read records ``failed`` naming them ("Input requests"), and a result
whose content holds a block the models have no type for (MCP 2026-07-28 lets any
block through the protocol's own check) is classified as sent, its other content
shown as JSON ("What a call does"), as a task's completed result is. Anything else
stays an interrupted call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from dex_agents.adapters.mcp.sent_results import SentResults, complete_result
from dex_agents.domain.mcp_conventions import (
    McpCallOutcome,
    McpCallOutcomeKind,
    classify_mcp_tool_result,
    mcp_unanswerable_input_text,
)


def refused_answer(
    error: ValidationError, sent: SentResults, *, uploads_images: bool
) -> tuple[McpCallOutcome, Mapping[str, Any] | None]:
    """What a call records for an answer the SDK refused, and the result as sent, if one.

    ``sent`` holds the answer as the server sent it when it passed the protocol's
    check of the negotiated version (``complete_result``), and ``{}`` otherwise.
    """
    requests = _unreadable_input_requests(error)
    if requests is not None:
        # The server answered that it needs input, so the call has not run: recorded
        # failed like any input request this session cannot answer ("Input requests").
        text = mcp_unanswerable_input_text(requests)
        return McpCallOutcome(kind=McpCallOutcomeKind.FAILED, text=text), None
    result = complete_result(sent)
    if result is not None:
        # The call ran and the server answered; only the SDK's models could not hold it.
        return classify_mcp_tool_result(result, uploads_images=uploads_images), result
    text = f"the MCP tool call was interrupted: {type(error).__name__}: {error}"
    return McpCallOutcome(kind=McpCallOutcomeKind.INTERRUPTED, text=text), None


def _unreadable_input_requests(error: ValidationError) -> Mapping[str, Any] | None:
    """The input requests of an ``input_required`` answer whose requests the SDK refused to
    read (``{}`` when it names none); ``None`` when the refused answer was another result."""
    for detail in error.errors():
        answer = detail.get("input")
        if isinstance(answer, Mapping) and answer.get("resultType") == "input_required":
            requests = answer.get("inputRequests")
            return requests if isinstance(requests, Mapping) else {}
    return None
