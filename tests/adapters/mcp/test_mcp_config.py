"""Server configs never show a credential in their ``repr``."""

from __future__ import annotations

import pytest

from dex_agents.domain.secrets import REDACTED
from dex_agents.mcp import McpStdioServerConfig, McpStreamableHttpServerConfig, McpToolSource

SECRET = "SECRET-VALUE"


@pytest.mark.parametrize(
    ("config", "shown"),
    [
        (
            McpStreamableHttpServerConfig(
                name="tickets",
                url="https://tickets.example/mcp",
                headers={"Authorization": f"Bearer {SECRET}", "X-Region": "eu"},
            ),
            ("'X-Region': 'eu'", f"'Authorization': '{REDACTED}'"),
        ),
        (
            McpStreamableHttpServerConfig(
                name="tickets", url="https://tickets.example/mcp", headers={"X-Api-Key": SECRET}
            ),
            (f"'X-Api-Key': '{REDACTED}'",),
        ),
        (
            McpStdioServerConfig(
                name="files", command="srv", env={"GITHUB_TOKEN": SECRET, "LANG": "C"}
            ),
            ("'LANG': 'C'", f"'GITHUB_TOKEN': '{REDACTED}'"),
        ),
    ],
    ids=["authorization header", "api key header", "token in env"],
)
def test_a_config_repr_redacts_credentials_and_keeps_the_rest(
    config: McpStdioServerConfig | McpStreamableHttpServerConfig, shown: tuple[str, ...]
) -> None:
    # Found by an audit: attrs' default repr showed header and env credentials.
    for text in (repr(config), repr(McpToolSource([config]).servers)):
        assert SECRET not in text
        for part in shown:
            assert part in text
