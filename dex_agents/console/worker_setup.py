"""What the console's worker runs a Flow type's turns with: its model and its MCP servers' tools.

A session's page shows it (``GET /api/sessions/{id}/worker``), so a person can
tell which model answers a message sent there and which tools it may call. The
page is a remote control that may be opened from another machine, so nothing
here carries a secret: a URL is shown without its user info (``<redacted>@``),
with every query value and every path part that is not a plain word ``<redacted>``
and without its fragment, and a stdio server's command line is not shown at all,
since its arguments may carry a key.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Iterable
from urllib.parse import urlsplit, urlunsplit

import attrs

from dex_agents.domain.secrets import REDACTED

_log = logging.getLogger(__name__)

# A path part shown as it is: a lowercase word (``mcp``, ``api``, ``openai``, ``@org``) or a
# version (``v1``). Anything else may be a key: hosted MCP servers put theirs in the path
# (``/api/mcp/s/<key>/mcp``), and a random key is seldom all lowercase letters.
_PLAIN_PATH_PART = re.compile(r"@?[a-z][a-z._-]{0,31}|v[0-9]{1,2}[a-z]{0,6}[0-9]{0,2}")


def _shown_path(path: str) -> str:
    return "/".join(
        part if not part or _PLAIN_PATH_PART.fullmatch(part) else REDACTED
        for part in path.split("/")
    )


def shown_url(url: str) -> str:
    """``url`` as the page may show it: scheme, host, port and path; credentials replaced.

    A URL that cannot be parsed, or has no host (``key@host:4000``, read as a scheme and
    a path), is shown as ``<redacted>`` as a whole.
    """
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - read for its ValueError: a port that is not a number
    except ValueError:
        return REDACTED
    if not parts.netloc:
        return REDACTED
    _, at, host = parts.netloc.rpartition("@")
    netloc = f"{REDACTED}@{host}" if at else parts.netloc
    # Every value, not only those named as a credential: a key is often just ?key=.
    query = "&".join(
        f"{pair.partition('=')[0]}={REDACTED}" if "=" in pair else REDACTED
        for pair in parts.query.split("&")
        if pair
    )
    path = _shown_path(parts.path)
    return urlunsplit(parts._replace(netloc=netloc, path=path, query=query, fragment=""))


def _shown_optional_url(url: str | None) -> str | None:
    return None if url is None else shown_url(url)


def _optional_names(names: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if names is None else tuple(names)


def _servers(servers: Iterable[ToolServerSetup]) -> tuple[ToolServerSetup, ...]:
    return tuple(servers)


@attrs.frozen(kw_only=True)
class ToolServerSetup:
    """One MCP server of the worker, as the session page shows it."""

    name: str
    """The server's name: the first part of its tools' names (``<server>__<tool>``)."""
    url: str | None = attrs.field(default=None, converter=_shown_optional_url)
    """A Streamable HTTP server's URL, through ``shown_url``; ``None`` for a stdio server."""
    tools: tuple[str, ...] | None = attrs.field(default=None, converter=_optional_names)
    """The names of the tools the worker offers from it, as the model sees them; empty
    when it could not be listed, ``None`` while its first listing still runs."""

    def to_json(self) -> dict[str, object]:
        """The server as the page reads it."""
        tools = None if self.tools is None else list(self.tools)
        return {"name": self.name, "url": self.url, "tools": tools}


@attrs.frozen(kw_only=True)
class WorkerSetup:
    """What this process's worker runs a Flow type's turns with."""

    model: str
    """The model, as named to the worker (a LiteLLM model such as ``openai/gpt-5-mini``)."""
    model_server: str | None = attrs.field(default=None, converter=_shown_optional_url)
    """The model server's base URL, through ``shown_url``; ``None`` for the provider's own."""
    tool_servers: tuple[ToolServerSetup, ...] = attrs.field(default=(), converter=_servers)
    """The MCP servers whose tools its turns offer, in order."""

    def to_json(self) -> dict[str, object]:
        """The setup as the page reads it."""
        return {
            "model": self.model,
            "model_server": self.model_server,
            "tool_servers": [server.to_json() for server in self.tool_servers],
        }


ReadWorkerSetup = Callable[[str], Awaitable[WorkerSetup | None]]
"""``worker_setup(flow_type)``: what this process's worker runs that Flow type's turns with,
or ``None`` when it does not say. Called for a session's page, so keep it short: a slow
listing is better shown as still running (``ToolServerSetup.tools=None``). It is cancelled
when the console starts to stop (``close_event_streams``)."""


class WorkerSetupUnreadable(Exception):
    """The application's ``worker_setup`` raised, or returned something other than a
    ``WorkerSetup`` or ``None``; its text is what the page shows, never the error's own."""


class GuardedWorkerSetup:
    """``worker_setup`` as the console's worker route calls it.

    A hook that fails raises ``WorkerSetupUnreadable`` naming the Flow type and the
    error's type only: the error's own text may hold a URL with its key, and the page may
    be open on another machine. The error itself is logged with its traceback, once
    while the same failure repeats: the page asks again with each turn and reconnect.
    """

    def __init__(self, read: ReadWorkerSetup) -> None:
        self._read = read
        self._logged: dict[str, str] = {}  # flow type -> the failure logged last

    async def __call__(self, flow_type: str) -> WorkerSetup | None:
        """``read(flow_type)``; ``WorkerSetupUnreadable`` when it fails."""
        try:
            # An object: the hook is the application's, and may return anything.
            setup: object = await self._read(flow_type)
        except Exception as error:
            self._log(flow_type, f"{type(error).__name__}: {error}", error)
            raise WorkerSetupUnreadable(
                _unreadable(flow_type, f"raised {type(error).__name__}")
            ) from error
        if setup is None or isinstance(setup, WorkerSetup):
            self._logged.pop(flow_type, None)
            return setup
        kind = type(setup).__name__
        self._log(flow_type, f"returned a {kind}, not a WorkerSetup or None", None)
        raise WorkerSetupUnreadable(_unreadable(flow_type, f"returned a {kind}"))

    def _log(self, flow_type: str, failure: str, error: Exception | None) -> None:
        if self._logged.get(flow_type) == failure:
            return
        self._logged[flow_type] = failure
        _log.error(
            "the console's worker_setup hook failed for %s: %s",
            flow_type,
            failure,
            exc_info=error,
        )


def _unreadable(flow_type: str, what: str) -> str:
    return (
        f"what the worker runs {flow_type} turns with could not be read: "
        f"the console's worker_setup hook {what} (see the console's log)"
    )
