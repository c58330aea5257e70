"""Server configs never show a credential in their ``repr`` and refuse args that are not strings."""

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
            McpStreamableHttpServerConfig(
                name="tickets",
                url=f"https://bot:{SECRET}@tickets.example/mcp?team=7&api_key={SECRET}&flag",
            ),
            (f"url='https://{REDACTED}@tickets.example/mcp?team=7&api_key={REDACTED}&flag'",),
        ),
        (
            McpStdioServerConfig(
                name="files", command="srv", env={"GITHUB_TOKEN": SECRET, "LANG": "C"}
            ),
            ("'LANG': 'C'", f"'GITHUB_TOKEN': '{REDACTED}'"),
        ),
    ],
    ids=["authorization header", "api key header", "user info and key in url", "token in env"],
)
def test_a_config_repr_redacts_credentials_and_keeps_the_rest(
    config: McpStdioServerConfig | McpStreamableHttpServerConfig, shown: tuple[str, ...]
) -> None:
    # Found by an audit: attrs' default repr showed header and env credentials, and the
    # URL whole, though hosted servers often take their key in it.
    for text in (repr(config), repr(McpToolSource([config]).servers)):
        assert SECRET not in text
        for part in shown:
            assert part in text


@pytest.mark.parametrize("args", ["/srv/reports", ["/srv/reports", 3]])
def test_stdio_args_that_are_not_a_sequence_of_strings_are_refused(args: object) -> None:
    # Found by an audit: args="/srv/reports" ran the server with one argument per
    # character, and failed only as a connection that never opened.
    with pytest.raises(TypeError, match="MCP server's args must be"):
        McpStdioServerConfig(name="files", command="srv", args=args)  # type: ignore[arg-type]


def test_stdio_args_keep_their_order() -> None:
    config = McpStdioServerConfig(name="files", command="srv", args=["-v", "/srv/reports"])
    assert config.args == ("-v", "/srv/reports")
