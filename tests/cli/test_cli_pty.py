"""``dex-agents chat`` in a pseudo-terminal, as a person runs it: killed, resumed, left, raced."""

from __future__ import annotations

import asyncio
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dex_agents.domain.messages import MessageRole
from tests.cli.cli_support import (
    CLI,
    DEADLINE_SECONDS,
    ROOT,
    cli_env,
    demo_sessions,
    pending_interrupt_ids,
    tool_log,
)

REFUND = '{"order_id": "7", "amount_cents": 1500}'
APPROVAL_PROMPT = f"approve refund_order {REFUND}? [y/n] "


# A foreground job starts with no signal blocked and Ctrl-C at its default. The test
# process may have either otherwise (a library's thread that blocks signals, say), and a
# child inherits both across exec, so a first program sets them as a shell does and
# then becomes the CLI. Not a preexec_fn: that makes Popen fork instead of vfork, and
# gRPC (loaded with the Dex SDK) restarts its poller in a forked child, which then
# crashed now and then on the epoll descriptor close_fds had closed (grpc/grpc#43055).
AS_A_SHELL_STARTS_A_FOREGROUND_JOB = (
    sys.executable,
    "-c",
    "import os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, []); "
    "signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])",
)


def _signal_state(pid: int) -> str:
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    except OSError:
        return ""
    return " ".join(line for line in status.splitlines() if line.startswith(("SigBlk", "SigIgn")))


class Terminal:
    """A ``chat`` process on a pseudo-terminal, read with deadlines."""

    def __init__(self, tmp_path: Path, session: str = "pty") -> None:
        self.db = tmp_path / "db.sqlite3"
        self.master, slave = pty.openpty()
        command = [*CLI, "chat", "--db", str(self.db), "--session", session]
        self.process = subprocess.Popen(
            [*AS_A_SHELL_STARTS_A_FOREGROUND_JOB, *command],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=ROOT,
            env={**cli_env(tmp_path), "PYTHONFAULTHANDLER": "1"},
            start_new_session=True,
        )
        os.close(slave)
        self.output = ""

    def expect(self, text: str) -> str:
        """Read until ``text`` appears after what was already matched; return what came
        before it and ``text`` itself, with the terminal's line ends as ``\\n``."""
        deadline = time.monotonic() + DEADLINE_SECONDS
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
                self.output += chunk.decode("utf-8", errors="replace").replace("\r\n", "\n")
        end = self.output.index(text) + len(text)
        seen, self.output = self.output[:end], self.output[end:]
        return seen

    def send(self, line: str) -> None:
        """Type a line."""
        os.write(self.master, (line + "\n").encode())

    def end_input(self) -> None:
        """Ctrl-D at the start of a line: the program reads the end of its input."""
        os.write(self.master, b"\x04")

    def interrupt(self) -> None:
        """Ctrl-C: SIGINT to the program's process group, as the terminal sends it."""
        os.killpg(self.process.pid, signal.SIGINT)

    def exit_code(self) -> int:
        """Wait for the program to end by itself; a program that hangs fails with its stacks."""
        try:
            return self.process.wait(timeout=DEADLINE_SECONDS)
        except subprocess.TimeoutExpired:
            signals = _signal_state(self.process.pid)
            # faulthandler (PYTHONFAULTHANDLER) prints every thread's stack on SIGABRT.
            self.process.send_signal(signal.SIGABRT)
            self.process.wait(timeout=DEADLINE_SECONDS)
            raise AssertionError(
                f"the program did not end ({signals}):\n{self.output}{self._rest()}"
            ) from None
        finally:
            self.close()

    def _rest(self) -> str:
        """What the program wrote that was not read yet."""
        rest = b""
        while select.select([self.master], [], [], 0.5)[0]:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                break
            if not chunk:
                break
            rest += chunk
        return rest.decode("utf-8", errors="replace")

    def kill(self) -> None:
        """SIGKILL the program's process group."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=DEADLINE_SECONDS)
        self.close()

    def close(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=DEADLINE_SECONDS)
        if self.master >= 0:
            os.close(self.master)
            self.master = -1


def test_a_refund_approval_survives_a_kill_and_the_refund_runs_once(tmp_path: Path) -> None:
    first = Terminal(tmp_path)
    try:
        first.expect("you> ")
        first.send("refund order 7")
        first.expect("[y/n] ")
    finally:
        first.kill()
    second = Terminal(tmp_path)
    try:
        # The pending approval is asked again when the same command runs again.
        second.expect("[y/n] ")
        second.send("y")
        second.expect("agent> Done")
        second.send("/quit")
        assert second.exit_code() == 0
    finally:
        second.close()
    assert tool_log(tmp_path) == ["refund_order 7 1500"]


def test_a_resumed_chat_shows_the_last_exchange_and_what_is_pending(tmp_path: Path) -> None:
    first = Terminal(tmp_path)
    try:
        first.expect("you> ")
        first.send("where is order 7")
        first.expect("you> ")
        first.send("refund order 7")
        first.expect(APPROVAL_PROMPT)
    finally:
        first.kill()
    second = Terminal(tmp_path)
    try:
        second.expect("resuming session pty in")
        assert second.expect(APPROVAL_PROMPT).splitlines()[2:] == [
            "last exchange:",
            "  you> refund order 7",
            f"  agent> calls refund_order {REFUND}",
            "tool calls of the running turn:",
            f"  tool> refund_order {REFUND} -> awaiting_approval",
            f"waiting for: approval of refund_order {REFUND}",
            APPROVAL_PROMPT,
        ]
    finally:
        second.kill()
    assert tool_log(tmp_path) == ["lookup_order 7"]


def test_a_resumed_chat_shows_the_write_that_already_ran(tmp_path: Path) -> None:
    first = Terminal(tmp_path)
    try:
        first.expect("you> ")
        first.send("change the address of order 7")
        first.expect("question> ")
        first.send("2 New Road")
        first.expect("you> ")
    finally:
        first.kill()
    second = Terminal(tmp_path)
    try:
        second.expect("resuming session pty in")
        exchange = second.expect("waiting for: a user message\nyou> ").splitlines()
        assert exchange[2:4] == ["last exchange:", "  you> change the address of order 7"]
        assert "  tool> update_shipping_address -> order 7 now ships to 2 New Road" in exchange
        second.send("/quit")
        assert second.exit_code() == 0
    finally:
        second.close()
    assert tool_log(tmp_path) == ["update_shipping_address 7 2 New Road"]


def test_a_stale_approval_answered_in_another_process_is_reported(tmp_path: Path) -> None:
    chat = Terminal(tmp_path)
    try:
        chat.expect("you> ")
        chat.send("refund order 7")
        chat.expect(APPROVAL_PROMPT)

        async def approve_elsewhere() -> bool:
            async with demo_sessions(chat.db) as sessions:
                snapshot = await sessions.get_agent_snapshot("pty")
                (interrupt,) = snapshot.pending_interrupts
                return await sessions.resolve_interrupt("pty", interrupt.interrupt_id, True)

        assert asyncio.run(approve_elsewhere())
        chat.send("y")
        chat.expect("already answered elsewhere\n")
        # Then what the other window decided, as this chat's worker carries it out.
        assert "refunded 1500 cents on order 7" in chat.expect("you> ")
        chat.send("/quit")
        assert chat.exit_code() == 0
    finally:
        chat.close()
    assert tool_log(tmp_path) == ["refund_order 7 1500"]


def test_an_approval_whose_turn_another_process_cancelled_says_so(tmp_path: Path) -> None:
    # Before, the cancelled turn had ended by the time the refusal was explained, so its
    # call had left the snapshot and the chat said "already answered elsewhere".
    chat = Terminal(tmp_path)
    try:
        chat.expect("you> ")
        chat.send("refund order 7")
        chat.expect(APPROVAL_PROMPT)

        async def cancel_elsewhere() -> bool:
            async with demo_sessions(chat.db) as sessions:
                snapshot = await sessions.get_agent_snapshot("pty")
                assert snapshot.state is not None
                turn_id = snapshot.state.active_turn_id
                assert turn_id is not None
                cancelled = await sessions.cancel_turn("pty", turn_id)
                await sessions.wait_for_user("pty")
                return cancelled

        assert asyncio.run(cancel_elsewhere())
        chat.send("y")
        shown = chat.expect("you> ")
        assert "this answer was not accepted: its turn was cancelled\n" in shown
        # Said once: the idle chat does not add "turn cancelled elsewhere" after it.
        assert "turn cancelled elsewhere" not in shown
        chat.send("/quit")
        assert chat.exit_code() == 0
    finally:
        chat.close()
    assert tool_log(tmp_path) == []


def test_a_resumed_chat_says_its_last_turn_was_cancelled(tmp_path: Path) -> None:
    # Before, it showed the last exchange and "waiting for: a user message", as after a
    # completed turn: only the Stream says the turn was cancelled.
    first = Terminal(tmp_path)
    try:
        first.expect("you> ")
        first.send("refund order 7")
        first.expect(APPROVAL_PROMPT)
    finally:
        first.kill()

    async def cancel_elsewhere() -> None:
        async with demo_sessions(first.db, workers=1) as sessions:
            snapshot = await sessions.get_agent_snapshot("pty")
            assert snapshot.state is not None
            turn_id = snapshot.state.active_turn_id
            assert turn_id is not None
            assert await sessions.cancel_turn("pty", turn_id)
            await sessions.wait_for_user("pty")

    asyncio.run(cancel_elsewhere())
    second = Terminal(tmp_path)
    try:
        second.expect("resuming session pty in")
        shown = second.expect("waiting for: a user message\nyou> ").splitlines()
        assert shown[-3:-1] == ["the last turn was cancelled", "waiting for: a user message"]
        second.send("/quit")
        assert second.exit_code() == 0
    finally:
        second.close()
    assert tool_log(tmp_path) == []  # the refund was never approved


@pytest.mark.parametrize(
    ("leave", "code"), [("/quit", 0), ("exit", 0), ("end of input", 0), ("Ctrl-C", 130)]
)
def test_leaving_at_an_approval_prompt_decides_nothing(
    tmp_path: Path, leave: str, code: int
) -> None:
    chat = Terminal(tmp_path)
    try:
        chat.expect("you> ")
        chat.send("refund order 7")
        chat.expect(APPROVAL_PROMPT)
        if leave == "end of input":
            chat.end_input()
        elif leave == "Ctrl-C":
            chat.interrupt()
        else:
            chat.send(leave)
        assert chat.exit_code() == code
    finally:
        chat.close()
    assert len(pending_interrupt_ids(tmp_path / "db.sqlite3", "pty")) == 1
    assert tool_log(tmp_path) == []


def test_help_and_unknown_commands_are_answered_and_never_sent(tmp_path: Path) -> None:
    chat = Terminal(tmp_path)
    try:
        chat.expect("you> ")
        chat.send("/help")
        assert "  /quit       leave, deciding nothing" in chat.expect("you> ")
        chat.send("/frob now")
        assert chat.expect("you> ").endswith(
            "unknown command /frob; /help lists the commands\nyou> "
        )
        chat.send("help")
        chat.expect("commands (at every prompt):")
        chat.expect("you> ")
        chat.send("refund order 7")
        chat.expect(APPROVAL_PROMPT)
        chat.send("/help")
        assert "at this approval: y or yes approves, n or no rejects" in chat.expect(
            APPROVAL_PROMPT
        )
        chat.send("/refund")
        chat.expect("unknown command /refund; /help lists the commands\n")
        chat.expect(APPROVAL_PROMPT)
        chat.send("/quit")
        assert chat.exit_code() == 0
    finally:
        chat.close()

    async def user_texts() -> list[str | None]:
        async with demo_sessions(tmp_path / "db.sqlite3") as sessions:
            snapshot = await sessions.get_agent_snapshot("pty")
            return [m.text for m in snapshot.messages if m.role is MessageRole.USER]

    assert asyncio.run(user_texts()) == ["refund order 7"]
    assert tool_log(tmp_path) == []


@pytest.mark.parametrize(
    ("message", "what", "prompt"),
    [
        ("change the address of order 7", "question", "question> "),
        ("refund order 7", "approval", APPROVAL_PROMPT),
    ],
)
def test_a_line_typed_while_the_turn_ran_does_not_decide_what_it_asks(
    tmp_path: Path, message: str, what: str, prompt: str
) -> None:
    chat = Terminal(tmp_path)
    try:
        chat.expect("you> ")
        # One write: the second line waits in the terminal while the turn runs.
        os.write(chat.master, f"{message}\nyes\n".encode())
        assert f"what was typed before this {what} showed was not sent; type it again\n" in (
            chat.expect(prompt)
        )
        assert len(pending_interrupt_ids(tmp_path / "db.sqlite3", "pty")) == 1
        chat.send("/quit")
        assert chat.exit_code() == 0
    finally:
        chat.close()
    assert len(pending_interrupt_ids(tmp_path / "db.sqlite3", "pty")) == 1
    assert tool_log(tmp_path) == []
