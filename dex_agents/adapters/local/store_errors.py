"""The embedded engine's store errors: each names the file and what is wrong with it."""

from __future__ import annotations

from dex_agents.ports.errors import EngineError


class StoreError(EngineError):
    """The embedded engine's SQLite store failed; the message names the file."""


class StoreBusyError(StoreError):
    """Another connection held the store's write lock for longer than the busy timeout; retry later."""

    retryable = True


class StoreCorruptError(StoreError):
    """The file is not a dex-agents flow store database, or its database is corrupt."""


class StoredValueError(StoreCorruptError):
    """A stored value is not the JSON its type needs: the file is damaged, or another
    program wrote it. Raised where the value is decoded; the store adds its path."""


class UnreadableStateError(StoreCorruptError):
    """A claimed Step's stored state could not be read: a value it loads is damaged.

    Its attempt fails with this error, naming the value, as a Step that raised does,
    so its retry policy and failure route decide; nothing stored is changed, and once
    a person repairs the value a Flow that has not ended goes on.
    """


class StoreVersionError(StoreError):
    """The file's schema is newer than this dex-agents understands."""


class StoreFileGoneError(StoreError):
    """The database file this store opened was deleted or replaced by another file.

    SQLite keeps writing into the unlinked file, so a process that went on would
    acknowledge work nobody else can see; the store refuses every transaction
    instead, until the process opens the new file.
    """


class StoreNotDurableError(StoreError):
    """Syncing a commit to disk failed: it may be read but lost in a power failure, with every
    commit after it. The store refuses every transaction until the process opens the file
    again (``wal_sync.py``)."""


class WorkerIdInUseError(EngineError):
    """A running worker of another process holds the mark of this worker's ID on this file.

    Two live workers with one ID would renew, release and recover each other's
    leases, so one could run an attempt the other is running; the second one does
    not start. Give each process its own ``worker_id_prefix``, or none (a random ID).
    """
