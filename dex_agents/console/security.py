"""Who may use the console: loopback or a token, and no cross-site state changes.

Pure rules over request values, so the routes only gather the values and act:

- Without a token the console answers only a loopback peer that names a
  loopback host (``localhost``, ``127.0.0.1``, ``[::1]``); the Host check stops a
  page on another site from reaching it through DNS rebinding.
- With a token every request carries it, as the cookie the console sets after
  ``/?token=...`` or as ``Authorization: Bearer ...``, compared with
  ``hmac.compare_digest``.
- Every state-changing request carries ``X-Dex-Agents-Console: 1`` (a header a
  cross-site page cannot send without a CORS preflight the console never
  answers), and its ``Origin`` and ``Sec-Fetch-Site``, when sent, name this site.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path

TOKEN_ENV = "DEX_AGENTS_CONSOLE_TOKEN"
"""The environment variable ``dex-agents serve`` reads the console token from."""

TOKEN_COOKIE = "dex_agents_console_token"
"""The cookie that carries the token after the browser opened ``/?token=...``."""

CSRF_HEADER = "x-dex-agents-console"
"""The header every state-changing request carries, with the value ``1``."""

_LOOPBACK_NAMES = frozenset({"localhost", "localhost."})


class ConsoleConfigError(ValueError):
    """The console was configured unsafely or inconsistently (a developer's mistake)."""


def check_console_token(token: str) -> str:
    """``token`` when it can travel in a header and a cookie; else ``ConsoleConfigError``.

    HTTP headers carry Latin-1 at most, and a browser sends back UTF-8 as other
    bytes, so a token outside printable ASCII would never match (or fail as the
    cookie is set): refused when the console starts rather than at the first visit.
    """
    if not token:
        raise ConsoleConfigError("the console token must not be empty")
    if not (token.isascii() and token.isprintable()):
        raise ConsoleConfigError(
            "the console token must be printable ASCII: it travels in a header and a cookie"
        )
    return token


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without brackets) is this machine only."""
    name = host.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_header_name(host_header: str) -> str:
    """The host name of a ``Host`` header value, without its port."""
    value = host_header.strip()
    if value.startswith("["):
        return value[: value.find("]") + 1] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def token_matches(expected: str, offered: str | None) -> bool:
    """Whether ``offered`` is the console token, compared in constant time."""
    if offered is None:
        return False
    return hmac.compare_digest(expected.encode("utf-8"), offered.encode("utf-8"))


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer ...`` header, or ``None``."""
    if authorization is None:
        return None
    scheme, _, value = authorization.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def cross_site_refusal(headers: Mapping[str, str], own_origin: str) -> str | None:
    """Why a state-changing request with ``headers`` may come from another site, or ``None``.

    ``headers`` has lower-case names; ``own_origin`` is ``scheme://host[:port]`` as
    the browser addressed this console.
    """
    if headers.get(CSRF_HEADER) != "1":
        return f"a state-changing request needs the header {CSRF_HEADER.title()}: 1"
    origin = headers.get("origin")
    if origin is not None and origin.rstrip("/").lower() != own_origin.lower():
        return "the request comes from another origin"
    fetch_site = headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        return "the request comes from another site"
    return None


def load_console_token(
    token_file: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """The console token: the contents of ``token_file`` when given, else ``$DEX_AGENTS_CONSOLE_TOKEN``.

    Surrounding white space is dropped; an empty token is refused with
    ``ConsoleConfigError``, because it would let anyone in, as is one outside
    printable ASCII (``check_console_token``).
    """
    if token_file is not None:
        token = Path(token_file).read_text(encoding="utf-8").strip()
        if not token:
            raise ConsoleConfigError(f"the token file {os.fspath(token_file)} is empty")
        return check_console_token(token)
    value = (os.environ if environ is None else environ).get(TOKEN_ENV)
    if value is None:
        return None
    if not value.strip():
        raise ConsoleConfigError(f"${TOKEN_ENV} is set but empty")
    return check_console_token(value.strip())
