"""Where a browser's event stream starts, so that it replays the active turn's events.

A browser that loads the snapshot while a turn runs rebuilds the turn's live
text from the turn's events, so the token it opens the stream from must come
before the turn's first retained event: ``turn_started``, or for an
``executing`` turn the ``plan_updated`` and ``plan_execution_started`` events
committed with it. Without an active turn the stream starts after the newest
event.

The search walks the Stream newest first, as Dex lists it, one event at a time
(``advance_replay_search``), and stops at the first event older than the
turn's ``turn_started``. A turn whose ``turn_started`` was trimmed starts before
its oldest retained event; the walk then ends at an event of an earlier turn or
at the oldest retained event. Events without a turn are skipped on the way.
A turn's events are contiguous in the Stream apart from such events, because
one turn is active at a time.

The walk runs after the snapshot was read, and the turn the snapshot shows may
have ended meanwhile, with the next turn's events after its own. So given the
token read before the snapshot (``snapshot_token``), the events newer than it
of another turn are passed like events without a turn, and when none of the
turn's events is found the answer is that token, not the newest.
"""

from __future__ import annotations

import attrs

from dex_agents.domain.events import AgentEventType


@attrs.frozen(kw_only=True)
class ReplaySearch:
    """A newest-first walk of the Stream for the token to open the event stream from.

    ``turn_id`` is the active turn (``None`` when none is). ``done`` says the
    walk may stop; ``resume_token`` is the answer so far, and the answer when
    the walk ran out of events.
    """

    turn_id: str | None
    snapshot_token: str | None = None
    """The token after the newest event before the snapshot (``""``: none), or ``None``: no bound."""
    before_snapshot: bool = False
    newest_token: str | None = None
    start_token: str = ""
    after_turn_event: bool = False
    seen_turn_event: bool = False
    seen_turn_start: bool = False
    done: bool = False

    @property
    def resume_token(self) -> str:
        """The token to read from: before the turn's oldest event seen, else after the newest event.

        ``""`` (the oldest retained event) when the turn's oldest event seen is the
        oldest retained one, or when the Stream holds no event. Before the
        newest event, ``snapshot_token`` when given: what came after the
        snapshot is replayed.
        """
        if self.seen_turn_event:
            return self.start_token
        if self.snapshot_token is not None:
            return self.snapshot_token
        return self.newest_token or ""


def advance_replay_search(
    search: ReplaySearch, *, event_type: str, event_turn_id: str | None, resume_token: str
) -> ReplaySearch:
    """The search after one more event, older than every event it has seen.

    ``resume_token`` is the token that resumes after this event.
    """
    if search.done:
        return search
    newest = resume_token if search.newest_token is None else search.newest_token
    if search.turn_id is None:
        return attrs.evolve(search, newest_token=newest, done=True)
    before_snapshot = (
        search.before_snapshot
        or search.snapshot_token is None
        or resume_token == search.snapshot_token
    )
    if event_turn_id == search.turn_id:
        return attrs.evolve(
            search,
            before_snapshot=before_snapshot,
            newest_token=newest,
            # Reading after the event older than this one replays this one.
            start_token="",
            after_turn_event=True,
            seen_turn_event=True,
            seen_turn_start=search.seen_turn_start or event_type == AgentEventType.TURN_STARTED,
        )
    start = resume_token if search.after_turn_event else search.start_token
    # Another turn's event ends the walk, unless a later turn wrote it after the snapshot.
    done = search.seen_turn_start or (event_turn_id is not None and before_snapshot)
    return attrs.evolve(
        search,
        before_snapshot=before_snapshot,
        newest_token=newest,
        start_token=start,
        after_turn_event=False,
        done=done,
    )
