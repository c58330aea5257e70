"""An ASGI app under uvicorn on 127.0.0.1, as a task of the test's loop."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator

import uvicorn
from starlette.applications import Starlette

STOP_DEADLINE_SECONDS = 10.0
"""How long a server may take to start, and to stop."""


@contextlib.asynccontextmanager
async def serve_with_uvicorn(app: Starlette, *, lifespan: bool = False) -> AsyncIterator[str]:
    """Serve ``app`` with uvicorn at a port the OS picks; yield its base URL.

    With ``lifespan`` the app's startup runs (a console's runtime opens) and the URL
    comes once the server has started; without, it comes at once: the socket
    listens already, so connections queue until uvicorn accepts them.
    """
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        lifespan="on" if lifespan else "off",
        log_level="warning",
        ws="none",
        http="h11",
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        if lifespan:
            async with asyncio.timeout(STOP_DEADLINE_SECONDS):
                while not server.started:
                    if task.done():
                        task.result()
                    await asyncio.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        async with asyncio.timeout(STOP_DEADLINE_SECONDS):
            await task
        sock.close()
