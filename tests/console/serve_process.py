"""``dex-agents serve`` in a subprocess on a fixed loopback port, started and stopped with deadlines."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from dex_agents.cli.demo_agent import DEMO_TOOL_LOG_ENV
from tests.console.support import CONTROL_HEADERS, eventually, snapshot

ROOT = Path(__file__).resolve().parents[2]
START_DEADLINE_SECONDS = 30.0
STOP_DEADLINE_SECONDS = 10.0


def free_port() -> int:
    """A loopback port no one listens on now (the OS's pick), for a server started after."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ServeProcess:
    """One ``dex-agents serve --db DB --port PORT`` process; demo tools log to ``tool_log``."""

    def __init__(self, db: Path, port: int, tool_log: Path, options: Sequence[str] = ()) -> None:
        """``options`` go to ``serve`` after ``--db`` and ``--port``."""
        self.url = f"http://127.0.0.1:{port}"
        self._stderr = db.with_name(f"serve-{port}.stderr")
        env = dict(os.environ)
        env[DEMO_TOOL_LOG_ENV] = str(tool_log)
        command = [sys.executable, "-m", "dex_agents.cli", "serve", "--db", str(db)]
        with self._stderr.open("ab") as stderr:
            self.process = subprocess.Popen(
                [*command, "--port", str(port), *options],
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )

    def stderr(self) -> str:
        """What the process wrote to stderr so far."""
        return self._stderr.read_text(encoding="utf-8", errors="replace")

    async def ready(self) -> None:
        """Return once the console answers; fail, with its stderr, if it exits or takes too long."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + START_DEADLINE_SECONDS
        async with httpx.AsyncClient(base_url=self.url, timeout=2.0) as client:
            while True:
                if self.process.poll() is not None:
                    raise AssertionError(f"dex-agents serve exited: {self.stderr()}")
                try:
                    if (await client.get("/api/sessions")).status_code == 200:
                        return
                except httpx.TransportError:
                    pass  # not listening yet
                if loop.time() > deadline:
                    raise AssertionError(f"dex-agents serve did not answer: {self.stderr()}")
                await asyncio.sleep(0.05)

    async def interrupt(self) -> float:
        """Stop it as Ctrl-C does (SIGINT); return how long it took to exit, failing past a deadline."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        self.process.send_signal(signal.SIGINT)
        try:
            await asyncio.to_thread(self.process.wait, STOP_DEADLINE_SECONDS)
        except subprocess.TimeoutExpired as error:
            raise AssertionError(
                f"dex-agents serve still runs {STOP_DEADLINE_SECONDS} s after SIGINT: "
                f"{self.stderr()}"
            ) from error
        return loop.time() - started

    def kill(self) -> None:
        """Make sure the process is gone (after a failed test, so it never outlives the run)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(STOP_DEADLINE_SECONDS)


async def message_sent_in_console(
    folder: Path,
    options: Sequence[str],
    message: str,
    done: Callable[[dict[str, Any]], bool],
    within: float = 15.0,
) -> tuple[dict[str, Any], str]:
    """Start session ``s`` with ``message`` through the console of a ``serve`` given
    ``options`` (its file and logs in ``folder``); its snapshot once ``done`` holds, and
    serve's standard error."""
    serve = ServeProcess(folder / "db.sqlite3", free_port(), folder / "tools.log", options)
    try:
        await serve.ready()
        async with httpx.AsyncClient(base_url=serve.url) as client:
            started = await client.post(
                "/api/sessions",
                json={"session_id": "s", "message": message},
                headers=CONTROL_HEADERS,
            )
            assert started.json()["ok"] is True
            body = await eventually(lambda: snapshot(client, "s"), done, within=within)
    finally:
        serve.kill()
    return body, serve.stderr()
