"""An MCP server whose resource and prompt answers hold items the MCP SDK's models cannot read.

MCP 2026-07-28 lets such items through the protocol's own check of a result: a
resource's contents with neither ``text`` nor ``blob`` (``ODD_CONTENTS``) and a
prompt message whose content is a block of a type no MCP model knows
(``ODD_MESSAGE``); with ``ITEMLESS`` set, the answers are complete results without
their items at all (``{"resultType": "complete"}``). The SDK's server builds answers
from those models too, so ``SendAsServed`` puts the items in place on the wire. Run it under ``http_server.py`` (``HttpTestServer(..., module=__name__)``).
"""

from __future__ import annotations

import os
from typing import Any

from mcp import types
from mcp.server.context import CallNext, ServerRequestContext
from mcp.server.lowlevel import Server

ODD_CONTENTS: dict[str, Any] = {"uri": "note://odd", "x-kind": "widget"}
"""The one item of every ``resources/read`` answer."""

ODD_MESSAGE: dict[str, Any] = {"role": "user", "content": {"type": "widget", "size": 3}}
"""The one message of every ``prompts/get`` answer."""


ITEMLESS = "DEX_TEST_ITEMLESS"
"""The environment variable that, set to ``1``, makes the answers hold no items."""


class SendAsServed:
    """Server middleware: the answers' items are the odd ones above, or none."""

    def __init__(self, itemless: bool) -> None:
        self._itemless = itemless

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        """The wire form ``call_next`` gives, with the items replaced."""
        # The runner sends what its outermost middleware returns without checking it again.
        result = await call_next(ctx)
        if not isinstance(result, dict):
            return result
        if self._itemless and ctx.method in ("resources/read", "prompts/get"):
            return {"resultType": "complete"}
        if ctx.method == "resources/read":
            return {**result, "contents": [ODD_CONTENTS]}
        if ctx.method == "prompts/get":
            return {**result, "messages": [ODD_MESSAGE]}
        return result


def build_server() -> Server[Any]:
    """The lowlevel server that reads any resource and gets any prompt, ``SendAsServed`` outermost."""

    async def read_resource(
        ctx: object, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=params.uri, text="")]
        )

    async def get_prompt(
        ctx: object, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        return types.GetPromptResult(messages=[])

    server = Server(
        "dex-unread-items",
        on_read_resource=read_resource,
        on_get_prompt=get_prompt,
    )
    itemless = os.environ.get(ITEMLESS) == "1"
    server.middleware.insert(0, SendAsServed(itemless))  # outermost
    return server
