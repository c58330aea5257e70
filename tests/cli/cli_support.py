"""Running ``dex-agents`` in tests: a subprocess, a read-only file system, and the database.

Every wait has a deadline; none sleeps for a fixed time.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import timedelta
from pathlib import Path

from dex_agents.app.session_client import PortableSessionClient
from dex_agents.cli.database import demo_flow
from dex_agents.cli.demo_agent import DEMO_TOOL_LOG_ENV
from dex_agents.domain.messages import MessageRole
from dex_agents.local import LocalRuntime

ROOT = Path(__file__).resolve().parents[2]
DEADLINE_SECONDS = 30.0
CLI = (sys.executable, "-m", "dex_agents.cli")


def cli_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a ``dex-agents`` subprocess: demo tools log to ``tools.log``."""
    # The chat redraws a resized prompt by whether the terminal rewraps rows, which it
    # reads from these; a test names its terminal, not the one the suite was run in.
    env = {k: v for k, v in os.environ.items() if k not in ("XTERM_VERSION", "TMUX", "STY")}
    if env.get("TERM", "").startswith(("screen", "tmux")):
        del env["TERM"]
    env[DEMO_TOOL_LOG_ENV] = str(tmp_path / "tools.log")
    return env


def tool_log(tmp_path: Path) -> list[str]:
    """Every real demo tool invocation so far, one line each."""
    path = tmp_path / "tools.log"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def run_cli(
    tmp_path: Path, *arguments: str, prefix: Sequence[str] = (), stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run ``dex-agents ARGUMENTS`` to the end (after ``prefix``, such as a namespace wrapper)."""
    return subprocess.run(
        [*prefix, *CLI, *arguments],
        cwd=ROOT,
        env=cli_env(tmp_path),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS,
    )


class Chat:
    """``dex-agents chat`` in a subprocess on pipes, read by a thread so every wait has a deadline."""

    def __init__(self, tmp_path: Path, session: str = "s1") -> None:
        self.process = subprocess.Popen(
            [*CLI, "chat", "--db", str(tmp_path / "db.sqlite3"), "--session", session],
            cwd=ROOT,
            env=cli_env(tmp_path),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.output = ""
        self._cursor = 0
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        while chunk := os.read(self.process.stdout.fileno(), 4096):
            with self._changed:
                self.output += chunk.decode("utf-8", errors="replace")
                self._changed.notify_all()

    def expect(self, text: str) -> str:
        """Wait for ``text`` after what earlier expects consumed; return the output up to it."""
        deadline = time.monotonic() + DEADLINE_SECONDS
        with self._changed:
            while (found := self.output.find(text, self._cursor)) < 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"never saw {text!r}; output:\n{self.output}")
                self._changed.wait(remaining)
            seen = self.output[self._cursor : found + len(text)]
            self._cursor = found + len(text)
            return seen

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write((line + "\n").encode())
        self.process.stdin.flush()

    def quit(self) -> int:
        self.send("/quit")
        code = self.process.wait(timeout=DEADLINE_SECONDS)
        self._close()
        return code

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=DEADLINE_SECONDS)
        self._close()

    def _close(self) -> None:
        self._reader.join(timeout=DEADLINE_SECONDS)
        for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()


@contextlib.asynccontextmanager
async def demo_sessions(db: Path, *, workers: int = 0) -> AsyncIterator[PortableSessionClient]:
    """The demo agent's sessions in ``db`` through a second ``LocalRuntime``, as another
    program (or another window) on the same file sees them."""
    flow = demo_flow()
    async with LocalRuntime(
        db, [flow], workers=workers, create=False, poll_interval=timedelta(milliseconds=20)
    ) as runtime:
        yield runtime.sessions(flow)


def pending_interrupt_ids(db: Path, session_id: str) -> list[str]:
    """The IDs of the session's pending interrupts, read by another process's client."""

    async def read() -> list[str]:
        async with demo_sessions(db) as client:
            snapshot = await client.get_agent_snapshot(session_id)
            return [interrupt.interrupt_id for interrupt in snapshot.pending_interrupts]

    return asyncio.run(read())


def user_texts(db: Path, session_id: str) -> list[str | None]:
    """The texts of the session's user messages, read by another process's client."""

    async def read() -> list[str | None]:
        async with demo_sessions(db) as client:
            snapshot = await client.get_agent_snapshot(session_id)
            return [m.text for m in snapshot.messages if m.role is MessageRole.USER]

    return asyncio.run(read())


_UNSHARE = ("unshare", "--mount", "--propagation", "private")
_READ_ONLY_BIND = 'mount --bind -o ro "$1" "$1" && shift && exec "$@"'


@functools.cache
def _can_mount_read_only() -> bool:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    probe = Path(os.environ.get("TMPDIR", "/tmp"))
    try:
        result = subprocess.run(
            [*_UNSHARE, "sh", "-c", _READ_ONLY_BIND, "sh", str(probe), "true"],
            capture_output=True,
            timeout=DEADLINE_SECONDS,
        )
    except OSError:
        return False
    return result.returncode == 0


def read_only_unavailable() -> str | None:
    """Why this machine cannot make a folder read-only for a test, or ``None`` when it can."""
    if os.geteuid() != 0:
        return None  # file modes bind a user that is not root
    if _can_mount_read_only():
        return None
    return (
        "running as root, where file modes do not stop writes, and no private mount "
        "namespace (unshare --mount) to bind a folder read-only in"
    )


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[tuple[str, ...]]:
    """``folder`` and its files read-only for a command run with the yielded prefix.

    As root, file modes do not stop writes, so the command runs in a private mount
    namespace where ``folder`` is bound read-only; the test's own view is unchanged.
    Otherwise the modes are taken away for the duration.
    """
    if os.geteuid() == 0:
        yield (*_UNSHARE, "sh", "-c", _READ_ONLY_BIND, "sh", str(folder))
        return
    modes = {path: path.stat().st_mode for path in (folder, *folder.iterdir())}
    try:
        for path in modes:
            path.chmod(0o555 if path.is_dir() else 0o444)
        yield ()
    finally:
        for path, mode in modes.items():
            path.chmod(mode)
