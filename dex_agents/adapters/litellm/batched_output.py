"""Text pieces that arrive together written as one delta ("batch very small chunks").

A provider streams an answer a token or two at a time, and one ``text_delta``
call writes one Stream message: a durable event, read back by every follower
of the session, for a few characters. ``BatchedOutput`` joins the pieces the
client reads before it next waits for the network into one write, made as soon
as the event loop runs anything else; a piece read alone is written as it came.
So nothing waits: pieces join only when they were already there, which is when
a worker is too busy to keep up with its streams, and a busy worker writes fewer,
longer events.

Text and reasoning are kept apart and in their order: a piece of the other kind
writes what is pending first. ``flush`` writes what is left; the client calls it
before it returns or raises, because the writer drops writes after the call.

A piece that ends in the first half of a surrogate pair keeps that half until
the next piece, so the pair is written as the one character it encodes: a
provider that slices text by UTF-16 units splits an emoji across two pieces.
"""

from __future__ import annotations

import asyncio
from typing import Literal

from dex_agents.domain.unicode_text import join_surrogate_pairs
from dex_agents.ports.model_client import ModelOutputWriter

DeltaKind = Literal["text", "reasoning"]


class BatchedOutput:
    """A ``ModelOutputWriter`` over ``output`` that joins the pieces of one event-loop turn.

    Use it on the event loop, from one task: the joined write is a ``call_soon``
    callback of the loop it was first written on.
    """

    def __init__(self, output: ModelOutputWriter) -> None:
        self._output = output
        self._kind: DeltaKind = "text"
        self._pieces: list[str] = []
        self._flush: asyncio.Handle | None = None

    def write_text_delta(self, text: str) -> None:
        """Add a piece of the answer; it is written once the loop runs anything else."""
        self._add("text", text)

    def write_reasoning_delta(self, text: str) -> None:
        """Add a piece of the reasoning summary, as ``write_text_delta``."""
        self._add("reasoning", text)

    def flush(self) -> None:
        """Write the pending pieces now, as one delta."""
        self._write(keep_high_surrogate=False)

    def _write(self, *, keep_high_surrogate: bool) -> None:
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        if not self._pieces:
            return
        text = join_surrogate_pairs("".join(self._pieces))
        self._pieces.clear()
        if keep_high_surrogate and text and "\ud800" <= text[-1] <= "\udbff":
            # Its other half is likely the next piece's start: written apart, each
            # half is a lone surrogate, which a reader shows as two U+FFFD.
            self._pieces.append(text[-1])
            text = text[:-1]
        if not text:
            return
        if self._kind == "text":
            self._output.write_text_delta(text)
        else:
            self._output.write_reasoning_delta(text)

    def _add(self, kind: DeltaKind, text: str) -> None:
        if kind != self._kind:
            self.flush()
            self._kind = kind
        self._pieces.append(text)
        if self._flush is None:
            self._flush = asyncio.get_running_loop().call_soon(self._write_turn)

    def _write_turn(self) -> None:
        self._write(keep_high_surrogate=True)
