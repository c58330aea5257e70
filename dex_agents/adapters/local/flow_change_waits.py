"""Which Flow runs got Stream events, as one process has looked: a reader of one wakes for it.

A Stream reader that finds no new event waits for the store to change, then
reads again. With many sessions waiting at once (a client following each of its
users' sessions), every commit of any session woke every reader, and each read
its own session's Stream for nothing: in a run of 50 sessions, 7 of a turn's 10
reads of the client found no event. Stores that log which runs each commit
appended events to (``FlowChangeLog``) let the process read that log once per
change of the store's counter and wake only the readers of the runs in it.

The same looks say which runs changed at all, events or not: a wait for a
session to need a person, which rereads its snapshot when its Stream has been
quiet for a while, skips the reread when no commit changed the session since
the mark it took before its last read (``run_changed_after``), and a list of
every session rebuilds only the rows of the runs changed since its last build
(``runs_changed_after``).

A reader takes a ``mark`` after looking at the counter and before its read:
every commit the read may have missed came after that look, so a later look
finds it in the log, under a newer epoch than the mark. A reader that then
waits registers a wake-up for its run (``watch``), and whichever look next
finds the run in the log calls it: one look per change of the counter serves
every waiting reader, however many wait.
"""

from __future__ import annotations

from collections.abc import Callable

from dex_agents.ports.store_capabilities import FlowChangeLog

MOST_RUNS_KEPT = 65536
"""How many runs' last change epochs are kept; past it they are all forgotten, which wakes
every waiter once."""


class FlowChanges:
    """The epoch of the last look that saw each Flow run get events, and that saw it change at
    all (without a log: any run)."""

    def __init__(self, log: FlowChangeLog | None, most_runs: int = MOST_RUNS_KEPT) -> None:
        self._log = log
        self._most = most_runs
        self._counter: int | None = None  # the store's change counter at the last look
        self._change: int | None = None  # the newest change number the log gave
        self._epoch = 0
        self._every_run_epoch = 0  # the last look after which any run may have changed
        # Each run a look saw get events -> (that look's epoch, the number of the newest
        # commit that appended to the run).
        self._runs: dict[str, tuple[int, int]] = {}
        self._changed: dict[str, int] = {}  # each run a look saw change -> that look's epoch
        self._watchers: dict[str, set[Callable[[], None]]] = {}

    def look(self, counter: int) -> int:
        """Take the store's change ``counter``, read just now; return the epoch it is seen at.

        When it moved since the last look, the log says which runs changed.
        """
        if counter == self._counter:
            return self._epoch
        with_events: dict[str, int] | None = None
        changed: frozenset[str] | None = None
        if self._log is not None:
            with_events, changed, self._change = self._log.runs_logged_since(self._change)
        # Only once the log was read: should that fail, the next look reads it again.
        self._counter = counter
        self._epoch += 1
        if (
            with_events is None
            or changed is None
            # Every run a look saw get events it saw change: _changed holds _runs' keys.
            or len(self._changed) + len(changed) > self._most
        ):
            self._runs.clear()
            self._changed.clear()
            self._every_run_epoch = self._epoch
            self.wake_all()
        else:
            for flow_id in changed:
                self._changed[flow_id] = self._epoch
            for flow_id, number in with_events.items():
                self._runs[flow_id] = (self._epoch, number)
                for wake in self._watchers.get(flow_id, ()):
                    wake()
        return self._epoch

    def last_events_change(self, flow_id: str) -> int | None:
        """The number of the newest commit that appended to ``flow_id``'s Stream, as of the
        latest look; ``None`` when no look since the last that could not tell saw it get any."""
        seen = self._runs.get(flow_id)
        return None if seen is None else seen[1]

    @property
    def epoch(self) -> int:
        """The epoch of the latest look."""
        return self._epoch

    def watch(self, flow_id: str, wake: Callable[[], None]) -> None:
        """Call ``wake`` at each later look that sees ``flow_id`` get events, until ``unwatch``."""
        self._watchers.setdefault(flow_id, set()).add(wake)

    def unwatch(self, flow_id: str, wake: Callable[[], None]) -> None:
        """Stop calling ``wake`` for ``flow_id``."""
        wakes = self._watchers.get(flow_id, set())
        wakes.discard(wake)
        if not wakes:
            self._watchers.pop(flow_id, None)

    def watched(self) -> bool:
        """Whether any reader waits for its run now."""
        return bool(self._watchers)

    def wake_all(self) -> None:
        """Call every watcher's wake-up (a look that cannot tell which runs changed)."""
        for wakes in list(self._watchers.values()):
            for wake in list(wakes):
                wake()

    def changed_after(self, flow_id: str, mark: int) -> bool:
        """Whether a look after epoch ``mark`` saw ``flow_id`` get events (or could not tell)."""
        seen = self._runs.get(flow_id)
        return self._every_run_epoch > mark or (seen is not None and seen[0] > mark)

    def run_changed_after(self, flow_id: str, mark: int) -> bool:
        """Whether a look after epoch ``mark`` saw ``flow_id`` change at all, events or not
        (or could not tell)."""
        return self._every_run_epoch > mark or self._changed.get(flow_id, 0) > mark

    def runs_changed_after(self, mark: int) -> frozenset[str] | None:
        """Every run a look after epoch ``mark`` saw change; ``None`` when one could not tell
        which runs changed (then any may have)."""
        if self._every_run_epoch > mark:
            return None
        return frozenset(flow_id for flow_id, epoch in self._changed.items() if epoch > mark)
