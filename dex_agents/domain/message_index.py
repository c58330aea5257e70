"""Where stored messages live: the window, immutable chunks, and the index over them."""

from __future__ import annotations

import attrs

from dex_agents.domain.messages import AgentMessage


@attrs.frozen(kw_only=True)
class MessageChunkInfo:
    """One kept chunk as ``AgentMessageIndex.chunks`` lists it."""

    first_sequence: int
    last_sequence: int
    message_count: int
    size_bytes: int


@attrs.frozen(kw_only=True)
class AgentMessageIndex:
    """The ``AgentMessageIndex`` Attribute.

    ``chunks`` lists each kept chunk in sequence order, ``window_first_sequence``
    is where the window starts, and ``first_sequence`` is the oldest stored
    message (the start of paging once retention deleted older chunks).
    """

    chunks: tuple[MessageChunkInfo, ...] = ()
    window_first_sequence: int = 1
    first_sequence: int = 1


@attrs.frozen(kw_only=True)
class AgentMessageChunk:
    """An immutable ``AgentMessageChunks`` instance: consecutive messages moved out of the window.

    Its messages are exactly ``first_sequence`` to ``last_sequence``, checked when
    it is built or decoded, so readers check whole chunks, not every message.
    """

    first_sequence: int
    last_sequence: int
    messages: tuple[AgentMessage, ...]

    def __attrs_post_init__(self) -> None:
        sequences = [message.sequence for message in self.messages]
        if sequences != list(range(self.first_sequence, self.last_sequence + 1)):
            shown = f"{sequences[0]}..{sequences[-1]}" if sequences else "none"
            raise ValueError(
                f"chunk {self.first_sequence}..{self.last_sequence} must hold exactly those"
                f" messages, in order; it holds {len(sequences)} ({shown})"
            )
