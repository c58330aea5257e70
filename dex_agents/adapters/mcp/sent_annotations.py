"""A tool's ``annotations`` as the server sent them, for classifying it ("Effects").

The SDK reads a listing into pydantic models that convert a hint in lax mode, so a
server's ``"readOnlyHint": "true"`` (or ``1``) became ``true`` and a write was
offered as a ``read`` that runs without approval. The Effects rules count only JSON
``true`` and ``false``; any other value is an absent hint. ``keep_sent_annotations``
makes a listing connection read each ``tools/list`` page as ``SentToolsPage``, the
SDK's own result type whose tools also keep their annotations as sent, and
``offered_definition`` gives the definition the source classifies with them. The
SDK's handling of the listing (its checks, the tools it drops) is unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from mcp import Client
from mcp_types import ListToolsResult, Tool
from pydantic import ModelWrapValidatorHandler, PrivateAttr, model_validator


class SentTool(Tool):
    """A listed ``Tool`` that also holds its ``annotations`` as they came on the wire."""

    _sent_annotations: object = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_sent(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        tool = handler(data)
        if isinstance(data, Mapping):
            tool._sent_annotations = data.get("annotations")
        return tool


class SentToolsPage(ListToolsResult):
    """A ``tools/list`` page whose tools are ``SentTool``."""

    tools: list[SentTool]  # type: ignore[assignment]  # a subclass of the SDK's items


def keep_sent_annotations(client: Client) -> None:
    """Read this connection's ``tools/list`` pages as ``SentToolsPage``."""
    send = client.session.send_request

    async def send_request(request: Any, result_type: Any, *args: Any, **kwargs: Any) -> Any:
        if result_type is ListToolsResult:
            result_type = SentToolsPage
        return await send(request, result_type, *args, **kwargs)

    # The SDK takes no result type for ``list_tools``; ``send_request`` is the public
    # method it reads every result with, so this connection's session gets one that
    # reads a listing with the type above.
    client.session.send_request = send_request  # type: ignore[method-assign]


def offered_definition(tool: Tool) -> dict[str, Any]:
    """``tool``'s definition as JSON, with its annotations as sent when it is a ``SentTool``."""
    definition = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
    if isinstance(tool, SentTool):
        sent = tool._sent_annotations
        if isinstance(sent, Mapping):
            definition["annotations"] = dict(sent)
    return definition
