"""``dex-agents`` end to end: the chat program in a subprocess over a real SQLite file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dex_agents.cli.demo_agent import DEMO_TOOL_LOG_ENV, demo_reply
from dex_agents.domain.model_io import ModelRequest, ToolResultItem, UserTextItem

ROOT = Path(__file__).resolve().parents[2]
DEADLINE_SECONDS = 30.0
CLI = (sys.executable, "-m", "dex_agents.cli")


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env[DEMO_TOOL_LOG_ENV] = str(tmp_path / "tools.log")
    return env


def _tool_log(tmp_path: Path) -> list[str]:
    path = tmp_path / "tools.log"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


class Chat:
    """``dex-agents chat`` in a subprocess, read by a thread so every wait has a deadline."""

    def __init__(self, tmp_path: Path, session: str = "s1") -> None:
        self.process = subprocess.Popen(
            [*CLI, "chat", "--db", str(tmp_path / "db.sqlite3"), "--session", session],
            cwd=ROOT,
            env=_env(tmp_path),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._output = ""
        self._cursor = 0
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        while chunk := os.read(self.process.stdout.fileno(), 4096):
            with self._changed:
                self._output += chunk.decode("utf-8", errors="replace")
                self._changed.notify_all()

    def expect(self, text: str) -> str:
        """Wait for ``text`` after what earlier expects consumed; return the output up to it."""
        deadline = time.monotonic() + DEADLINE_SECONDS
        with self._changed:
            while (found := self._output.find(text, self._cursor)) < 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"never saw {text!r}; output:\n{self._output}")
                self._changed.wait(remaining)
            seen = self._output[self._cursor : found + len(text)]
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


def run_cli(tmp_path: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *arguments],
        cwd=ROOT,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS,
    )


def test_chat_answers_looks_up_and_refunds_after_approval(tmp_path: Path) -> None:
    chat = Chat(tmp_path)
    chat.expect("started session s1 in")
    chat.expect("you> ")
    chat.send("hello")
    assert "agent> Demo reply: hello." in chat.expect("you> ")
    chat.send("where is order 7")
    seen = chat.expect("you> ")
    assert 'agent calls lookup_order {"order_id": "7"}' in seen
    assert '"status": "shipped"' in seen
    chat.send("refund order 7 $12")
    assert '[tool] refund_order {"order_id": "7", "amount_cents": 1200} -> awaiting_approval' in (
        chat.expect('approve refund_order {"order_id": "7", "amount_cents": 1200}? [y/N] ')
    )
    chat.send("y")
    assert "agent> Done. refund_order: refunded 1200 cents on order 7" in chat.expect("you> ")
    chat.send("change the address of order 7")
    assert "agent asks: What is the new shipping address for order 7?" in chat.expect("question> ")
    chat.send("2 New Road")
    assert "order 7 now ships to 2 New Road" in chat.expect("you> ")
    chat.send("make a plan")
    chat.expect("you> ")
    assert chat.quit() == 0
    assert _tool_log(tmp_path) == [
        "lookup_order 7",
        "refund_order 7 1200",
        "update_shipping_address 7 2 New Road",
    ]

    show = run_cli(tmp_path, "show", "s1", "--db", str(tmp_path / "db.sqlite3"))
    assert show.returncode == 0, show.stderr
    assert show.stdout.startswith(
        "session s1: waiting_for_user_message, waits for a user message\ntranscript:\n"
        "  you> hello\n"
    )
    assert "  tool refund_order -> refunded 1200 cents on order 7\n" in show.stdout
    assert "plan (revision 1, active):\n  [completed] Look up order 7\n" in show.stdout
    assert "usage: 10 model calls" in show.stdout


def test_a_killed_chat_asks_the_pending_approval_again_and_refunds_once(tmp_path: Path) -> None:
    db = str(tmp_path / "db.sqlite3")
    chat = Chat(tmp_path)
    chat.expect("you> ")
    chat.send("refund order 9 $5")
    chat.expect('approve refund_order {"order_id": "9", "amount_cents": 500}? [y/N] ')
    chat.kill()

    sessions = run_cli(tmp_path, "sessions", "--db", db)
    assert sessions.returncode == 0, sessions.stderr
    assert sessions.stdout == "s1  running_tools  waits for approval of refund_order\n"

    again = Chat(tmp_path)
    again.expect("resuming session s1 in")
    again.expect('approve refund_order {"order_id": "9", "amount_cents": 500}? [y/N] ')
    again.send("y")
    assert "refunded 500 cents on order 9" in again.expect("you> ")
    assert again.quit() == 0
    assert _tool_log(tmp_path) == ["refund_order 9 500"]

    sessions = run_cli(tmp_path, "sessions", "--db", db)
    assert sessions.stdout == "s1  waiting_for_user_message  waits for a user message\n"
    show = run_cli(tmp_path, "show", "s1", "--db", db)
    assert show.stdout.count("tool refund_order -> refunded 500 cents on order 9") == 1


def _one_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize(
    ("arguments", "code", "message"),
    [
        (("show", "nope"), 1, "dex-agents: error: no DemoSupportAgent session with ID 'nope'"),
        (("chat",), 1, "dex-agents: error: "),
        (("chat", "--colour"), 2, "dex-agents: error: unrecognized arguments: --colour"),
        (("frobnicate",), 2, "dex-agents: error: argument command: invalid choice: 'frobnicate'"),
    ],
)
def test_errors_are_one_line_and_a_non_zero_exit(
    tmp_path: Path, arguments: tuple[str, ...], code: int, message: str
) -> None:
    db = tmp_path / "db.sqlite3"
    if arguments == ("show", "nope"):
        assert run_cli(tmp_path, "sessions", "--db", str(db)).returncode == 1
        chat = Chat(tmp_path)
        chat.expect("you> ")
        assert chat.quit() == 0
    else:
        db.write_bytes(b"this is not a SQLite database, just some text" * 100)
    result = run_cli(tmp_path, *arguments, "--db", str(db))
    assert result.returncode == code
    assert _one_line(result.stderr).startswith(message)
    assert "Traceback" not in result.stderr


def test_sessions_and_show_need_an_existing_database(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.sqlite3")
    for arguments in (("sessions", "--db", missing), ("show", "s1", "--db", missing)):
        result = run_cli(tmp_path, *arguments)
        assert (result.returncode, result.stderr) == (
            1,
            f"dex-agents: error: no database at {missing}\n",
        )
    assert not Path(missing).exists()


def _request(text: str, *results: ToolResultItem) -> ModelRequest:
    return ModelRequest(instructions="", items=(UserTextItem(text=text), *results))


@pytest.mark.parametrize(
    ("text", "tool", "arguments"),
    [
        ("where is order 7", "lookup_order", {"order_id": "7"}),
        ("refund order 12 $3.5", "refund_order", {"order_id": "12", "amount_cents": 350}),
        ("refund order 4", "refund_order", {"order_id": "4", "amount_cents": 1500}),
        (
            "new address for order 3",
            "ask_user",
            {"question": "What is the new shipping address for order 3?"},
        ),
    ],
)
def test_the_demo_model_calls_a_tool_on_its_keywords(
    text: str, tool: str, arguments: dict[str, object]
) -> None:
    reply = demo_reply(_request(text))
    assert [(call.name, json.loads(call.arguments)) for call in reply.tool_calls] == [
        (tool, arguments)
    ]


def test_the_demo_model_answers_plain_text_and_summarizes_results() -> None:
    assert demo_reply(_request("hi")).text == (
        "Demo reply: hi. Try 'where is order 7', 'refund order 7', "
        "'change the address of order 7' or 'make a plan'."
    )
    result = ToolResultItem(tool_call_id="c1", tool_name="lookup_order", output="found")
    assert demo_reply(_request("where is order 7", result)).text == "Done. lookup_order: found"
    answer = ToolResultItem(
        tool_call_id="c2", tool_name="ask_user", output='{"status":"answered","answer":"Elm St"}'
    )
    followup = demo_reply(_request("address of order 5", answer))
    assert [(call.name, json.loads(call.arguments)) for call in followup.tool_calls] == [
        ("update_shipping_address", {"order_id": "5", "address": "Elm St"})
    ]
