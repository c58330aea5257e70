"""``dex-agents chat --mcp-stdio "CMD ARGS"`` and ``--mcp-url URL``: MCP servers' tools for the chat.

Each flag, repeatable, adds one server to one ``McpToolSource`` of the demo
agent, so a model (``--model``) can call real tools durably. The MCP SDK is
imported only when a flag is given: without the ``mcp`` extra the chat still
starts, and a flag is one clear line naming ``dex-agents[mcp]``.

A server's name is the first part of its tools' names (``<server>__<tool>``) and
is stored with every call, so it comes from the flag itself, not its position:
a stdio server is named for its program, or for the script or package a
launcher such as ``python``, ``npx`` or ``uvx`` runs (``python notes_server.py``
is ``notes_server``); a URL for its host's first label and its port
(``http://127.0.0.1:8000/mcp`` is ``local_8000``). A repeated name gets ``_2``,
``_3`` and so on, in flag order.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from dex_agents.cli.errors import CliError

if TYPE_CHECKING:
    from dex_agents.mcp import McpToolSource

MCP_EXTRA_HINT = 'pip install "dex-agents[mcp]"'

_LAUNCHER = re.compile(r"(python[0-9.]*|node|npx|uvx|uv|bunx|bun|deno|pipx|docker|env)(\.exe)?")
# Words a launcher takes before the thing it runs.
_LAUNCHER_WORDS = frozenset({"run", "exec", "-m", "-y", "--yes"})
_EXTENSION = re.compile(r"\.(py|pyz|js|mjs|cjs|ts|exe|sh)$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def _clean(text: str, fallback: str) -> str:
    return _UNSAFE.sub("_", text).strip("_") or fallback


def _base(word: str) -> str:
    return word.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]


def _runs(word: str) -> bool:
    return not word.startswith("-") and word not in _LAUNCHER_WORDS and "=" not in word


def stdio_server_name(words: Sequence[str]) -> str:
    """The name of a stdio server run by ``words``: its program, or what a launcher runs."""
    named, rest = words[0], list(words[1:])
    while _LAUNCHER.fullmatch(_base(named)):
        index = next((i for i, word in enumerate(rest) if _runs(word)), None)
        if index is None:
            break
        named, rest = rest[index], rest[index + 1 :]
    last = _base(named)
    if "/" not in named and "." in last and not _EXTENSION.search(last):
        last = last.rsplit(".", 1)[-1]  # a module, as in ``python -m pkg.server``
    return _clean(_EXTENSION.sub("", last), "mcp")


def url_server_name(url: str) -> str:
    """The name of the server at ``url``: its host's first label (``local`` for a loopback
    or IP address), with the port when the URL gives one."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        ipaddress.ip_address(host)
        label = "local"
    except ValueError:
        label = "local" if host == "localhost" else host.split(".", 1)[0]
    name = _clean(label, "mcp")
    return f"{name}_{parts.port}" if parts.port is not None else name


def _unique(names: Sequence[str]) -> list[str]:
    seen: dict[str, int] = {}
    unique: list[str] = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        candidate = name if seen[name] == 1 else f"{name}_{seen[name]}"
        # A numbered name may be another flag's own ("notes_2"): counted on, not repeated,
        # since two servers of one name are refused and a person cannot rename them.
        while candidate in unique or (candidate != name and candidate in names):
            seen[name] += 1
            candidate = f"{name}_{seen[name]}"
        unique.append(candidate)
    return unique


def _command_words(command: str) -> list[str]:
    try:
        words = shlex.split(command)
    except ValueError as error:
        raise CliError(f"--mcp-stdio {command!r} is not a command line: {error}") from error
    if not words:
        raise CliError("--mcp-stdio needs a command, such as --mcp-stdio 'mcp-server-time'")
    return words


def _checked_url(url: str) -> str:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - read for its ValueError: a port out of range or not a number
    except ValueError as error:
        # Left to the caller, urllib's own text ("Port out of range 0-65535") named no flag.
        raise CliError(f"--mcp-url {url!r} is not a URL: {error}") from error
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CliError(f"--mcp-url {url!r} is not an http:// or https:// URL")
    return url


def mcp_tool_source(stdio: Sequence[str], urls: Sequence[str]) -> McpToolSource | None:
    """One source with every ``--mcp-stdio`` server, then every ``--mcp-url`` server; ``None``
    with neither. ``CliError`` for a bad flag or a missing ``mcp`` extra, before any I/O."""
    if not stdio and not urls:
        return None
    commands = [_command_words(command) for command in stdio]
    checked = [_checked_url(url) for url in urls]
    try:
        from dex_agents.mcp import (
            McpStdioServerConfig,
            McpStreamableHttpServerConfig,
            McpToolSource,
        )
    except ImportError as error:
        flag = "--mcp-stdio" if stdio else "--mcp-url"
        raise CliError(f"{flag} needs the mcp extra: {MCP_EXTRA_HINT}") from error
    names = _unique(
        [stdio_server_name(words) for words in commands] + [url_server_name(u) for u in checked]
    )
    stdio_configs = [
        McpStdioServerConfig(name=name, command=words[0], args=words[1:])
        for name, words in zip(names, commands, strict=False)
    ]
    url_configs = [
        McpStreamableHttpServerConfig(name=name, url=url)
        for name, url in zip(names[len(commands) :], checked, strict=True)
    ]
    return McpToolSource([*stdio_configs, *url_configs])


def describe_servers(source: McpToolSource) -> list[str]:
    """One line per server for the chat's header: its name and what it runs or where it is."""
    from dex_agents.mcp import McpStdioServerConfig

    lines = []
    for server in source.servers:
        if isinstance(server, McpStdioServerConfig):
            where = shlex.join([server.command, *server.args])
        else:
            where = server.url
        lines.append(f"mcp: {server.name}: {where}")
    return lines
