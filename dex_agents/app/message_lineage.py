"""Which reads of a session's stored messages start with the read before them, known without a look.

Every model call reads every stored message (``all_messages``): the kept chunks'
run, then the window. The built-in loop resumes its walk over a session's earlier
messages (``PrefixCache``) only where the new read starts with the messages it
walked, and checking that compared every message of a long session at every
model call: a quarter of what a turn 1,000 turns into a session cost more than
an early one (callgrind). Yet ``all_messages`` can tell: when the chunks' run is
the very one of the session's last read (``ChunkRuns`` keeps it) and the window's
messages start with that read's, the new read starts with the last one. Each
session's newest read is noted with a lineage, kept while each read starts with
the one before; of two reads of one lineage the older is a prefix of the newer,
so a walk of the older resumes on the newer with nothing compared but the window.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

from dex_agents.app.sized_lru import SizedLru
from dex_agents.domain.messages import AgentMessage

DEFAULT_LINEAGE_ENTRIES = 4096
"""The sessions whose newest read is noted, at most (least recently read dropped first)."""

DEFAULT_LINEAGE_ELEMENTS = 4 * 1024 * 1024
"""The messages all noted reads hold together, at most: 32 MiB of references. Their
messages are those the chunk runs and the decoded window keep alive."""


class Lineage:
    """The mark of reads each of which starts with the one noted before it."""

    __slots__ = ()


class _Noted(NamedTuple):
    messages: tuple[AgentMessage, ...]
    head: tuple[AgentMessage, ...]
    lineage: Lineage


class MessageLineage:
    """Per session, the newest read ``all_messages`` noted and its ``Lineage``.

    Thread-safe: Steps read on the event loop, RPCs on it or on a store thread.
    """

    def __init__(
        self, entries: int = DEFAULT_LINEAGE_ENTRIES, most_elements: int = DEFAULT_LINEAGE_ELEMENTS
    ) -> None:
        self._noted: SizedLru[_Noted] = SizedLru(
            entries, most_elements, lambda noted: len(noted.messages)
        )
        # Noting reads the last read and replaces it: two at once would each extend the
        # read before both, and the second would claim a lineage the first broke.
        self._lock = threading.Lock()

    def note(
        self, flow_id: str, head: tuple[AgentMessage, ...], messages: tuple[AgentMessage, ...]
    ) -> None:
        """Note ``messages``, ``head`` followed by window messages, as session ``flow_id``'s
        newest read. ``head`` is the chunks' run: the same object while it stays the same."""
        with self._lock:
            last = self._noted.get(flow_id)
            if last is not None and _starts_with(messages, head, last):
                lineage = last.lineage
            else:
                lineage = Lineage()
            self._noted.put(flow_id, _Noted(messages, head, lineage))

    def lineage(self, flow_id: str, messages: object) -> Lineage | None:
        """The lineage of ``messages`` when it is session ``flow_id``'s newest noted read."""
        last = self._noted.get(flow_id)
        return last.lineage if last is not None and last.messages is messages else None

    def clear(self) -> None:
        """Forget every read."""
        self._noted.clear()


def _starts_with(
    messages: tuple[AgentMessage, ...], head: tuple[AgentMessage, ...], last: _Noted
) -> bool:
    """Whether ``messages`` starts with ``last.messages``: both start with ``head`` (the
    empty tuple is one object, but then the window's part is everything compared)."""
    if last.head is not head or len(messages) < len(last.messages):
        return False
    start, end = len(head), len(last.messages)
    return messages[start:end] == last.messages[start:]
