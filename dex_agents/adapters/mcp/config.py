"""The servers an ``McpToolSource`` talks to; configure them on the Worker only.

A stdio server's command runs with the Worker's privileges, so never build these
from Flow input, a user message or a browser.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TypeAlias
from urllib.parse import unquote_plus, urlsplit, urlunsplit

import attrs

from dex_agents.domain.secrets import REDACTED, names_a_credential, redact_secrets


def _str_tuple(value: Iterable[str]) -> tuple[str, ...]:
    # A string is iterable too: args="/srv/reports" would run the server with one
    # argument per character, and fail only as a connection that never opened.
    if isinstance(value, str | bytes):
        raise TypeError(f"an MCP server's args must be a sequence of strings, not {value!r}")
    args = tuple(value)
    for arg in args:
        if not isinstance(arg, str):
            raise TypeError(f"an MCP server's args must be strings, not {arg!r}")
    return args


def _redacted(value: Mapping[str, str] | None) -> str:
    # Headers and environments carry credentials (Authorization, GITHUB_TOKEN), which
    # never reach a repr; other entries stay, so a repr still tells configs apart.
    return "None" if value is None else repr(redact_secrets(dict(value)))


def _redacted_url(url: str) -> str:
    # A URL carries credentials too: its user info (https://user:pw@host, or a token
    # as the user) or a query parameter (?api_key=...); only those are replaced.
    try:
        parts = urlsplit(url)
    except ValueError:
        return repr(url)
    _, at, host = parts.netloc.rpartition("@")
    netloc = f"{REDACTED}@{host}" if at else parts.netloc
    pairs = []
    for pair in parts.query.split("&") if parts.query else []:
        name, equals, _ = pair.partition("=")
        pairs.append(
            f"{name}={REDACTED}" if equals and names_a_credential(unquote_plus(name)) else pair
        )
    return repr(urlunsplit(parts._replace(netloc=netloc, query="&".join(pairs))))


def _name(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"an MCP server's name must be a non-empty string, not {value!r}")


@attrs.frozen(kw_only=True)
class McpStdioServerConfig:
    """A server run as a subprocess for every request, spoken to over its stdin and stdout.

    ``env`` entries are merged over the SDK's default environment; the ``repr``
    shows a credential's value (``domain.secrets``) as ``<redacted>``. With
    ``trusts_tool_annotations=False`` the server's annotations and Dex ``_meta``
    keys are ignored: its tools keep the session default unless a policy names them.
    """

    name: str = attrs.field(validator=_name)
    command: str
    args: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    env: Mapping[str, str] | None = attrs.field(default=None, repr=_redacted)
    cwd: str | None = None
    trusts_tool_annotations: bool = True


@attrs.frozen(kw_only=True)
class McpStreamableHttpServerConfig:
    """A Streamable HTTP server; every request opens a new HTTP connection with ``headers``.

    The ``repr`` shows a credential header's value (``domain.secrets``), the URL's user
    info and the value of a query parameter that names a credential (``?api_key=``)
    as ``<redacted>``.
    """

    name: str = attrs.field(validator=_name)
    url: str = attrs.field(repr=_redacted_url)
    headers: Mapping[str, str] = attrs.field(factory=dict, repr=_redacted)
    trusts_tool_annotations: bool = True


McpServerConfig: TypeAlias = McpStdioServerConfig | McpStreamableHttpServerConfig
"""Either kind of server."""


def check_server_configs(servers: Sequence[McpServerConfig]) -> tuple[McpServerConfig, ...]:
    """The servers in order; ``TypeError`` for another value, ``ValueError`` for a repeated name."""
    checked = tuple(servers)
    seen: set[str] = set()
    for server in checked:
        if not isinstance(server, McpStdioServerConfig | McpStreamableHttpServerConfig):
            raise TypeError(
                "McpToolSource takes McpStdioServerConfig or McpStreamableHttpServerConfig "
                f"values, not {type(server).__name__}"
            )
        if server.name in seen:
            raise ValueError(f"two MCP servers are named {server.name!r}")
        seen.add(server.name)
    return checked
