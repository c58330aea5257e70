"""The Worker child of the MCP task crash test: ``python -m tests.adapters.mcp.task_worker``.

Its agent calls ``build_report`` on the Streamable HTTP test server at
``$MCP_TEST_TASK_URL`` once, then answers with the result.
"""

from __future__ import annotations

import os

from dex_agents import AgentSessionFlow
from dex_agents.builtin_loop import AgentDefinition, builtin_agent_session_flow
from dex_agents.mcp import McpStreamableHttpServerConfig, McpToolSource
from dex_agents.testing import run_agent_worker
from tests.adapters.mcp.session_support import calls_then_answer

URL_ENV = "MCP_TEST_TASK_URL"
REPORT_NAME = "killed"


def build_task_flow(url: str) -> AgentSessionFlow:
    """The crash test's session Flow, identical in the test process and the Worker child."""
    source = McpToolSource([McpStreamableHttpServerConfig(name="notes", url=url)])
    agent = AgentDefinition(
        name="reports",
        instructions="You build reports.",
        model=calls_then_answer(("notes__build_report", {"name": REPORT_NAME})),
        tool_sources=[source],
    )
    return builtin_agent_session_flow(agent, flow_type="McpTaskAgent")


if __name__ == "__main__":
    run_agent_worker([build_task_flow(os.environ[URL_ENV])])
