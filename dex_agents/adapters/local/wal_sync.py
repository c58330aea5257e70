"""A durable commit's fsync, taken after SQLite has let the write lock go.

With ``synchronous=FULL`` SQLite syncs the WAL inside ``COMMIT``, while the
commit still holds the write lock, so every other process's writer waits out
each fsync (a quarter to half a millisecond here): with a client and one or two
worker processes on one file, that lock is what they queue for. The store
writes every commit with ``synchronous=NORMAL`` instead, and a durable one
(``FlowStore.run(durable=True)``, the default) does not return until
``WalSync.sync`` has synced the WAL file, right after ``COMMIT``: the committer
learns of its commit only once it is on disk, as before, and the next writer
appends its own frames meanwhile.

What another process reads may now be a commit whose fsync is still running.
A power failure (not a process crash: the WAL's pages are in the operating
system's cache then) in that instant loses that commit with every later one,
never alone: the WAL is replayed in order up to its last synced frame, and any
commit that another process made durable after reading it synced the frames
before its own. So nothing durable ever depends on a commit that was lost; a
person may only have seen it (a Stream event, a snapshot) before it was. A
worker starts a Step only once the commit that claimed it is synced (every
commit that hands out claims is durable), so no call goes out on a commit that
a power failure could take back.

A sync that fails leaves a commit that others can read but that may not be on
disk, and Linux reports such an error once and may mark the pages clean, so a
later sync that succeeds proves nothing about it. The store refuses every
transaction from then on (``StoreNotDurableError``) until the process opens the
file again, which reads back what the disk kept.
"""

from __future__ import annotations

import os
from pathlib import Path

from dex_agents.adapters.local.store_errors import StoreNotDurableError

# Linux syncs a file's data (and its size) without its other metadata; macOS has no
# fdatasync, and a full fsync is what its SQLite does there.
_sync_data = getattr(os, "fdatasync", os.fsync)

# Setting a file's times through a descriptor (futimens); where it is missing, no signal is sent.
_TIMES_BY_DESCRIPTOR = os.utime in os.supports_fd


class WalSync:
    """Syncs a database's ``-wal`` file through a descriptor of its own; fails for good once a sync fails."""

    def __init__(self, database: Path) -> None:
        self.database = database
        self.path = database.with_name(database.name + "-wal")
        # Opened at the first sync: SQLite creates the file with the first transaction,
        # and keeps it (the same inode) while any connection of the file is open.
        self._fd: int | None = None
        self._failure: str | None = None

    def check(self) -> None:
        """Raise ``StoreNotDurableError`` if a sync has failed."""
        if self._failure is not None:
            raise StoreNotDurableError(self._failure)

    def signal(self) -> None:
        """Say to the processes watching the WAL file that a commit has landed: set the file's
        times, which inotify reports to them (``wal_writes.py``).

        It comes once the commit is visible, before its fsync (what another process may
        read then is as above): a look then finds the commit. The watchers heard the page
        writes until 2026-12-06, which come before the commit is visible: a look found
        nothing and looked again a millisecond later (an event loop sleeps no shorter), and
        a reader woke three or four times a commit. Best effort: a failure here loses
        nothing, the watchers' polls still see the commit.
        """
        if not _TIMES_BY_DESCRIPTOR:
            return
        # try/except, not contextlib.suppress: its object and two calls, once a commit.
        try:
            os.utime(self._descriptor())
        except OSError:
            return  # best effort, as above

    def sync(self) -> None:
        """Sync the WAL file to disk, or raise ``StoreNotDurableError`` now and from then on."""
        self.check()
        try:
            _sync_data(self._descriptor())
        except OSError as error:
            self._failure = (
                f"a commit to {self.database} was written "
                f"but syncing {self.path} failed ({error}): whether it and every later commit "
                "are on disk is unknown; restart the process to open the file again"
            )
            raise StoreNotDurableError(self._failure) from error

    def _descriptor(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        return self._fd

    def close(self) -> None:
        """Close the descriptor; a failed sync's refusal stays."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
