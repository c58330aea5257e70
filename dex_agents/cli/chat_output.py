"""The chat's output as text: model text shown live, and every other line, each once.

A model's text reaches the chat twice: as ``text_delta`` events while the model
writes it, and as a stored message once the call commits. ``ChatOutput`` shows
live text on one open line (``agent> ...`` growing as deltas arrive), and when the
stored message arrives it completes that line instead of printing the text again.

A model call's deltas all commit before its message, but the Stream follower can
lag behind the snapshot: a stored text may arrive before any of its deltas. Such
a text is kept, and later deltas of the same turn that spell its beginning are
held back; if they turn out to say something else, they are shown after all.

A chat may follow one session for days, so a model call's text is forgotten once
no delta of it can come again: turns run one after another, and each call's
deltas commit before its stored message, so once a delta of a later turn
arrives, every call whose stored text was shown (``done``) has had all of its
deltas. Until 2026-12-07 every call's text was kept for the life of the chat,
and each stored text and flush walked all of them. A stored text shown before its
deltas is forgotten likewise: no delta of its turn comes once a later turn's does.
A call that never got a stored text (a cancelled turn's, a failed turn's last
attempt) is kept a turn longer: its stored text, if it had one, comes
with the snapshot read after the later turn's first delta, and every earlier turn's
with the snapshot read after that turn's own first delta, so then it goes too.
"""

from __future__ import annotations

from dataclasses import dataclass

from dex_agents.cli import terminal
from dex_agents.cli.live_text import LiveKey


@dataclass
class _Early:
    """A stored text shown before any of its deltas."""

    turn_id: str
    text: str
    unclaimed: bool = True  # no call's deltas were taken for a copy of it


@dataclass
class _Call:
    text: str = ""
    printed: int = 0
    done: bool = False
    held_for: _Early | None = None  # the stored text it may be a late copy of
    claimed: str | None = None  # the stored text that completed it


class ChatOutput:
    """Builds the text to write; each method returns what to print (possibly ``""``)."""

    def __init__(self) -> None:
        self._calls: dict[LiveKey, _Call] = {}
        self._turn = ""  # the turn of the latest call whose live text arrived
        self._open: LiveKey | None = None
        self._early: list[_Early] = []

    @property
    def kept_calls(self) -> int:
        """How many model calls' live text is kept now."""
        return len(self._calls)

    @property
    def kept_early_texts(self) -> int:
        """How many stored texts shown before their deltas are kept now."""
        return len(self._early)

    def close(self) -> str:
        """End the open live line, if any, so what follows starts on a line of its own."""
        if self._open is None:
            return ""
        self._open = None
        return "\n"

    def line(self, text: str) -> str:
        """A whole line of anything but model text."""
        return f"{self.close()}{text}\n"

    def arrive(self, key: LiveKey, fragment: str) -> None:
        """Record live text; ``stored`` and ``flush`` decide what to show of it."""
        call = self._calls.get(key)
        if call is None:
            if key[0] and key[0] != self._turn:
                last, self._turn = self._turn, key[0]
                # A later turn's first delta: no delta of an earlier turn follows it. Only
                # the last turn's calls may still get their stored text.
                self._calls = {
                    k: c
                    for k, c in self._calls.items()
                    if k[0] == key[0] or (k[0] == last and not c.done)
                }
                self._early = [early for early in self._early if early.turn_id == key[0]]
            self._retried(key)
            call = self._calls[key] = _Call()
        if not call.done:
            call.text += fragment

    def _retried(self, key: LiveKey) -> None:
        """A model call's attempt ``key`` began: its earlier attempts failed, and none of
        their texts is ever stored (UIs keep the highest attempt). Left claimable, the
        failed attempt's text, the start of the retry's often, claimed the stored text,
        which then showed as its rest alone ('agent> lo' below 'agent> Hello'), and a
        failed attempt that claimed it had the retry's deltas show it again."""
        for earlier, call in self._calls.items():
            if earlier[:2] != key[:2] or earlier[2] >= key[2]:
                continue
            if not call.done:
                call.done = True  # forgotten with the calls whose text was shown
                if call.held_for is not None:  # the retry may be the copy it was held for
                    call.held_for.unclaimed = True
                    call.held_for = None
            elif call.claimed is not None:
                # The retry's text, stored before its deltas came, was shown as the failed
                # attempt's: the retry's deltas are a late copy of it, held back.
                self._early.append(_Early(key[0], call.claimed))
                call.claimed = None

    def stored(self, turn_id: str, text: str) -> str:
        """A model text that was stored: complete its live line, or show it whole."""
        for key, call in self._calls.items():
            if key[0] == turn_id and not call.done and call.text and text.startswith(call.text):
                call.done, call.claimed = True, text
                if call.held_for is not None:  # a copy of this text, not of the one it was held for
                    call.held_for.unclaimed = True
                    call.held_for = None
                if call.printed == 0:
                    return self.line(terminal.agent_text_line(text))
                rest = terminal.escaped(text[call.printed :], keep_newlines=True)
                if self._open == key:
                    self._open = None
                    return f"{rest}\n"
                return self.line(f"agent> {rest}")
        self._early.append(_Early(turn_id, text))
        return self.line(terminal.agent_text_line(text))

    def flush(self) -> str:
        """Show the live text that no stored message has claimed yet."""
        out: list[str] = []
        for key, call in self._calls.items():
            if call.done or len(call.text) == call.printed or self._holds(key, call):
                continue
            if self._open != key:
                out.append(self.close())
                out.append("agent> ")
                self._open = key
            out.append(terminal.escaped(call.text[call.printed :], keep_newlines=True))
            call.printed = len(call.text)
        return "".join(out)

    def _holds(self, key: LiveKey, call: _Call) -> bool:
        """Whether ``call`` is still a possible late copy of a stored text shown already."""
        if call.printed:
            return False
        early = call.held_for
        if early is not None:
            if early.text == call.text:
                call.done = True
                early.unclaimed = False
                return True
            if early.text.startswith(call.text):
                return True
            early.unclaimed = True  # not a copy after all
            call.held_for = None
            return False
        for early in self._early:
            if early.unclaimed and early.turn_id == key[0] and early.text.startswith(call.text):
                early.unclaimed = False
                call.held_for = early
                return self._holds(key, call)
        return False
