"""``dex-agents``: chat with a durable demo agent, list sessions, and show one.

Everything runs in this process on the embedded engine over a local SQLite
file (``dex_agents.local.LocalRuntime``), so a killed ``chat`` resumes where the
durable state says it is. Errors are one line on stderr: a faulty database path
is found when the file is opened, before anyone types.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import gc
import io
import os
import sqlite3
import sys
from collections.abc import Callable, Coroutine, Sequence
from importlib import metadata
from typing import Any, NoReturn

from dex_agents.cli import terminal
from dex_agents.cli.chat import run_chat
from dex_agents.cli.errors import CliError
from dex_agents.cli.listing import run_sessions, run_show
from dex_agents.cli.log_lines import log_in_one_line
from dex_agents.cli.real_model import API_BASE_ENV, MODEL_ENV
from dex_agents.cli.serve import DEFAULT_HOST, DEFAULT_PORT, run_serve
from dex_agents.domain.errors import DexAgentsError

DEFAULT_DB = "dex-agents.sqlite3"
"""The SQLite file of every command when ``--db`` is not given."""

DEFAULT_SESSION = "demo"
"""The session of ``dex-agents chat`` when ``--session`` is not given."""

PROG = "dex-agents"

_SIGPIPE_EXIT = 128 + 13  # what a shell reports for a program that SIGPIPE ended


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, not argparse's usage block.
        self.exit(2, f"{self.prog}: error: {message}\n")


def version_text() -> str:
    """``dex-agents <version>``, from the installed package's metadata."""
    try:
        return f"{PROG} {metadata.version('dex-agents')}"
    except metadata.PackageNotFoundError:
        return f"{PROG} (version unknown: the package is not installed)"


def build_parser() -> argparse.ArgumentParser:
    """The ``dex-agents`` argument parser."""
    parser = _Parser(
        prog=PROG,
        description="Talk to a durable demo agent, no key needed. The session lives in a "
        "local SQLite file: a killed chat resumes where it was.",
    )
    parser.add_argument("--version", action="version", version=version_text())
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    db_help = f"SQLite file (default: {DEFAULT_DB})"
    chat = commands.add_parser(
        "chat",
        help="chat with the demo agent (resumes the session); /help in the chat lists commands",
        description="Chat with the demo agent. A session that exists already is resumed: "
        "the last exchange and what it waits for are shown first. In the chat, /help lists "
        "the commands; /quit, Ctrl-D or Ctrl-C leave at any prompt and decide nothing.",
    )
    chat.add_argument("--session", default=DEFAULT_SESSION, help="session ID (default: demo)")
    chat.add_argument("--db", default=DEFAULT_DB, help=f"{db_help}; created when missing")
    _add_model_arguments(chat)
    _add_mcp_arguments(chat)
    sessions = commands.add_parser(
        "sessions",
        help="list every session: ID, Flow type, what it waits for, when a Step last ran",
        description="List every session in the file, of every Flow type: its ID, Flow "
        "type, status (what it waits for), and LAST STEP (UTC), when a Step of the "
        "session was last scheduled or finished.",
    )
    sessions.add_argument("--db", default=DEFAULT_DB, help=f"{db_help}; must exist")
    show = commands.add_parser(
        "show",
        help="print a session's transcript, tools, plan, usage",
        description="Print one session's transcript, the tool calls of its running turn, "
        "its plan and its usage. Works for sessions of any agent Flow type in the file.",
    )
    show.add_argument("session", metavar="ID", help="session ID")
    show.add_argument("--db", default=DEFAULT_DB, help=f"{db_help}; must exist")
    serve = commands.add_parser(
        "serve",
        help="a web console of every session: live, with approvals, questions and steering",
        description="Serve a web console of every session in the file, running the demo "
        "agent (on --model and with --mcp-stdio/--mcp-url, as chat does: give it the model and "
        "MCP servers of the chats on the file). Binds to 127.0.0.1; any other --host needs a token "
        "($DEX_AGENTS_CONSOLE_TOKEN or --token-file).",
    )
    serve.add_argument("--db", default=DEFAULT_DB, help=f"{db_help}; created when missing")
    serve.add_argument(
        "--host", default=DEFAULT_HOST, help=f"address to listen on (default: {DEFAULT_HOST})"
    )
    serve.add_argument(
        "--port", type=_port, default=DEFAULT_PORT, help=f"port (default: {DEFAULT_PORT})"
    )
    serve.add_argument("--token-file", default=None, help="file holding the console token")
    _add_model_arguments(serve)
    _add_mcp_arguments(serve)
    return parser


def _add_mcp_arguments(command: argparse.ArgumentParser) -> None:
    """``--mcp-stdio`` and ``--mcp-url``, which ``chat`` and ``serve`` both take: the
    console's worker runs turns of the chat's sessions too, so it needs the chat's tools."""
    command.add_argument(
        "--mcp-stdio",
        action="append",
        default=[],
        metavar='"CMD ARGS"',
        help="attach the tools of an MCP server run as this command over stdio (repeatable; "
        'needs pip install "dex-agents[mcp]")',
    )
    command.add_argument(
        "--mcp-url",
        action="append",
        default=[],
        metavar="URL",
        help="attach the tools of a Streamable HTTP MCP server (repeatable; needs the mcp extra)",
    )


def _add_model_arguments(command: argparse.ArgumentParser) -> None:
    """``--model`` and ``--api-base``, which ``chat`` and ``serve`` both take: the console's
    worker runs turns of the chat's sessions too, so it needs the chat's model."""
    command.add_argument(
        "--model",
        default=os.environ.get(MODEL_ENV) or None,
        help=f"a LiteLLM model, e.g. openai/gpt-5-mini (default: ${MODEL_ENV}, else the "
        "scripted demo model); its key comes from the environment (OPENAI_API_KEY, ...)",
    )
    command.add_argument(
        "--api-base",
        default=None,
        help=f"the model server's base URL, e.g. a local OpenAI-compatible one (default: "
        f"${API_BASE_ENV}); needs --model",
    )


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0 to 65535)")
    return port


def _error_text(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return terminal.escaped(text[0]) if text else type(error).__name__


def _skip_final_collections() -> None:
    """Leave what the program holds as it exits out of the interpreter's final collections.

    Everything durable is closed and flushed before ``main`` returns. As the process
    ends the interpreter collects garbage several times, each walking every object left
    (a chat on a real model holds LiteLLM's: 366,000 objects, one second a walk on a
    busy machine), so a person who left the chat waited 2-6 s for the shell's prompt.
    Frozen at exit (``gc.freeze``), they are dropped with the process instead. Once a
    process, however often ``main`` runs in it.
    """
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``dex-agents``; errors are one line on stderr and a non-zero exit code."""
    parser = build_parser()
    arguments = parser.parse_args(argv)
    if arguments.command is None:
        parser.print_help()
        return 0
    if arguments.command in ("chat", "serve"):
        if arguments.api_base is not None and arguments.model is None:
            # Ignored, the flag left a person talking to the scripted model while they
            # thought they reached their own server.
            parser.error(f"--api-base needs --model (or ${MODEL_ENV}): a model to ask there")
        arguments.api_base = arguments.api_base or os.environ.get(API_BASE_ENV) or None
    log_in_one_line(PROG)
    _skip_final_collections()
    for stream in (sys.stdout, sys.stderr):
        # A terminal whose encoding lacks a character a model or person wrote shows it
        # as an escape; strict, printing the session failed and ended the command.
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    runs: dict[str, Callable[[], Coroutine[Any, Any, int]]] = {
        "chat": lambda: run_chat(
            arguments.db,
            arguments.session,
            model=arguments.model,
            api_base=arguments.api_base,
            mcp_stdio=arguments.mcp_stdio,
            mcp_urls=arguments.mcp_url,
        ),
        "sessions": lambda: run_sessions(arguments.db),
        "show": lambda: run_show(arguments.db, arguments.session),
        "serve": lambda: run_serve(
            arguments.db,
            arguments.host,
            arguments.port,
            token_file=arguments.token_file,
            model=arguments.model,
            api_base=arguments.api_base,
            mcp_stdio=arguments.mcp_stdio,
            mcp_urls=arguments.mcp_url,
        ),
    }
    try:
        return asyncio.run(runs[arguments.command]())
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader stopped reading (``dex-agents sessions | head``): not worth a message.
        # Point stdout at /dev/null so the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return _SIGPIPE_EXIT
    except (CliError, DexAgentsError, sqlite3.Error, OSError, ValueError) as error:
        print(f"{PROG}: error: {_error_text(error)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
