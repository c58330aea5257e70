"""The MCP test server of ``mcp_test_server.py`` over Streamable HTTP on loopback.

``HttpTestServer`` binds a free loopback port in the test process and serves
``build_server()`` of ``mcp_test_server.py`` (or of another module with one, such
as ``conventions_server.py``, or the ASGI app of a module's ``build_app()``, such
as ``gateway_server.py``) with uvicorn in a subprocess (``python -m
tests.adapters.mcp.http_server FD MODULE``) on that inherited listening socket. The
crash tools end the server process mid-call with ``os._exit``, so the server
runs in its own process and is started again whenever it exits; the socket
stays open in the test process, so a connection made during the restart waits
in the backlog instead of being refused, as behind a load balancer.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

ROOT = Path(__file__).resolve().parents[3]
PATH = "/mcp"
TEST_SERVER = "tests.adapters.mcp.mcp_test_server"


def free_loopback_port() -> int:
    """A loopback port nothing listens on now (a connection to it is refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class HttpTestServer:
    """The test server on ``url`` while open; ``starts`` counts its processes so far.

    ``port`` picks the port (one ``free_loopback_port`` returned, say), else any
    free one. ``env`` is added to the server processes' environment. ``module``
    names the module whose ``build_server()`` is served.
    """

    def __init__(self, env: Mapping[str, str], *, port: int = 0, module: str = TEST_SERVER) -> None:
        self._env = {**os.environ, **env}
        self._module = module
        self._socket = socket.socket()
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", port))
        self._socket.listen(64)
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}{PATH}"
        self.starts = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._supervisor = threading.Thread(target=self._supervise, daemon=True)

    def __enter__(self) -> HttpTestServer:
        self._supervisor.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stopping.set()
        with self._lock:
            process = self._process
        if process is not None:
            process.terminate()
        self._supervisor.join(timeout=30)
        self._socket.close()

    def _supervise(self) -> None:
        fd = self._socket.fileno()
        while not self._stopping.is_set():
            with self._lock:
                if self._stopping.is_set():
                    return
                self._process = subprocess.Popen(
                    [sys.executable, "-m", "tests.adapters.mcp.http_server", str(fd), self._module],
                    cwd=ROOT,
                    env=self._env,
                    pass_fds=(fd,),
                )
                self.starts += 1
            self._process.wait()


def serve(fd: int, module: str) -> None:
    """Serve ``module``'s ``build_server()`` over Streamable HTTP on the listening socket ``fd``."""
    import importlib
    import logging

    import uvicorn

    served = importlib.import_module(module)
    if hasattr(served, "build_app"):
        app = served.build_app()
    else:
        app = served.build_server().streamable_http_app(streamable_http_path=PATH)
    # Each start would log a banner into the test's output otherwise.
    logging.getLogger("mcp").setLevel(logging.WARNING)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    listening = socket.socket(fileno=fd)
    asyncio.run(uvicorn.Server(config).serve(sockets=[listening]))


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2])
