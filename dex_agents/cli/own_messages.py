"""The messages this chat sent that the session has not stored yet.

The chat shows its own messages as they are typed, so their stored copies are not
shown again. One sent while a turn runs waits in the session's queue, where
another window (the console, an API call) may delete it: it is then never
stored, and the chat says so rather than leave the person waiting for an answer
to it. A snapshot lists each queued or steered message with its Channel ID,
and a message the session accepted is always queued, steered or stored (see
``domain.attention``), so a message of this chat that a later snapshot lists in
none of them was deleted.
"""

from __future__ import annotations

from dataclasses import dataclass

from dex_agents.domain.requests import AgentSnapshot


@dataclass
class _Sent:
    number: int
    text: str
    message_id: str | None = None  # its Channel ID, once a snapshot listed it queued


class OwnMessages:
    """This chat's messages from ``sent`` until ``stored`` or ``deleted`` accounts for them."""

    def __init__(self) -> None:
        self._sent: list[_Sent] = []
        self._count = 0

    @property
    def count(self) -> int:
        """How many messages were sent so far: read before a snapshot, the ``sent_before``
        of ``deleted``."""
        return self._count

    def sent(self, text: str) -> None:
        """The session accepted ``text`` from this chat."""
        self._sent.append(_Sent(self._count, text))
        self._count += 1

    def stored(self, text: str) -> bool:
        """A turn started with the user message ``text``: whether it is one of this chat's
        (which is then accounted for)."""
        for index, sent in enumerate(self._sent):
            if sent.text == text:
                del self._sent[index]
                return True
        return False

    def deleted(self, snapshot: AgentSnapshot, sent_before: int) -> list[str]:
        """The texts of this chat's messages that ``snapshot`` shows were deleted: sent
        before it was read (``count`` then was ``sent_before``), not stored in it (its new
        messages went to ``stored`` first), and no longer queued or steered."""
        waiting = (*snapshot.queued_messages, *snapshot.steered_messages)
        listed = {message.message_id for message in waiting}
        claimed = {sent.message_id for sent in self._sent if sent.message_id is not None}
        gone: list[_Sent] = []
        for sent in self._sent:
            if sent.number >= sent_before:
                continue  # the snapshot may have been read before the session had it
            if sent.message_id is None:
                # The first snapshot that lists it gives its ID: the first listed message
                # with its text that no other message of this chat claimed.
                match = next(
                    (
                        message.message_id
                        for message in waiting
                        if message.text == sent.text and message.message_id not in claimed
                    ),
                    None,
                )
                sent.message_id = match
                if match is not None:
                    claimed.add(match)
            if sent.message_id is None or sent.message_id not in listed:
                gone.append(sent)
        self._sent = [sent for sent in self._sent if sent not in gone]
        return [sent.text for sent in gone]
