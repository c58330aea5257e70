"""How ``dex-agents chat`` reads its input and leaves its terminal as it found it."""

from __future__ import annotations

import contextlib
import resource
import shutil
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.cli_support import run_cli, tool_log, user_texts
from tests.cli.pty_support import SHELL_PROMPT, Terminal
from tests.cli.terminal_screen import COLUMNS, Screen, screen, up_to_last_written


@contextlib.contextmanager
def _no_core_files() -> Iterator[None]:
    """No core file from a program that SIGQUIT ends (children inherit the limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (0, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_CORE, (soft, hard))


@contextlib.contextmanager
def _chat_stopped_in_bash(tmp_path: Path, typed: str = "where is") -> Iterator[Terminal]:
    """bash in a terminal, its job the chat stopped by Ctrl-Z with ``typed`` at its prompt."""
    with Terminal(tmp_path, shell=shutil.which("bash")) as shell:
        shell.expect(SHELL_PROMPT)
        shell.send("set -b")  # a job's change of state is told at once, not at the next prompt
        shell.expect(SHELL_PROMPT)
        shell.send(shell.command)
        shell.expect("you> ")
        shell.type(typed)
        shell.expect(typed[-20:])
        shell.type("\x1a")  # Ctrl-Z: the terminal stops the chat, the shell takes the terminal
        shell.expect(SHELL_PROMPT)
        yield shell


@pytest.mark.parametrize(
    "number", [signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT], ids=lambda number: number.name
)
def test_a_signal_that_ends_the_chat_at_a_prompt_leaves_the_terminal_in_line_mode(
    tmp_path: Path, number: signal.Signals
) -> None:
    with _no_core_files(), Terminal(tmp_path) as chat:
        chat.expect("you> ")
        chat.type("where is")
        chat.expect("where is")
        assert not chat.line_mode()
        chat.process.send_signal(number)
        # It still ends as the signal ends a program, now with the terminal put back:
        # before, the shell got a terminal that neither echoed nor read lines.
        assert chat.process.wait(timeout=30) == -number
        assert chat.line_mode()


def test_a_chat_whose_standard_input_is_closed_leaves_as_at_the_end_of_input(
    tmp_path: Path,
) -> None:
    closed_stdin = (sys.executable, "-c", _CLOSE_STDIN_THEN_RUN)
    result = run_cli(tmp_path, "chat", "--db", str(tmp_path / "db.sqlite3"), prefix=closed_stdin)
    # Before, a traceback: the chat asked a standard input that is None for its descriptor.
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.endswith("you> \n")


_CLOSE_STDIN_THEN_RUN = "import os, sys; os.close(0); os.execv(sys.argv[1], sys.argv[1:])"


@pytest.mark.parametrize(
    "key", ["\x15", "\x17" * 20, "\x7f" * 200], ids=["kill", "word erase", "erase"]
)
def test_a_wrapped_line_erased_at_once_leaves_nothing_of_itself(tmp_path: Path, key: str) -> None:
    typed = " ".join(f"word{n}" for n in range(20))  # wraps: longer than a row
    with Terminal(tmp_path) as chat:
        chat.expect("you> ")
        chat.type(typed)
        chat.expect(typed[-20:])
        chat.type(key)  # Ctrl-U, or Ctrl-W or backspace until the line is empty
        chat.type("hi")
        chat.expect("you> hi")
        rows = up_to_last_written(screen(chat.raw))
        # Before, the line's first row stayed above the prompt drawn again.
        assert rows[-2:] == ["type a message; /help lists the commands", "you> hi"]
        chat.send("\x15/quit")
        assert chat.exit_code() == 0


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash for job control")
def test_a_chat_stopped_at_a_prompt_and_killed_from_its_shell_ends(tmp_path: Path) -> None:
    with _chat_stopped_in_bash(tmp_path) as shell:
        shell.send("kill %1")  # SIGTERM, then SIGCONT to let the stopped job take it
        # Before, the chat, resumed in the background, stopped again as it set the terminal's
        # mode (SIGTTOU) instead of ending: its job stayed stopped ("Stopped (tty output)").
        shell.expect("Terminated")
        shell.send('jobs; echo "jobs listed"')
        assert "Stopped" not in shell.expect("jobs listed\n")
        shell.send("exit")
        assert shell.exit_code() == 0


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash for job control")
def test_a_chat_stopped_at_a_prompt_sent_to_the_background_and_back_reads_its_prompt(
    tmp_path: Path,
) -> None:
    with _chat_stopped_in_bash(tmp_path) as shell:
        shell.send("bg")
        # A prompt cannot read keys in the background: it stops again at once, as it sets
        # the terminal's mode. Before, it waited there, read the shell's next line ("fg")
        # itself, and after fg waited for a whole line before drawing the prompt again.
        shell.expect("Stopped")
        shell.send("fg")
        shell.expect("you> where is")
        shell.send(" order 7")
        shell.expect("tool> lookup_order -> succeeded")
        shell.expect("you> ")
        shell.send("/quit")
        shell.expect(SHELL_PROMPT)
        shell.send("exit")
        assert shell.exit_code() == 0
    assert tool_log(tmp_path) == ["lookup_order 7"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash for job control")
def test_a_wrapped_prompt_sent_to_the_background_and_back_shows_once(tmp_path: Path) -> None:
    typed = " ".join(f"word{n}" for n in range(20))  # wraps: longer than a row
    with _chat_stopped_in_bash(tmp_path, typed) as shell:
        shell.send("bg")  # continued, the prompt stops again as it sets the terminal's mode
        shell.expect("Stopped")
        shell.send("fg")
        # Continued twice (by bg, then by fg), the prompt is drawn on a fresh line, then again
        # where it is.
        shell.expect(f"you> {typed}")
        shell.expect(f"you> {typed}")
        rows = up_to_last_written(screen(shell.raw))
        prompt = f"you> {typed}"
        # Before, the second drawing erased the last row only: the first row showed twice.
        assert rows[-3].endswith("--session pty")  # fg shows the command it continues
        assert rows[-2:] == [prompt[:COLUMNS], prompt[COLUMNS:]]
        shell.send("\x15/quit")
        shell.expect(SHELL_PROMPT)
        shell.send("exit")
        assert shell.exit_code() == 0


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash for job control")
def test_a_paste_holding_a_ctrl_c_stays_in_the_line_and_a_typed_one_leaves(
    tmp_path: Path,
) -> None:
    with Terminal(tmp_path, shell=shutil.which("bash")) as shell:
        shell.expect(SHELL_PROMPT)
        shell.send(shell.command)
        shell.expect("you> ")
        shell.type("\x1b[200~where is\x03 order 7\x1b[201~")
        shell.expect("order 7")
        # Before, the terminal read the pasted Ctrl-C as the key: the chat ended, and the
        # rest of the paste went to the shell's command line.
        shell.send("")
        shell.expect("tool> lookup_order -> succeeded")
        shell.expect("you> ")
        shell.type("half typed")
        shell.expect("half typed")
        shell.type("\x03")  # typed, Ctrl-C still leaves, with the prompt as typed
        shell.expect(SHELL_PROMPT)
        shell.send("echo left with $?")
        shell.expect("left with 130")
        shell.send("exit")
        assert shell.exit_code() == 0
    assert tool_log(tmp_path) == ["lookup_order 7"]


@pytest.mark.parametrize("columns", [60, 100], ids=["narrower", "wider"])
def test_a_resized_terminal_shows_the_wrapped_prompt_drawn_again_at_its_new_width(
    tmp_path: Path, columns: int
) -> None:
    typed = " ".join(f"word{n}" for n in range(17))  # two rows at 60, 80 and 100 columns
    with Terminal(tmp_path) as chat:
        chat.expect("you> ")
        chat.type(typed)
        chat.expect(typed[-20:])
        shown = Screen()
        shown.feed(chat.raw)
        chat.resize(columns)
        shown.resize(columns)
        written = len(chat.raw)
        # Before, nothing was drawn again: narrower, the cut end of the first row was lost
        # from the screen; wider, the line stayed broken where the old width broke it.
        chat.expect(f"you> {typed}")
        shown.feed(chat.raw[written:])
        rows = up_to_last_written(shown.rows())
        prompt = f"you> {typed}"
        assert rows[-3:] == [
            "type a message; /help lists the commands",
            prompt[:columns].rstrip(),
            prompt[columns:],
        ]
        chat.send("")  # keys are still read at the new width
        chat.expect(f"agent> Demo reply: {typed}.")
        chat.send("/quit")
        assert chat.exit_code() == 0


_XTERM = {"XTERM_VERSION": "XTerm(390)"}
# GNU screen lays a wrapped line out again at a new width (4.09 was tried), and one
# started in xterm passes XTERM_VERSION on to its shells.
_SCREEN_IN_XTERM = {**_XTERM, "STY": "4242.pts-0.host", "TERM": "screen"}


@pytest.mark.parametrize(
    ("env", "rewraps"), [(_XTERM, False), (_SCREEN_IN_XTERM, True)], ids=["xterm", "screen"]
)
@pytest.mark.parametrize(
    ("columns", "words"),
    # Two rows at 80 columns: three at 50, one at 120.
    [(50, 20), (120, 14)],
    ids=["narrower", "wider"],
)
def test_a_prompt_resized_to_another_row_count_is_drawn_again_whole(
    tmp_path: Path, env: dict[str, str], rewraps: bool, columns: int, words: int
) -> None:
    # xterm cuts its rows at a new width and keeps the cursor on its row, where a terminal
    # that rewraps lays the prompt out again. The prompt was erased as the new width lays
    # it out: narrower, the row above it was erased too; wider, its first row stayed.
    # GNU screen in xterm, taken for xterm, had it erased as the old width laid it out:
    # narrower, its first row stayed; wider, the row above it was erased too.
    typed = " ".join(f"word{n}" for n in range(words))
    prompt = f"you> {typed}"
    assert len(prompt) // COLUMNS == 1
    assert len(prompt) // columns != 1
    with Terminal(tmp_path, env=env, rewraps=rewraps) as chat:
        chat.expect("you> ")
        chat.type(typed)
        chat.expect(typed[-20:])
        chat.resize(columns)
        chat.expect(typed[-20:])  # drawn again: the terminal laid the rows out already
        rows = [prompt[n : n + columns].rstrip() for n in range(0, len(prompt), columns)]
        shown = chat.expect_last_rows(rows)
        assert shown[-len(rows) - 1 :] == ["type a message; /help lists the commands", *rows]
        chat.send("")
        chat.expect(f"agent> Demo reply: {typed}.")
        assert chat.quit() == 0


@pytest.mark.parametrize(
    ("message", "prompt"),
    [
        (None, "you> "),
        ("refund order 7", '{"order_id": "7", "amount_cents": 1500}? [y/n] '),
        ("change the address of order 7", "question> "),
    ],
    ids=["message", "approval", "question"],
)
def test_ctrl_c_at_a_prompt_leaves_it_on_the_screen_as_typed(
    tmp_path: Path, message: str | None, prompt: str
) -> None:
    with Terminal(tmp_path) as chat:
        chat.expect("you> ")
        if message is not None:
            chat.send(message)
            chat.expect(prompt)
        chat.type("half typed")
        chat.expect("half typed")
        chat.interrupt()
        assert chat.process.wait(timeout=30) == 130
        rows = up_to_last_written(screen(chat.raw + chat.rest()))
        # Before, the prompt was erased: left at an approval, the person no longer saw
        # what they had left pending.
        assert rows[-1].endswith(f"{prompt}half typed")
        assert chat.line_mode()


def test_a_pasted_paragraph_is_one_message(tmp_path: Path) -> None:
    with Terminal(tmp_path) as chat:
        chat.expect("you> ")
        # What a terminal sends for a paste once the prompt asked for marks around it.
        chat.type("\x1b[200~hello\r\nthere\x1b[201~")
        chat.expect("there")
        chat.type("\r")  # Enter
        # Before, each pasted line was a message of its own, each starting a turn.
        chat.expect("agent> Demo reply: hello\nthere.")
        chat.expect("you> ")
        # Before, the sent paragraph stayed on the screen as the prompt edited it, its line
        # break escaped ("you> hello\\x0athere"), where other windows show it as lines.
        assert "\nyou> hello\nthere\n" in "\n".join(screen(chat.raw))
        chat.send("/quit")
        assert chat.exit_code() == 0

    assert user_texts(tmp_path / "db.sqlite3", "pty") == ["hello\nthere"]
