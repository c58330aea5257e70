"""A ``ModelOutputWriter`` for the client tests: it keeps every delta."""

from __future__ import annotations

import asyncio


class RecordingOutput:
    """A ``ModelOutputWriter`` that keeps every delta, in order."""

    def __init__(self) -> None:
        self.deltas: list[tuple[str, str]] = []
        self._written = asyncio.Event()

    def write_text_delta(self, text: str) -> None:
        self.deltas.append(("text", text))
        self._written.set()

    def write_reasoning_delta(self, text: str) -> None:
        self.deltas.append(("reasoning", text))
        self._written.set()

    def text(self, kind: str = "text") -> str:
        return "".join(piece for delta_kind, piece in self.deltas if delta_kind == kind)

    async def wait_for(self, text: str, kind: str = "text") -> None:
        """Return once the ``kind`` deltas written so far join to ``text``."""
        while self.text(kind) != text:
            self._written.clear()
            await self._written.wait()
