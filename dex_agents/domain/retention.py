"""Retention: with compaction, delete the oldest chunks that the summary covers.

Retention deletes the oldest chunk while every message in it is at or before
``ContextSummary.last_sequence`` and at least ``retained_message_limit``
messages are stored after it, so the newest ``retained_message_limit`` messages
and every message after the summary always stay. It never deletes window
messages, and nothing at all without a summary or with a limit of ``None``.
"""

from __future__ import annotations

import attrs

from dex_agents.domain.message_index import AgentMessageIndex, MessageChunkInfo
from dex_agents.domain.windowing import message_sequence_key


@attrs.frozen(kw_only=True)
class RetentionPlan:
    """The chunks retention deletes, oldest first, and the ``AgentMessageIndex`` after it.

    ``index`` is the very object passed in when ``index_changed`` is ``False``;
    otherwise its ``first_sequence`` follows the last deleted chunk.
    """

    deleted_chunks: tuple[MessageChunkInfo, ...]
    index: AgentMessageIndex | None
    index_changed: bool

    @property
    def deleted_chunk_keys(self) -> tuple[str, ...]:
        """The ``AgentMessageChunks`` keys to delete."""
        return tuple(message_sequence_key(chunk.first_sequence) for chunk in self.deleted_chunks)


def plan_retention(
    index: AgentMessageIndex | None,
    *,
    summary_last_sequence: int | None,
    last_sequence: int,
    retained_message_limit: int | None,
) -> RetentionPlan:
    """Which oldest chunks to delete.

    ``summary_last_sequence`` is ``ContextSummary.last_sequence`` (``None``
    without a summary), ``last_sequence`` the newest stored message's sequence,
    and ``retained_message_limit`` the session option (``None`` keeps
    everything). Raises ``ValueError`` for a limit below 1 or a negative
    ``last_sequence``.
    """
    if retained_message_limit is not None and retained_message_limit < 1:
        raise ValueError(
            f"retained_message_limit must be None or at least 1, not {retained_message_limit}"
        )
    if last_sequence < 0:
        raise ValueError(f"last_sequence must be at least 0, not {last_sequence}")
    unchanged = RetentionPlan(deleted_chunks=(), index=index, index_changed=False)
    if index is None or summary_last_sequence is None or retained_message_limit is None:
        return unchanged
    deleted = 0
    for chunk in index.chunks:
        covered = chunk.last_sequence <= summary_last_sequence
        if not covered or last_sequence - chunk.last_sequence < retained_message_limit:
            break
        deleted += 1
    if not deleted:
        return unchanged
    return RetentionPlan(
        deleted_chunks=index.chunks[:deleted],
        index=AgentMessageIndex(
            chunks=index.chunks[deleted:],
            window_first_sequence=index.window_first_sequence,
            first_sequence=index.chunks[deleted - 1].last_sequence + 1,
        ),
        index_changed=True,
    )
