"""``dex-agents chat`` in a pseudo-terminal, as a person runs it: killed at an approval, resumed."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from dex_agents.cli.demo_agent import DEMO_TOOL_LOG_ENV

REPO = Path(__file__).resolve().parents[2]


class Terminal:
    """A ``chat`` process on a pseudo-terminal, read with deadlines."""

    def __init__(self, tmp_path: Path) -> None:
        self.master, slave = pty.openpty()
        env = {**os.environ, DEMO_TOOL_LOG_ENV: str(tmp_path / "tools.log")}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dex_agents.cli",
                "chat",
                "--db",
                str(tmp_path / "db.sqlite3"),
                "--session",
                "pty",
            ],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=REPO,
            env=env,
            start_new_session=True,
        )
        os.close(slave)
        self.output = ""

    def expect(self, text: str, seconds: float = 20) -> None:
        """Read until ``text`` appears after what was already matched."""
        deadline = time.monotonic() + seconds
        while text not in self.output:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no {text!r} in:\n{self.output}"
            ready, _, _ = select.select([self.master], [], [], remaining)
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:  # the process closed the terminal
                    chunk = b""
                assert chunk, f"the program ended before {text!r}:\n{self.output}"
                self.output += chunk.decode("utf-8", errors="replace")
        self.output = self.output[self.output.index(text) + len(text) :]

    def send(self, line: str) -> None:
        """Type a line."""
        os.write(self.master, (line + "\n").encode())

    def kill(self) -> None:
        """SIGKILL the program's process group."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        os.close(self.master)


def test_a_refund_approval_survives_a_kill_and_the_refund_runs_once(tmp_path: Path) -> None:
    first = Terminal(tmp_path)
    try:
        first.expect("you> ")
        first.send("refund order 7")
        first.expect("[y/N] ")
    finally:
        first.kill()
    second = Terminal(tmp_path)
    try:
        # The pending approval is asked again when the same command runs again.
        second.expect("[y/N] ")
        second.send("y")
        second.expect("agent> Done")
        second.send("/quit")
        assert second.process.wait(timeout=20) == 0
    finally:
        if second.process.poll() is None:
            second.kill()
        else:
            os.close(second.master)
    log = (tmp_path / "tools.log").read_text(encoding="utf-8").splitlines()
    assert log == ["refund_order 7 1500"]
