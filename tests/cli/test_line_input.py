"""The chat's key-by-key prompts (``TerminalInput``) in this process, on a pseudo-terminal.

Here a test can end a prompt at an instant a chat in a subprocess only reaches by
chance: between the prompt reading a key and going on with it.
"""

from __future__ import annotations

import asyncio
import os
import pty
import select
import signal
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator

import pytest

from dex_agents.cli import prompts
from dex_agents.cli.line_editing import BRACKETED_PASTE_ON
from dex_agents.cli.line_input import TerminalInput
from dex_agents.domain.interrupts import AgentInterrupt, InterruptKind
from tests.cli.cli_support import DEADLINE_SECONDS

APPROVAL = AgentInterrupt(
    interrupt_id="call-1",
    tool_call_id="call-1",
    tool_name="refund_order",
    kind=InterruptKind.APPROVAL,
    turn_id="turn-1",
    arguments='{"order_id": "7"}',
)


@pytest.fixture
def terminal() -> Iterator[tuple[int, int]]:
    """A pseudo-terminal: its master, where the test types, and the prompts' side."""
    master, slave = pty.openpty()
    try:
        yield master, slave
    finally:
        os.close(master)
        os.close(slave)


async def _shown(capsys: pytest.CaptureFixture[str], text: str, seen: list[str]) -> None:
    """Go round the event loop, one pass at a time, until the prompts wrote ``text``;
    ``seen`` collects what they wrote."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while text not in "".join(seen):
        assert time.monotonic() < deadline, f"no {text!r} in {''.join(seen)!r}"
        await asyncio.sleep(0)
        seen.append(capsys.readouterr().out)


async def test_a_line_entered_as_the_turn_ends_at_an_approval_is_said_to_come_back_unsent(
    terminal: tuple[int, int], capsys: pytest.CaptureFixture[str]
) -> None:
    master, slave = terminal
    lines = TerminalInput(slave)
    seen: list[str] = []
    below = asyncio.create_task(prompts.ask_message(lines, during_turn=True))
    os.write(master, b"and the invoice\r")
    # The pass that read the line (and its Enter) wrote it: cancelled on the next pass, the
    # prompt below the turn ends before it goes on with the Enter, as when the turn ended
    # at an approval in the same instant.
    await _shown(capsys, "and the invoice", seen)
    below.cancel()
    await asyncio.gather(below, return_exceptions=True)
    seen.clear()
    asking = asyncio.create_task(prompts.ask_approval(lines, APPROVAL))
    await _shown(capsys, "[y/n] ", seen)
    os.write(master, b"n\r")
    assert await asking is False
    said = "".join(seen)
    # Before, the approval said to type the line again, and it came back all the same.
    assert "type it again" not in said
    assert "the line entered as this approval showed was not sent" in said
    seen.clear()
    after = asyncio.create_task(prompts.ask_message(lines, during_turn=True))
    await _shown(capsys, "you> and the invoice", seen)
    os.write(master, b"\r")
    assert await after == "and the invoice"


async def test_keys_typed_as_one_prompt_hands_over_to_the_next_are_the_next_prompts(
    terminal: tuple[int, int], capsys: pytest.CaptureFixture[str]
) -> None:
    master, slave = terminal
    lines = TerminalInput(slave)
    seen: list[str] = []
    with lines.keys_held():
        below = asyncio.create_task(prompts.ask_message(lines, during_turn=True))
        await _shown(capsys, BRACKETED_PASTE_ON, seen)  # it reads keys
        os.write(master, b"half typed")
        await _shown(capsys, "half typed", seen)
        below.cancel()  # the turn ended: what was typed comes back at the message prompt
        await asyncio.gather(below, return_exceptions=True)
        # Typed before the message prompt opens, as a person who saw the turn end types.
        os.write(master, b"\x15/quit\r")
        # The terminal takes them in the mode it is in now, not in the next prompt's: it
        # does so a moment after they are written, which the prompt would otherwise beat.
        assert select.select([slave], [], [], DEADLINE_SECONDS)[0], "the keys never arrived"
        # Before, the terminal, back in its line mode, echoed the keys and took the Ctrl-U
        # as its own: 'half typed/quit' was sent.
        assert await asyncio.wait_for(prompts.ask_message(lines), DEADLINE_SECONDS) is None
    echoed = os.read(master, 4096) if select.select([master], [], [], 0)[0] else b""
    assert echoed == b"", "the terminal echoed what was typed"
    local_modes = termios.tcgetattr(slave)[3]  # put back in its line mode as it ends
    assert local_modes & termios.ICANON
    assert local_modes & termios.ECHO


# A child of its own process group: a Ctrl-C the prompts read signals their job only.
_CTRL_C_AS_AN_APPROVAL_OPENS = """
import asyncio, os, pty, signal, sys
from dex_agents.cli import prompts
from dex_agents.cli.line_input import TerminalInput
from dex_agents.domain.interrupts import AgentInterrupt, InterruptKind

signal.pthread_sigmask(signal.SIG_SETMASK, [])
signal.signal(signal.SIGINT, signal.default_int_handler)
APPROVAL = AgentInterrupt(
    interrupt_id="call-1", tool_call_id="call-1", tool_name="refund_order",
    kind=InterruptKind.APPROVAL, turn_id="turn-1", arguments="{}",
)

async def main() -> None:
    master, slave = pty.openpty()
    lines = TerminalInput(slave)
    with lines.keys_held():
        below = asyncio.create_task(prompts.ask_message(lines, during_turn=True))
        await asyncio.sleep(0)  # one pass: the prompt below the turn reads keys
        below.cancel()  # the turn ended at an approval
        await asyncio.gather(below, return_exceptions=True)
        os.write(master, b"\\x03")  # Ctrl-C, before the approval's prompt opens
        asking = asyncio.create_task(prompts.ask_approval(lines, APPROVAL))
        await asyncio.sleep(0)
        os.write(master, b"n\\r")
        print("decided:", await asking, flush=True)

asyncio.run(main())
"""


def test_ctrl_c_typed_as_an_approval_opens_leaves_the_chat() -> None:
    child = subprocess.run(
        [sys.executable, "-c", _CTRL_C_AS_AN_APPROVAL_OPENS],
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS,
        start_new_session=True,
        check=False,
    )
    # Before, the approval dropped it with what else was typed ahead, and asked on.
    assert "decided:" not in child.stdout
    assert "KeyboardInterrupt" in child.stderr


# On the test's terminal, the prompts' job as the shell runs it: a group of its own that
# a Ctrl-Z stops (the parent, the test, is in another group of the same session).
_CTRL_Z_AS_AN_APPROVAL_OPENS = """
import asyncio, select, signal
from dex_agents.cli import prompts
from dex_agents.cli.line_input import TerminalInput
from dex_agents.domain.interrupts import AgentInterrupt, InterruptKind

signal.pthread_sigmask(signal.SIG_SETMASK, [])
APPROVAL = AgentInterrupt(
    interrupt_id="call-1", tool_call_id="call-1", tool_name="refund_order",
    kind=InterruptKind.APPROVAL, turn_id="turn-1", arguments="{}",
)

async def main() -> None:
    lines = TerminalInput(0)
    with lines.keys_held():
        below = asyncio.create_task(prompts.ask_message(lines, during_turn=True))
        await asyncio.sleep(0)  # one pass: the prompt below the turn reads keys
        below.cancel()  # the turn ended at an approval
        await asyncio.gather(below, return_exceptions=True)
        print("turn ended", flush=True)
        select.select([0], [], [])  # Ctrl-Z, typed before the approval's prompt opens
        print("decided:", await prompts.ask_approval(lines, APPROVAL), flush=True)

asyncio.run(main())
"""


def _read_until(master: int, text: bytes, read: bytearray) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while text not in read:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"no {text!r} in {bytes(read)!r}"
        if select.select([master], [], [], remaining)[0]:
            read += os.read(master, 4096)


def _line_mode(fd: int) -> bool:
    local_modes = termios.tcgetattr(fd)[3]
    return bool(local_modes & termios.ICANON) and bool(local_modes & termios.ECHO)


def test_ctrl_z_typed_as_an_approval_opens_gives_the_shell_its_mode_and_fg_the_prompt_keys(
    terminal: tuple[int, int],
) -> None:
    master, slave = terminal
    child = subprocess.Popen(
        [sys.executable, "-c", _CTRL_Z_AS_AN_APPROVAL_OPENS],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        process_group=0,
    )
    try:
        read = bytearray()
        _read_until(master, b"turn ended", read)
        os.write(master, b"\x1a")
        stopped = threading.Thread(target=os.waitpid, args=(child.pid, os.WUNTRACED), daemon=True)
        stopped.start()
        stopped.join(DEADLINE_SECONDS)
        assert not stopped.is_alive(), "the Ctrl-Z did not stop the prompts' job"
        # Before, the shell got a terminal that neither echoed nor read lines.
        assert _line_mode(slave)
        modes = termios.tcgetattr(slave)  # the shell's own mode, as bash sets it at a stop
        modes[0] |= termios.ICRNL
        modes[3] |= termios.ICANON | termios.ECHO | termios.ISIG
        termios.tcsetattr(slave, termios.TCSANOW, modes)
        os.killpg(child.pid, signal.SIGCONT)  # fg
        _read_until(master, b"[y/n] ", read)
        # Before, the approval read in the mode bash puts back as a job stops: the
        # terminal echoed what was typed, beside the prompt's own drawing of it.
        assert not _line_mode(slave)
        os.write(master, b"n\r")
        _read_until(master, b"decided: False", read)
        assert child.wait(timeout=DEADLINE_SECONDS) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=DEADLINE_SECONDS)


# The prompts on a terminal of their own as standard output, as the chat's are, so that
# they lay out their rows at its width; what they wrote is drawn as xterm shows it.
_RESIZED_BETWEEN_PROMPTS = """
import asyncio, fcntl, os, pty, select, signal, struct, sys, termios
from dex_agents.cli import prompts
from dex_agents.cli.line_input import TerminalInput
from tests.cli.terminal_screen import Screen, up_to_last_written

master, slave = pty.openpty()
report = os.fdopen(os.dup(1), "w")
os.dup2(slave, 1)
sys.stdout = open(1, "w", closefd=False)
written = bytearray()
resized_at = []

def resize(columns):
    resized_at.append((len(written), columns))
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))

async def shown(text, times=1):
    while written.count(text) < times:
        await asyncio.sleep(0.01)  # the prompt writes as the loop goes round
        while select.select([master], [], [], 0)[0]:
            written.extend(os.read(master, 65536))

async def main():
    resize(80)
    lines = TerminalInput(slave)
    with lines.keys_held():
        first = asyncio.create_task(prompts.ask_message(lines))
        await shown(b"you> ")
        os.write(master, b"hello\\r")
        assert await first == "hello"
        resize(50)  # between two prompts: neither has its handler
        typed = " ".join(f"word{n}" for n in range(20))  # 2 rows at 80, 3 at 50, 2 at 120
        second = asyncio.create_task(prompts.ask_message(lines))
        os.write(master, typed.encode())
        await shown(b"word19")
        resize(120)
        os.kill(os.getpid(), signal.SIGWINCH)
        await shown(b"word19", 2)  # drawn again
        second.cancel()
        await asyncio.gather(second, return_exceptions=True)
    drawn, at = Screen(), 0
    for end, columns in resized_at:
        drawn.feed(written[at:end].decode())
        drawn.resize(columns)
        at = end
    drawn.feed(written[at:].decode())
    report.write("\\n".join(up_to_last_written(drawn.rows())) + "\\n")

asyncio.run(asyncio.wait_for(main(), 30))
"""


def test_a_prompt_after_a_resize_between_prompts_is_erased_as_that_width_laid_it_out() -> None:
    child = subprocess.run(
        [sys.executable, "-c", _RESIZED_BETWEEN_PROMPTS],
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS * 2,
        env={**os.environ, "XTERM_VERSION": "XTerm(390)"},  # cuts its rows at a new width
        check=False,
    )
    assert child.returncode == 0, child.stderr
    prompt = "you> " + " ".join(f"word{n}" for n in range(20))
    # Before, the resize between the prompts was lost, and the one after it erased the
    # prompt as 80 columns laid it out: two rows of the three it took at 50, its first
    # row left above it.
    assert child.stdout.splitlines() == ["you> hello", prompt[:120].rstrip(), prompt[120:]]
