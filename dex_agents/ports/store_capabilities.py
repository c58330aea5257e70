"""What a ``FlowStore`` may offer beyond transactions, each a protocol the engine checks for.

A store that has one of these lets the engine do less work or notice sooner; a
store without it still works, by reading and polling:

- ``CommittedEvents``: the Stream events its own commits appended, without a read;
- ``WatchableWrites`` (``WriteWatch``): a signal that another process may have written;
- ``WorkerMarks`` (``WorkerMark``): marks the OS drops when a worker's process ends,
  so its leases are recovered then instead of when they lapse;
- ``FlowChangeLog`` (``ChangedFlows``, ``LoggedRuns``): which Flow runs changed and
  which got Stream events after a change number.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from dex_agents.ports.flow_rows import EventRow


@runtime_checkable
class CommittedEvents(Protocol):
    """A store that knows the Stream events its own commits appended, without a read.

    A reader in the same process that follows a session's Stream gets the next
    event from here when this store committed it right after the one the reader
    has, with nothing between them; otherwise it reads.
    """

    def event_after(self, flow_id: str, after_id: int) -> EventRow | None:
        """The event of ``flow_id`` right after event ``after_id`` when this store committed it
        knowing the event before it; ``None`` when only a read can tell."""
        ...

    def newest_committed_event(self, flow_id: str) -> tuple[EventRow, int] | None:
        """The last event this store's commits appended to ``flow_id``'s Stream and the change
        number (``FlowChangeLog``) of that commit; ``None`` when it does not know.

        While the log names that commit as the run's newest to append events, the
        event is the run's newest, and a reader that has it need not read to know."""
        ...


class WriteWatch(Protocol):
    """A descriptor that becomes readable when some process may have written the store."""

    def fileno(self) -> int:
        """The descriptor to wait on for reading."""
        ...

    def drain(self) -> bool:
        """Take what made it readable, and say whether anything did; it is not readable again
        until the next write."""
        ...

    def close(self) -> None:
        """Stop watching."""
        ...


@runtime_checkable
class WatchableWrites(Protocol):
    """A store that several processes may write, and that can say when one may have.

    The engine still reads ``FlowStore.change_counter`` to know whether anything
    changed (the writes of its own process are signalled too), and still polls it:
    the signal only makes another process's commit seen sooner.
    """

    def watch_writes(self) -> WriteWatch | None:
        """A new watch of this store's writes, which the caller closes; ``None`` when this
        system cannot watch them."""
        ...

    def written_elsewhere(self) -> bool:
        """Whether another connection committed since this was last asked (``True`` at the
        first ask and when it cannot tell now). Asked after each commit of the engine and
        at each look at a write signal, before that look's counter read: a commit of
        another process that neither has seen yet may be in the counter read after a
        commit (landed before it began, its signal still to come, or landed during it),
        so that commit must not pass for one that changed nothing but this process's
        rows; and a look must not take such a commit for one already seen."""
        ...


class WorkerMark(Protocol):
    """A running worker's mark (``WorkerMarks.hold_worker_mark``)."""

    @property
    def took_over(self) -> bool:
        """Whether it replaced the mark of an earlier process of the same owner ID, which
        ended: that process's leases bear this ID, and the worker recovers them before it
        claims anything."""
        ...

    def release(self) -> None:
        """Stop marking: the worker has stopped and commits nothing more."""
        ...


@runtime_checkable
class WorkerMarks(Protocol):
    """A store whose workers each hold a mark that the operating system drops when the
    worker's process ends, however it ends (SIGKILL too).

    A lease whose owner's mark was dropped was lost when that process ended: the
    engine recovers it then, as if it had lapsed, instead of when it lapses. Without
    marks, or for an owner that holds none, leases are recovered when they lapse.
    """

    def hold_worker_mark(self, owner: str) -> WorkerMark | None:
        """Mark ``owner`` as running until its process ends or the mark is released;
        ``None`` when it cannot be marked (then its leases lapse as before). Raises when
        a running worker of another process holds ``owner``'s mark: two live workers
        with one ID would take over each other's leases."""
        ...

    def worker_gone(self, owner: str) -> bool:
        """Whether ``owner`` held a mark and its process has ended; ``False`` while it runs
        and whenever this cannot tell."""
        ...

    def gone_owners(self) -> frozenset[str]:
        """The owners whose mark was dropped: ``worker_gone`` of each is ``True``."""
        ...

    def forget_worker_mark(self, owner: str) -> None:
        """Remove the dropped mark of ``owner``, whose leases were recovered or who held none."""
        ...


ChangedFlows = tuple[dict[str, bool] | None, int]
"""The Flow runs changed after a change number, each with whether its row or Attribute values
changed (``None``: cannot tell, so any, wholly), and the newest number."""

LoggedRuns = tuple[dict[str, int] | None, frozenset[str] | None, int]
"""What the change log holds after a change number: the Flow runs that got Stream events, each
with the number of its newest commit that appended events; every run changed at all, events or
not; and the newest number. ``None``: cannot tell, so any."""


@runtime_checkable
class FlowChangeLog(Protocol):
    """A store that tells which Flow runs changed and which got new Stream events, so a reader
    of one run's Stream wakes only for it, and a wait on one run looks again only when it
    changed.

    Every commit that changes a run's stored rows logs the run under a change
    number that grows with each such commit, and whether it appended to its Stream.
    """

    def runs_logged_since(self, change: int | None) -> LoggedRuns:
        """The runs that got Stream events after number ``change`` (each with the number of
        its newest commit that appended events), every run changed after it, and the newest
        number; ``change=None`` asks for the newest number alone. A cheap read that waits
        behind no transaction, like ``FlowStore.change_counter``."""
        ...
