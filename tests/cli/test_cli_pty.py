"""``dex-agents chat`` in a pseudo-terminal, as a person runs it: killed, resumed, left, raced."""

from __future__ import annotations

import asyncio
import os
import pty
import select
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.cli.cli_support import (
    CLI,
    DEADLINE_SECONDS,
    ROOT,
    cli_env,
    demo_sessions,
    pending_interrupt_ids,
    tool_log,
    user_texts,
)
from tests.cli.pty_support import Terminal

REFUND = '{"order_id": "7", "amount_cents": 1500}'
APPROVAL_PROMPT = f"approve refund_order {REFUND}? [y/n] "


def test_a_refund_approval_survives_a_kill_and_the_refund_runs_once(tmp_path: Path) -> None:
    first = Terminal(tmp_path)
    try:
        first.expect("you> ")
        first.send("refund order 7")
        first.expect("[y/n] ")
    finally:
        first.kill()
    with Terminal(tmp_path) as second:
        # The pending approval is asked again when the same command runs again.
        second.expect("[y/n] ")
        second.send("y")
        second.expect("agent> Done")
        assert second.quit() == 0
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
    with Terminal(tmp_path) as second:
        second.expect("resuming session pty in")
        exchange = second.expect("waiting for: a user message\nyou> ").splitlines()
        assert exchange[2:4] == ["last exchange:", "  you> change the address of order 7"]
        assert "  tool> update_shipping_address -> order 7 now ships to 2 New Road" in exchange
        assert second.quit() == 0
    assert tool_log(tmp_path) == ["update_shipping_address 7 2 New Road"]


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
    with Terminal(tmp_path) as second:
        second.expect("resuming session pty in")
        shown = second.expect("waiting for: a user message\nyou> ").splitlines()
        assert shown[-3:-1] == ["the last turn was cancelled", "waiting for: a user message"]
        assert second.quit() == 0
    assert tool_log(tmp_path) == []  # the refund was never approved


@pytest.mark.parametrize(
    ("leave", "code"), [("/quit", 0), ("exit", 0), ("end of input", 0), ("Ctrl-C", 130)]
)
def test_leaving_at_an_approval_prompt_decides_nothing(
    tmp_path: Path, leave: str, code: int
) -> None:
    with Terminal(tmp_path) as chat:
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
    assert len(pending_interrupt_ids(tmp_path / "db.sqlite3", "pty")) == 1
    assert tool_log(tmp_path) == []


def test_help_and_unknown_commands_are_answered_and_never_sent(tmp_path: Path) -> None:
    with Terminal(tmp_path) as chat:
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
        assert chat.quit() == 0

    assert user_texts(tmp_path / "db.sqlite3", "pty") == ["refund order 7"]
    assert tool_log(tmp_path) == []


@pytest.mark.parametrize(
    ("message", "prompt"),
    [
        ("change the address of order 7", "question> "),
        ("refund order 7", APPROVAL_PROMPT),
    ],
    ids=["question", "approval"],
)
def test_a_line_typed_while_the_turn_ran_does_not_decide_what_it_asks(
    tmp_path: Path, message: str, prompt: str
) -> None:
    with Terminal(tmp_path) as chat:
        chat.expect("you> ")
        # One write: the second line is typed while the turn runs, at the prompt below it.
        os.write(chat.master, f"{message}\nyes\n".encode())
        assert "\nyou> yes\n" in chat.expect(prompt)
        # It was sent as a message, for the next turn: never the answer to what is asked.
        assert len(pending_interrupt_ids(tmp_path / "db.sqlite3", "pty")) == 1
        assert user_texts(tmp_path / "db.sqlite3", "pty") == [message]
        assert chat.quit() == 0
    assert len(pending_interrupt_ids(tmp_path / "db.sqlite3", "pty")) == 1
    assert tool_log(tmp_path) == []


def test_keys_typed_at_a_terminal_edit_the_line_and_bytes_that_are_not_text_are_replaced(
    tmp_path: Path,
) -> None:
    with Terminal(tmp_path) as chat:
        chat.expect("you> ")
        # Erase, kill and word erase edit the line; an arrow key's sequence is not text.
        os.write(chat.master, b"nothing\x15hello \xff worx\x7fld oops\x17\x1b[D\n")
        assert "agent> Demo reply: hello \ufffd world." in chat.expect("you> ")
        assert chat.quit() == 0


def test_a_terminal_that_goes_away_at_a_prompt_ends_the_chat_with_one_line(tmp_path: Path) -> None:
    errors = tmp_path / "stderr"
    with Terminal(tmp_path, stderr=errors) as chat:
        chat.expect("you> ")
        chat.type("half typed")
        chat.expect("half typed")
        os.close(chat.master)  # the window closes: reads and mode changes fail with EIO
        chat.master = -1
        assert chat.process.wait(timeout=DEADLINE_SECONDS) == 1
    # Before, putting the terminal back in line mode failed too, with a traceback.
    assert errors.read_text(encoding="utf-8") == "dex-agents: error: [Errno 5] Input/output error\n"


def test_with_output_to_a_pipe_a_line_typed_while_the_turn_ran_does_not_approve(
    tmp_path: Path,
) -> None:
    # Typed at a terminal, shown in a pipe (dex-agents chat | tee chat.log): lines are read
    # whole, yet one typed ahead is still no answer to an approval it never saw.
    master, slave = pty.openpty()
    command = [*CLI, "chat", "--db", str(tmp_path / "db.sqlite3"), "--session", "pty"]
    process = subprocess.Popen(
        command,
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        env=cli_env(tmp_path),
        start_new_session=True,
    )
    os.close(slave)
    assert process.stdout is not None
    shown = b""

    def expect(text: bytes) -> None:
        nonlocal shown
        deadline = time.monotonic() + DEADLINE_SECONDS
        while text not in shown:
            assert process.stdout is not None
            remaining = deadline - time.monotonic()
            assert remaining > 0, shown.decode()
            if select.select([process.stdout], [], [], remaining)[0]:
                chunk = os.read(process.stdout.fileno(), 4096)
                assert chunk, shown.decode()
                shown += chunk

    try:
        expect(b"you> ")
        os.write(master, b"refund order 7\nyes\n")
        expect(b"what was typed before this approval showed was not sent; type it again\n")
        expect(APPROVAL_PROMPT.encode())
        os.write(master, b"/quit\n")
        assert process.wait(timeout=DEADLINE_SECONDS) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=DEADLINE_SECONDS)
        process.stdout.close()
        os.close(master)
    assert tool_log(tmp_path) == []


def test_a_chat_stopped_at_a_prompt_leaves_the_terminal_in_line_mode_and_resumes_the_prompt(
    tmp_path: Path,
) -> None:
    with Terminal(tmp_path) as chat:
        chat.expect("you> ")
        chat.type("where is")
        chat.expect("where is")
        assert not chat.line_mode()
        os.killpg(chat.process.pid, signal.SIGTSTP)  # Ctrl-Z
        stopped = threading.Thread(
            target=os.waitpid, args=(chat.process.pid, os.WUNTRACED), daemon=True
        )
        stopped.start()
        stopped.join(DEADLINE_SECONDS)
        assert not stopped.is_alive(), "the chat did not stop"
        # Before, the shell got a terminal that neither echoed nor read lines.
        assert chat.line_mode()
        chat.set_line_mode()  # the shell's own mode, as bash sets it when a job stops
        os.killpg(chat.process.pid, signal.SIGCONT)  # fg
        chat.expect("you> where is")  # the prompt is drawn again, keys are read again
        chat.send(" order 7")
        chat.expect("tool> lookup_order -> succeeded")
        chat.expect("you> ")
        assert chat.quit() == 0
    assert tool_log(tmp_path) == ["lookup_order 7"]
