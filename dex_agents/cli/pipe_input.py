"""``PipeInput``: the chat's typed lines read whole, from a pipe or from a terminal whose
output goes elsewhere (``line_input`` picks it)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import sys
import threading

from dex_agents.cli.line_editing import TypedAhead
from dex_agents.cli.terminal_modes import flush_typed


def _write_out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


class PipeInput:
    """Whole lines from standard input, read by one daemon thread: a pipe, or a terminal
    whose output goes elsewhere (``dex-agents chat | tee chat.log``).

    One thread for the whole chat, not one per prompt: a prompt that ends without a
    line leaves the next line to the next prompt instead of to a reader nobody awaits.
    A daemon thread, not the loop's executor, so Ctrl-C does not wait for Enter.
    ``terminal`` is standard input's descriptor when it is a terminal.
    """

    def __init__(self, terminal: int | None = None) -> None:
        self._terminal = terminal
        self._lines: asyncio.Queue[str | OSError] | None = None
        self._ended = False
        self._prompt: str | None = None

    def _start(self) -> asyncio.Queue[str | OSError]:
        if self._lines is not None:
            return self._lines
        loop = asyncio.get_running_loop()
        lines: asyncio.Queue[str | OSError] = asyncio.Queue()
        self._lines = lines

        def read() -> None:
            stdin = sys.stdin  # None when the chat started with it closed (``<&-``)
            # Bytes that are not text in the terminal's encoding become U+FFFD: with the
            # default handlers they either ended the chat (a lone surrogate the session
            # refuses) or killed this thread and left the chat waiting for ever.
            if isinstance(stdin, io.TextIOWrapper) and stdin.errors != "replace":
                stdin.reconfigure(errors="replace")
            while True:
                line: str | OSError
                try:
                    line = "" if stdin is None else stdin.readline()  # closed: nothing to read
                except OSError as error:  # the terminal went away: the chat ends with one line
                    line = error
                # The loop may be gone after Ctrl-C; the line is not needed then.
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(lines.put_nowait, line)
                if not isinstance(line, str) or not line:
                    return

        threading.Thread(target=read, name="dex-agents-stdin", daemon=True).start()
        return lines

    async def read_line(
        self, prompt: str, *, keep_partial: bool = False, until_typed: bool = False
    ) -> str | None:
        if self._ended:
            return None
        lines = self._start()
        _write_out(prompt)
        self._prompt = prompt
        try:
            line = await lines.get()
        except asyncio.CancelledError:
            _write_out("\n")
            raise
        finally:
            self._prompt = None
        if isinstance(line, OSError):
            raise line
        if not line:
            self._ended = True
            _write_out("\n")
            return None
        return line.rstrip("\r\n")

    def keys_held(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # the terminal, if any, reads whole lines throughout

    def write(self, text: str) -> None:
        if self._prompt is None:
            _write_out(text)
        else:
            _write_out(f"\n{text}{self._prompt}")

    def leave(self) -> None:
        pass  # a prompt on a pipe is never erased

    @property
    def reads_during_turns(self) -> bool:
        return False  # a pipe's lines were written for the prompts they answer

    def open_line_ended(self) -> bool:
        return False  # no prompt waits below a line left open

    def end_on_error(self) -> None:
        pass  # a prompt on a pipe is never erased, and a cancelled one ends its line

    def discard_typed_ahead(self) -> TypedAhead:
        if self._terminal is None:
            return TypedAhead()  # a pipe's lines were written for the prompts they answer
        # The thread reads a typed line as soon as it is typed: it waits in the queue.
        had = False
        lines = self._lines
        while lines is not None and not lines.empty():
            line = lines.get_nowait()
            if not isinstance(line, str) or not line:
                lines.put_nowait(line)  # the end of input, the last thing queued, stays
                break
            had = True
        return TypedAhead(dropped=flush_typed(self._terminal) or had)
