"""A ``ModelOutputWriter`` for the client tests: it keeps every delta."""

from __future__ import annotations


class RecordingOutput:
    """A ``ModelOutputWriter`` that keeps every delta, in order."""

    def __init__(self) -> None:
        self.deltas: list[tuple[str, str]] = []

    def write_text_delta(self, text: str) -> None:
        self.deltas.append(("text", text))

    def write_reasoning_delta(self, text: str) -> None:
        self.deltas.append(("reasoning", text))

    def text(self, kind: str = "text") -> str:
        return "".join(piece for delta_kind, piece in self.deltas if delta_kind == kind)
