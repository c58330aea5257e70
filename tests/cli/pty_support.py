"""``dex-agents chat`` on a pseudo-terminal, read with deadlines, as a person runs it."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import select
import shlex
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from dex_agents.cli.line_editing import BRACKETED_PASTE_OFF, BRACKETED_PASTE_ON
from tests.cli.cli_support import CLI, DEADLINE_SECONDS, ROOT, cli_env
from tests.cli.terminal_screen import COLUMNS, Screen, up_to_last_written

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


# An interactive shell with job control needs the terminal as its controlling terminal,
# which a new session only gets by asking (Popen's dup2 does not give it).
_SHELL_ON_ITS_TERMINAL = (
    sys.executable,
    "-c",
    "import fcntl, os, signal, sys, termios; signal.pthread_sigmask(signal.SIG_SETMASK, []); "
    "fcntl.ioctl(0, termios.TIOCSCTTY, 0); os.execv(sys.argv[1], sys.argv[1:])",
)

SHELL_PROMPT = "shell$ "
"""The prompt of the interactive shell ``Terminal(shell=...)`` runs."""


class Terminal:
    """A ``chat`` process on a pseudo-terminal, read with deadlines."""

    def __init__(
        self,
        tmp_path: Path,
        session: str = "pty",
        *,
        stderr: Path | None = None,
        shell: str | None = None,
        env: dict[str, str] | None = None,
        rewraps: bool = False,
    ) -> None:
        """``stderr`` names a file for the program's errors, to read after the terminal
        went away; without it they go to the terminal. With ``shell`` (bash's path) the
        terminal runs that shell, interactive with job control, and the test types
        ``command`` (the chat's command line) at its ``SHELL_PROMPT``. ``env`` adds to the
        program's environment (``DEX_AGENTS_MODEL``, say). With ``rewraps`` a resize lays
        the rows out again, as GNU screen and tmux do, instead of cutting them (``Screen``)."""
        self.db = tmp_path / "db.sqlite3"
        self.master, slave = pty.openpty()
        self.device = os.ttyname(slave)
        # Sized as a terminal window is: the chat draws its prompt again on that many columns.
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, COLUMNS, 0, 0))
        command = [*CLI, "chat", "--db", str(self.db), "--session", session]
        self.command = shlex.join(command)
        environment = {**cli_env(tmp_path), "PYTHONFAULTHANDLER": "1", **(env or {})}
        if shell is None:
            argv = [*AS_A_SHELL_STARTS_A_FOREGROUND_JOB, *command]
        else:
            argv = [*_SHELL_ON_ITS_TERMINAL, shell, "--norc", "--noprofile", "-i"]
            environment["PS1"] = SHELL_PROMPT
            # Not the person's own history.
            environment["HISTFILE"] = str(tmp_path / "shell_history")
        with contextlib.ExitStack() as files:
            errors = slave if stderr is None else files.enter_context(stderr.open("wb"))
            self.process = subprocess.Popen(
                argv,
                stdin=slave,
                stdout=slave,
                stderr=errors,
                cwd=ROOT,
                env=environment,
                start_new_session=True,
            )
        os.close(slave)
        self.output = ""
        self._split = ""
        self.raw = ""  # everything read, as written: what ``screen`` draws
        # Where in ``raw`` the terminal was resized, and to how many columns.
        self._resizes: list[tuple[int, int]] = []
        self._rewraps = rewraps

    def line_mode(self) -> bool:
        """Whether the terminal is in its usual line mode (canonical, echoing), as a shell
        leaves it and a prompt reading key by key does not."""
        fd = os.open(self.device, os.O_RDWR | os.O_NOCTTY)
        try:
            local_modes = termios.tcgetattr(fd)[3]
        finally:
            os.close(fd)
        return bool(local_modes & termios.ICANON) and bool(local_modes & termios.ECHO)

    def set_line_mode(self) -> None:
        """Put the terminal in its usual line mode, as a shell does when a job stops."""
        fd = os.open(self.device, os.O_RDWR | os.O_NOCTTY)
        try:
            modes = termios.tcgetattr(fd)
            modes[3] |= termios.ICANON | termios.ECHO
            termios.tcsetattr(fd, termios.TCSANOW, modes)
        finally:
            os.close(fd)

    def expect(self, text: str) -> str:
        """Read until ``text`` appears after what was already matched; return what came
        before it and ``text`` itself, with the terminal's line ends as ``\\n``."""
        deadline = time.monotonic() + DEADLINE_SECONDS
        while text not in self.output:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no {text!r} in:\n{self.output}"
            self._read(remaining, text)
        end = self.output.index(text) + len(text)
        seen, self.output = self.output[:end], self.output[end:]
        return seen

    def expect_last_rows(self, last: list[str]) -> list[str]:
        """Read until the screen's last rows written on are ``last``; return every row.

        A screen is read whole rather than after one ``expect``, since the chat may
        erase a line and draw it again (a prompt below a turn, then the message prompt
        after it): the text an ``expect`` matched can be the draw that goes next.
        """
        deadline = time.monotonic() + DEADLINE_SECONDS
        while (rows := up_to_last_written(self._screen()))[-len(last) :] != last:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"the screen's last rows are not {last!r}:\n" + "\n".join(rows)
            self._read(remaining, repr(last))
        return rows

    def _screen(self) -> list[str]:
        """The rows shown after ``raw``, resized where ``resize`` was called (``Screen``)."""
        shown, drawn = Screen(), 0
        for at, columns in self._resizes:
            shown.feed(self.raw[drawn:at])
            shown.resize(columns, rewrap=self._rewraps)
            drawn = at
        shown.feed(self.raw[drawn:])
        return shown.rows()

    def _read(self, seconds: float, awaited: str) -> None:
        ready, _, _ = select.select([self.master], [], [], seconds)
        if not ready:
            return
        try:
            chunk = os.read(self.master, 4096)
        except OSError:  # the process closed the terminal
            chunk = b""
        assert chunk, f"the program ended before {awaited}:\n{self.output}"
        read = chunk.decode("utf-8", errors="replace")
        self.raw += read
        # A mode's sequence split between two reads is read whole with the next.
        read, self._split = self._split + read, ""
        if split := _MODE_STARTED.search(read):
            read, self._split = read[: split.start()], split.group(0)
        self.output += _MODES.sub("", read).replace("\r\n", "\n")

    def _paste_marks_asked(self) -> bool:
        return self.raw.rfind(BRACKETED_PASTE_ON) > self.raw.rfind(BRACKETED_PASTE_OFF)

    def expect_paste_marks(self) -> None:
        """Read until the program last asked for pasted text to be marked, as a prompt
        reading keys does."""
        deadline = time.monotonic() + DEADLINE_SECONDS
        while not self._paste_marks_asked():
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no prompt asked for paste marks:\n{self.output}"
            self._read(remaining, "paste marks were asked for")

    def send(self, line: str) -> None:
        """Type a line."""
        os.write(self.master, (line + "\n").encode())

    def type(self, text: str) -> None:
        """Type ``text`` without pressing Enter."""
        os.write(self.master, text.encode())

    def paste(self, text: str) -> None:
        """Paste ``text``, its line breaks sent as Enter is, as a terminal does: marked as
        pasted (``ESC [200~`` ... ``ESC [201~``) when the program last asked for the marks."""
        sent = text.replace("\n", "\r")
        self.type(f"\x1b[200~{sent}\x1b[201~" if self._paste_marks_asked() else sent)

    def end_input(self) -> None:
        """Ctrl-D at the start of a line: the program reads the end of its input."""
        os.write(self.master, b"\x04")

    def resize(self, columns: int) -> None:
        """Make the terminal ``columns`` wide, and send SIGWINCH as the terminal does to its
        foreground job (the chat has no controlling terminal here, so the kernel would not).
        What was read so far was drawn at the old width (``expect_last_rows``)."""
        self._resizes.append((len(self.raw), columns))
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
        os.killpg(self.process.pid, signal.SIGWINCH)

    def interrupt(self) -> None:
        """Ctrl-C: SIGINT to the program's process group, as the terminal sends it."""
        os.killpg(self.process.pid, signal.SIGINT)

    def quit(self) -> int:
        """``/quit`` at the prompt; the exit code once the program has ended (``exit_code``)."""
        self.send("/quit")
        return self.exit_code()

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
                f"the program did not end ({signals}):\n{self.output}{self.rest()}"
            ) from None
        finally:
            self.close()

    def rest(self) -> str:
        """What the program wrote that was not read yet, read until it writes no more."""
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

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Kill the program if it still runs, and close the terminal."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=DEADLINE_SECONDS)
        if self.master >= 0:
            os.close(self.master)
            self.master = -1


# Modes the chat sets that show nothing (bracketed paste on and off).
_MODES = re.compile(r"\x1b\[\?[0-9]+[hl]")
_MODE_STARTED = re.compile(r"\x1b(\[(\?[0-9]*)?)?$")
