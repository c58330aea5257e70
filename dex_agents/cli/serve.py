"""``dex-agents serve``: the session console in a browser, with the demo agent running.

It serves the demo agent's sessions with one worker in this process (on the
scripted model, or the LiteLLM model ``--model`` names, with the tools of the MCP
servers ``--mcp-stdio`` and ``--mcp-url`` name, as ``chat`` takes them), shows the
sessions of every other Flow type in the file read-only, and listens on
127.0.0.1 by default. Any other host needs a token (``$DEX_AGENTS_CONSOLE_TOKEN``
or ``--token-file``): the console is a remote control for the agents.
"""

from __future__ import annotations

import os
import socket
import sys
import urllib.parse
from collections.abc import Sequence

from dex_agents.adapters.local.database_file import check_database_file
from dex_agents.cli import terminal
from dex_agents.cli.database import CHAT_LEASE_DURATION, demo_flow
from dex_agents.cli.errors import CliError
from dex_agents.cli.mcp_servers import describe_servers, mcp_tool_source
from dex_agents.cli.real_model import real_model_client

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def console_url(host: str, port: int, token: str | None) -> str:
    """The URL to open: with the token, which the page trades for a cookie."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    if host in ("0.0.0.0", "::", "[::]"):
        shown = "127.0.0.1"
    # Quoted: a token with "+", "&" or "#" would otherwise reach the page as another token.
    query = "" if token is None else f"/?token={urllib.parse.quote(token, safe='')}"
    return f"http://{shown}:{port}{query}"


async def run_serve(
    db: str | os.PathLike[str],
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    token_file: str | os.PathLike[str] | None = None,
    model: str | None = None,
    api_base: str | None = None,
    mcp_stdio: Sequence[str] = (),
    mcp_urls: Sequence[str] = (),
) -> int:
    """Serve the console of ``db`` on ``host``:``port`` until Ctrl-C; refuse an unsafe host.

    The console needs the ``console`` extra (Starlette, uvicorn); it is imported
    here, so every other command works without it. With ``model`` its worker runs the
    demo agent on that LiteLLM model, as ``chat --model`` does; ``mcp_stdio`` commands and
    ``mcp_urls`` attach MCP servers' tools, as chat's do (``mcp_tool_source``).
    """
    try:
        import uvicorn

        from dex_agents.cli.serve_setup import ServeWorkerSetup
        from dex_agents.console import close_event_streams, create_console_app
        from dex_agents.console.security import (
            TOKEN_ENV,
            ConsoleConfigError,
            is_loopback_host,
            load_console_token,
        )
    except ImportError as error:
        # --inexact: a plain `uv sync --extra X` uninstalls every other extra, so this
        # hint and the other extra's would each undo the other (serve with --model).
        raise CliError(
            f"dex-agents serve needs the console extra: uv sync --inexact --extra console ({error})"
        ) from error

    try:
        token = load_console_token(token_file)
    except ConsoleConfigError as error:
        raise CliError(str(error)) from error
    # The OS's or the codec's text alone did not say which file it was about.
    except UnicodeDecodeError as error:
        raise CliError(_unreadable_token_file(token_file, "it is not UTF-8 text")) from error
    except OSError as error:
        raise CliError(_unreadable_token_file(token_file, error.strerror or str(error))) from error
    if token is None and not is_loopback_host(host):
        raise CliError(
            f"--host {terminal.escaped(host)} is not loopback: set ${TOKEN_ENV} or pass "
            "--token-file, so only people with the token can steer the agents"
        )
    # The faults chat names in one line, found before the URL is printed: the app opens the
    # file only as it starts, where a fault was a uvicorn traceback after the URL.
    check_database_file(db, must_exist=False)
    client_model = None if model is None else real_model_client(model, api_base)
    # Checked before the socket, as chat checks it first: a bad flag is one line.
    source = mcp_tool_source(mcp_stdio, mcp_urls)
    # The session page says which model and tools turns run with, never a key (worker_setup).
    setup = ServeWorkerSetup(model, api_base, source)
    try:
        listening = _listening_socket(host, port)
        flow = demo_flow(client_model, () if source is None else (source,))
        app = create_console_app(
            db,
            [flow],
            token=token,
            workers=1,
            lease_duration=CHAT_LEASE_DURATION,
            worker_setup=setup,
        )
        # The port the socket got: --port 0 asks the OS for a free one.
        port = listening.getsockname()[1]
        print(f"dex-agents console: {console_url(host, port, token)}", file=sys.stderr, flush=True)
        if source is not None:
            for line in describe_servers(source):
                print(terminal.escaped(line), file=sys.stderr, flush=True)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", ws="none")

        class ConsoleServer(uvicorn.Server):
            async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
                # uvicorn waits for every open response before it stops, and an event
                # stream never ends by itself: end them, or Ctrl-C waits for the browsers.
                close_event_streams(app)
                await super().shutdown(sockets)

        try:
            await ConsoleServer(config).serve(sockets=[listening])
        finally:
            listening.close()
        return 0
    finally:
        # The stdio servers' processes and the URL servers' connections end with serve.
        if source is not None:
            await source.aclose()
        # After the source: its listings end as it closes, where cancelling the page's first,
        # still waited for, logged that the server's tools were left out.
        await setup.aclose()


def _unreadable_token_file(token_file: str | os.PathLike[str] | None, reason: str) -> str:
    return (
        f"the token file {terminal.escaped(os.fspath(token_file or ''))} cannot be read: {reason}"
    )


def _listening_socket(host: str, port: int) -> socket.socket:
    """A socket listening on ``host``:``port``; ``CliError`` naming why not (a port in use)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    address = host.strip("[]")
    # "::" is every address, IPv4 too, as uvicorn binds it: IPv6-only, the printed
    # http://127.0.0.1 URL (and every IPv4 browser) could not connect.
    dualstack = address == "::" and socket.has_dualstack_ipv6()
    try:
        return socket.create_server((address, port), family=family, dualstack_ipv6=dualstack)
    except OSError as error:
        raise CliError(
            f"cannot listen on {terminal.escaped(host)}:{port}: {error.strerror or error}"
        ) from error
