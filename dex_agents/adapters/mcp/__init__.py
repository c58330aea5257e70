"""The MCP adapter: ``McpToolSource`` offers MCP servers' tools as agent tools.

It does the I/O of "MCP tools (dex_agents.mcp)" with the MCP SDK: ``config``
(the servers), ``connection`` (one new connection per request), ``listing`` (the
per-Worker cache of each server's tools), ``held_listing`` (a call's connection
answered with that cache), ``tools`` (``McpTool``, names, policies
and stored references), ``calls`` (one ``tools/call`` and what it records),
``tasks`` (the tasks extension on the wire), ``task_polls`` (``PollToolTask``'s
poll of a Streamable HTTP task and ``cancel_turn``'s ``tasks/cancel``), ``images``
(image content through a media store), ``resources`` (the resource and prompt
tools) and ``source`` (the ``ToolSource``). The rules themselves live in
``dex_agents.domain.mcp_naming``, ``mcp_conventions``, ``mcp_tasks`` and
``tool_declarations``.
"""
