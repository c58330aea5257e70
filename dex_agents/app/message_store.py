"""Reading and storing a session's messages: the window, the chunks and the index.

The domain decides (``plan_store_messages``, ``plan_retention``,
``stored_messages``, in two parts); these functions read what the decision needs from a
transaction and stage what it says. A Step that stores messages loads the whole
``AgentMessages`` window; one that reads every message also loads
``AgentMessageChunks``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from dex_agents.app.chunk_runs import ChunkRuns
from dex_agents.app.message_lineage import MessageLineage
from dex_agents.domain.chunking import plan_store_messages
from dex_agents.domain.messages import AgentMessage, FrameworkMessage
from dex_agents.domain.paging import chunked_messages, chunks_to_load_for_model, with_window
from dex_agents.domain.retention import plan_retention
from dex_agents.domain.state import AgentState
from dex_agents.domain.windowing import MessageStorageOptions, message_sequence_key
from dex_agents.ports.engine import MapLoad
from dex_agents.ports.persistence import StateReader, StateTransaction
from dex_agents.ports.session_schema import (
    AGENT_MESSAGE_CHUNKS,
    AGENT_MESSAGE_INDEX,
    AGENT_MESSAGES,
    CONTEXT_SUMMARY,
)

WINDOW_LOAD = MapLoad(AGENT_MESSAGES)
"""The load of every Step that stores messages: the whole window."""

CHUNKS_LOAD = MapLoad(AGENT_MESSAGE_CHUNKS)
"""The load of a Step or RPC that reads every kept message."""


def model_input_chunk_loads(
    state: StateReader, *, compaction_enabled: bool
) -> tuple[MapLoad, ...] | None:
    """The chunks a model call loads, by key; ``None`` when it loads them all (``CHUNKS_LOAD``).

    Without compaction (or before the first summary) the model input is every
    message; with a summary, it is the messages after it, so only the chunks
    ``chunks_to_load_for_model`` names: a long session's model call never reads
    what was summarized.
    """
    summary = state.get(CONTEXT_SUMMARY) if compaction_enabled else None
    if summary is None:
        return None
    chunks = chunks_to_load_for_model(
        state.get(AGENT_MESSAGE_INDEX),
        compaction_enabled=True,
        summary_last_sequence=summary.last_sequence,
    )
    return tuple(
        MapLoad(AGENT_MESSAGE_CHUNKS, message_sequence_key(chunk.first_sequence))
        for chunk in chunks
    )


def model_input_loaded(state: StateReader, *, compaction_enabled: bool) -> bool:
    """Whether every chunk of the model input was loaded, as ``compaction_enabled`` has it.

    Not so only for a ``RunModel`` moved to with compaction and a summary (its
    loads are the chunks after the summary) and run without compaction (its
    input is every message): a worker restarted with another configuration.
    """
    if compaction_enabled or state.get(CONTEXT_SUMMARY) is None:
        return True  # moved to with the loads this input reads, or with every chunk
    index = state.get(AGENT_MESSAGE_INDEX)
    if index is None or not index.chunks:
        return True
    # Loads by key are the chunks after the summary, newest chunks last: when the oldest
    # kept chunk was loaded, every later one was too (or the whole map was).
    try:
        state.get_instance(
            AGENT_MESSAGE_CHUNKS, message_sequence_key(index.chunks[0].first_sequence)
        )
    except LookupError:
        return False
    return True


def window_messages(state: StateReader) -> list[AgentMessage]:
    """The messages in the window, in sequence order."""
    # Keys are zero-padded sequences, so key order is sequence order.
    return [message for _, message in state.instances(AGENT_MESSAGES)]


def all_messages(
    state: StateReader, *, after_sequence: int | None = None, keep_chunks: bool = True
) -> tuple[AgentMessage, ...]:
    """Every kept message in sequence order (or those after ``after_sequence``).

    The chunks' part is kept for the next call (``CHUNK_RUNS``) unless
    ``keep_chunks`` is false: a snapshot's floor moves every turn, so its part
    would never be asked for again and would only push out the model calls'.
    """
    index = state.get(AGENT_MESSAGE_INDEX)
    chunks = []
    if index is not None and index.chunks and after_sequence is None:
        # Every kept chunk: one pass over the loaded map.
        chunks = [chunk for _, chunk in state.instances(AGENT_MESSAGE_CHUNKS)]
    elif index is not None:
        for info in index.chunks:
            if after_sequence is not None and info.last_sequence <= after_sequence:
                continue
            chunk = state.get_instance(
                AGENT_MESSAGE_CHUNKS, message_sequence_key(info.first_sequence)
            )
            if chunk is not None:
                chunks.append(chunk)
    if not keep_chunks:
        return with_window(
            chunked_messages(index, chunks, after_sequence=after_sequence), window_messages(state)
        )
    run = CHUNK_RUNS.get(state.flow_id, index, chunks, after_sequence=after_sequence)
    messages = with_window(run, window_messages(state))
    MESSAGE_LINEAGE.note(state.flow_id, run.messages, messages)
    return messages


CHUNK_RUNS = ChunkRuns()
"""This process's joined chunks, shared by every session it serves (``chunk_runs.py``)."""

MESSAGE_LINEAGE = MessageLineage()
"""Which of this process's reads of a session's messages start with the read before
(``message_lineage.py``): the built-in loop resumes its walk on them unchecked."""


def store_messages(
    state: StateTransaction,
    agent_state: AgentState,
    messages: Sequence[FrameworkMessage],
    *,
    turn_id: str,
    options: MessageStorageOptions,
    now: datetime,
    compaction_enabled: bool,
) -> tuple[int, tuple[AgentMessage, ...]]:
    """Number and stage ``messages`` after the newest stored one; return the session's new
    ``last_sequence`` and the stored messages.

    Moves the window's oldest messages into chunks as the domain plans, and runs
    retention when ``compaction_enabled`` and the session has a summary, all in
    the caller's commit. The caller puts the sequence into its ``AgentState`` with
    its own changes: each Step that stores messages changes the state anyway, and
    one ``attrs.evolve`` for both costs half of two.
    """
    if not messages:
        return agent_state.last_sequence, ()
    first = agent_state.last_sequence + 1
    new = tuple(
        AgentMessage.from_framework_message(
            message, sequence=first + i, turn_id=turn_id, created_at=now
        )
        for i, message in enumerate(messages)
    )
    plan = plan_store_messages(
        index=state.get(AGENT_MESSAGE_INDEX),
        window=window_messages(state),
        new_messages=new,
        options=options,
    )
    last_sequence = new[-1].sequence
    summary = state.get(CONTEXT_SUMMARY) if compaction_enabled else None
    retention = plan_retention(
        plan.index,
        # Without compaction the model input is every message, so retention never runs.
        summary_last_sequence=None if summary is None else summary.last_sequence,
        last_sequence=last_sequence,
        retained_message_limit=options.retained_message_limit,
    )
    deleted = set(retention.deleted_chunk_keys)
    for message in plan.window_messages:
        state.set_instance(AGENT_MESSAGES, message_sequence_key(message.sequence), message)
    for key in plan.deleted_window_keys:
        state.delete_instance(AGENT_MESSAGES, key)
    for key, chunk in zip(plan.chunk_keys, plan.chunks, strict=True):
        if key not in deleted:  # retention may drop a chunk written in this very commit
            state.set_instance(AGENT_MESSAGE_CHUNKS, key, chunk)
    for key in deleted:
        state.delete_instance(AGENT_MESSAGE_CHUNKS, key)
    if retention.index_changed or plan.index_changed:
        index = retention.index
        if index is not None:
            state.set(AGENT_MESSAGE_INDEX, index)
    return last_sequence, new
