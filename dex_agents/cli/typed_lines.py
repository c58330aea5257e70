"""``LineInput``: the port through which the chat reads typed lines and writes everything
it shows, at a terminal key by key (``line_input.TerminalInput``) or whole lines from a
pipe (``pipe_input.PipeInput``); ``line_input.open_line_input`` picks one."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol

from dex_agents.cli.line_editing import TypedAhead


class LineInput(Protocol):
    """Where the chat reads typed lines and writes everything it shows."""

    async def read_line(
        self, prompt: str, *, keep_partial: bool = False, until_typed: bool = False
    ) -> str | None:
        """Show ``prompt`` and read one line, without its line break; ``None`` at end of input.

        Cancelling it ends the prompt; with ``keep_partial`` what was typed comes back
        as the start of the next prompt that keeps it. With ``until_typed`` (below a
        running turn) the prompt shows once something is typed at it, and Enter on
        nothing shows nothing.
        """
        ...

    def keys_held(self) -> AbstractContextManager[None]:
        """While entered, the keys typed as one prompt hands over to the next are the next
        prompt's to read, not the terminal's to echo and edit: at a terminal it stays out
        of its line mode from the first prompt until this is left."""
        ...

    def write(self, text: str) -> None:
        """Show ``text`` above any open prompt; a line it leaves open goes on there."""
        ...

    def discard_typed_ahead(self) -> TypedAhead:
        """Drop what was typed before the next prompt shows; what that was."""
        ...

    @property
    def reads_during_turns(self) -> bool:
        """Whether a prompt may wait below a running turn's text as it streams: a line typed
        there is sent at once. On a pipe, lines wait for the prompt after the turn."""
        ...

    def open_line_ended(self) -> bool:
        """Whether a prompt's line ended, on the screen, the line ``write`` left open, since
        this was last asked: what continues that line starts a line of its own."""
        ...

    def leave(self) -> None:
        """The chat is leaving (Ctrl-C): a prompt that ends from now on stays shown as it
        is, with what was typed, for the line break the chat ends with."""
        ...

    def end_on_error(self) -> None:
        """The chat ends on an error (its session stopped): a prompt that ends from now on
        stays shown as it is, with what was typed, and ends its line, so the error line
        shows below it."""
        ...
