"""``dex-agents chat --mcp-stdio`` and ``--mcp-url``: the demo agent with a real MCP server's tools.

The chat runs as a real process on a model served by ``ProviderServer``, with the
MCP adapter tests' server attached over stdio and over Streamable HTTP on
loopback. Without the ``mcp`` extra a flag is one line naming ``dex-agents[mcp]``.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from dex_agents.cli.main import main
from dex_agents.cli.mcp_servers import mcp_tool_source, stdio_server_name, url_server_name
from tests.adapters.litellm.provider_scripts import (
    function_call_item,
    message_item,
    responses_reply,
)
from tests.adapters.litellm.provider_server import ProviderServer
from tests.adapters.mcp.http_server import HttpTestServer
from tests.cli.cli_support import ROOT
from tests.cli.test_cli_model import chat_env, run_chat

SERVER_SCRIPT = ROOT / "tests" / "adapters" / "mcp" / "mcp_test_server.py"
ANSWER = "Both notes say hello."


async def test_the_model_calls_tools_of_a_stdio_and_an_http_server(tmp_path: Path) -> None:
    command = shlex.join([sys.executable, str(SERVER_SCRIPT)])
    with HttpTestServer({}) as http:
        http_name = url_server_name(http.url)
        async with ProviderServer() as provider:
            provider.script(
                responses_reply(
                    [
                        function_call_item(
                            "fc_1", "call_1", "mcp_test_server__read_note", '{"name": "a"}'
                        )
                    ]
                ),
                responses_reply(
                    [
                        function_call_item(
                            "fc_2", "call_2", f"{http_name}__read_note", '{"name": "b"}'
                        )
                    ]
                ),
                responses_reply([message_item("msg_1", ANSWER)]),
            )
            code, out, err = await run_chat(
                [
                    "--db",
                    str(tmp_path / "chat.sqlite3"),
                    "--model",
                    "openai/gpt-5-mini",
                    "--api-base",
                    provider.url + "/v1",
                    "--mcp-stdio",
                    command,
                    "--mcp-url",
                    http.url,
                ],
                "read notes a and b\n/quit\n",
                chat_env(OPENAI_API_KEY="local-test-key"),
            )
            assert code == 0, err
            provider.assert_script_used()
            first, _, last = provider.requests
    assert f"mcp: mcp_test_server: {command}" in out
    assert f"mcp: {http_name}: {http.url}" in out
    assert ANSWER in out
    offered = [tool["name"] for tool in first.body["tools"]]
    assert "mcp_test_server__read_note" in offered
    assert f"{http_name}__read_note" in offered
    results = json.dumps(last.body["input"])
    assert "note a: hello" in results
    assert "note b: hello" in results


async def test_a_server_that_cannot_be_listed_is_one_warning_line_not_a_traceback(
    tmp_path: Path,
) -> None:
    # The demo model answers without the server's tools; the listing's warning, logged
    # with its traceback, was printed whole into the chat.
    code, out, err = await run_chat(
        ["--db", str(tmp_path / "chat.sqlite3"), "--mcp-stdio", "no-such-mcp-server"],
        "where is order 7\n/quit\n",
        chat_env(),
    )

    assert code == 0, err
    assert "agent> Done. lookup_order:" in out
    assert "Traceback" not in out + err
    (warning,) = err.splitlines()
    assert warning.startswith(
        "dex-agents: warning: MCP server 'no-such-mcp-server' could not be listed; its tools "
        "are left out for 30.0 seconds: could not connect to MCP server 'no-such-mcp-server'"
    )


@pytest.mark.parametrize(
    ("flag", "value"), [("--mcp-stdio", "mcp-server-time"), ("--mcp-url", "http://127.0.0.1:1/mcp")]
)
def test_without_the_extra_a_flag_is_one_line_naming_it(
    tmp_path: Path, flag: str, value: str
) -> None:
    db = tmp_path / "chat.sqlite3"
    program = (
        "import sys\n"
        "sys.modules['mcp'] = None  # import mcp now raises ImportError\n"
        "from dex_agents.cli.main import main\n"
        f"raise SystemExit(main(['chat', '--db', {str(db)!r}, {flag!r}, {value!r}]))\n"
    )
    finished = subprocess.run(
        [sys.executable, "-c", program],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert finished.returncode == 1
    assert finished.stdout == ""
    assert finished.stderr.splitlines() == [
        f'dex-agents: error: {flag} needs the mcp extra: pip install "dex-agents[mcp]"'
    ]
    assert not db.exists()


@pytest.mark.parametrize(
    ("flag", "value", "error"),
    [
        ("--mcp-stdio", "", "--mcp-stdio needs a command"),
        ("--mcp-stdio", "server 'unclosed", "is not a command line"),
        ("--mcp-url", "ftp://example.com/mcp", "is not an http:// or https:// URL"),
        # urllib's own text alone named neither the flag nor the URL.
        ("--mcp-url", "http://127.0.0.1:99999/mcp", "--mcp-url 'http://127.0.0.1:99999/mcp' is"),
        ("--mcp-url", "http://127.0.0.1:port/mcp", "--mcp-url 'http://127.0.0.1:port/mcp' is"),
        ("--mcp-url", "http://[::1/mcp", "--mcp-url 'http://[::1/mcp' is not a URL"),
    ],
)
def test_a_bad_flag_is_one_line_before_the_chat_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, error: str
) -> None:
    db = tmp_path / "chat.sqlite3"
    assert main(["chat", "--db", str(db), flag, value]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert error in line
    assert not db.exists()


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ("python tests/adapters/mcp/mcp_test_server.py", "mcp_test_server"),
        ("mcp-server-files /srv/reports", "mcp-server-files"),
        ("/usr/bin/python3.11 -m pkg.notes_server", "notes_server"),
        ("npx -y @modelcontextprotocol/server-filesystem /tmp", "server-filesystem"),
        ("uvx mcp-server-fetch", "mcp-server-fetch"),
        ("docker run -i --rm mcp/time", "time"),
        ("env LOG=1 python notes.py", "notes"),
    ],
)
def test_a_stdio_server_is_named_for_what_it_runs(command: str, name: str) -> None:
    assert stdio_server_name(shlex.split(command)) == name


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("http://127.0.0.1:8000/mcp", "local_8000"),
        ("http://localhost/mcp", "local"),
        ("https://tickets.example.com/mcp", "tickets"),
        ("https://tickets.example.com:8443/mcp", "tickets_8443"),
    ],
)
def test_a_url_server_is_named_for_its_host_and_port(url: str, name: str) -> None:
    assert url_server_name(url) == name


def test_repeated_names_get_a_number_in_flag_order() -> None:
    source = mcp_tool_source(["notes --a", "notes --b"], ["http://127.0.0.1:1/mcp"] * 2)
    assert source is not None
    assert [server.name for server in source.servers] == [
        "notes",
        "notes_2",
        "local_1",
        "local_1_2",
    ]
    assert mcp_tool_source([], []) is None


def test_a_numbered_name_never_repeats_another_servers_name() -> None:
    # "notes_2" was given twice, and the chat refused: two MCP servers are named 'notes_2'.
    source = mcp_tool_source(["notes --a", "notes --b", "notes_2"], [])
    assert source is not None
    assert [server.name for server in source.servers] == ["notes", "notes_3", "notes_2"]
