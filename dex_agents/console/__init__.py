"""The session console: see every session of a database in a browser, and steer it.

``create_console_app(db, flows, token=..., authorize=...)`` is a Starlette ASGI
app; ``dex-agents serve`` runs it under uvicorn with the demo agent, and calls
``close_event_streams(app)`` when it stops, because open event streams never
end by themselves. It needs
the ``console`` extra (``starlette``, ``uvicorn``). The page is plain HTML, CSS
and JavaScript modules in ``static/`` (``console.js`` imports the rest), with no
build step. ``worker_setup=`` says what the worker runs a Flow type's turns with
(``WorkerSetup``), for the session page.
"""

from __future__ import annotations

from dex_agents.console.app import (
    Authorize,
    allow_all,
    close_event_streams,
    create_console_app,
)
from dex_agents.console.page_files import STATIC_DIR
from dex_agents.console.security import (
    CSRF_HEADER,
    TOKEN_COOKIE,
    TOKEN_ENV,
    ConsoleConfigError,
    is_loopback_host,
    load_console_token,
)
from dex_agents.console.worker_setup import ReadWorkerSetup, ToolServerSetup, WorkerSetup

__all__ = [
    "CSRF_HEADER",
    "STATIC_DIR",
    "TOKEN_COOKIE",
    "TOKEN_ENV",
    "Authorize",
    "ConsoleConfigError",
    "ReadWorkerSetup",
    "ToolServerSetup",
    "WorkerSetup",
    "allow_all",
    "close_event_streams",
    "create_console_app",
    "is_loopback_host",
    "load_console_token",
]
