"""Worker marks: each running worker holds an exclusive ``flock`` on a file of its own.

The kernel drops a ``flock`` when the last descriptor of its open file closes, so
the mark of a worker whose process ended, by SIGKILL too, is free at once. SQLite's
WAL mode needs every process of a database on one machine, so every worker of a
file can look at every other's mark: a lease whose owner's mark is free was lost
when that process ended, and need not wait until it lapses.

The marks live in ``<database>-workers/``, one file per lease owner, named by a
hash of the owner's ID. A look gives one of three answers, and only a mark that
exists and is free says an owner is gone:

- a held mark: the owner runs (or a process it forked still holds the file);
- no mark: the owner never held one, released it when it stopped, or its mark
  was removed (once its leases were recovered, or when it held none); its leases
  lapse as before;
- a free mark: the owner's process ended.

A mark is made under a temporary name, locked, checked from a second descriptor
(a file system whose locks lock nothing gets no mark), then linked to its name,
so its name never shows an unlocked file of a running worker. A worker holds its
mark before its first claim. When it stops holding no lease it releases the mark
(name first, then the lock), so a release never looks like a death; when it
stops while a started attempt keeps its lease, it holds the mark until its
process ends.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import uuid
from pathlib import Path
from typing import Final

from dex_agents.adapters.local.store_errors import WorkerIdInUseError

logger = logging.getLogger(__name__)

MARKS_DIRECTORY_SUFFIX: Final = "-workers"
"""The marks' directory is the database file's path with this suffix."""

_LINK_TRIES: Final = 3


def marks_directory(database: Path) -> Path:
    """Where the workers of ``database`` keep their marks."""
    return database.with_name(database.name + MARKS_DIRECTORY_SUFFIX)


def _in_use_message(owner: str, mark: Path) -> str:
    # The mark holds its owner and its process's ID, one a line.
    try:
        process = mark.read_text(encoding="utf-8", errors="replace").split("\n")[1].strip()
    except (OSError, IndexError):
        process = "unknown"
    return (
        f"worker ID {owner!r} is held by a running worker of another process (pid {process}) "
        f"on {mark.parent}: two workers with one ID would take over each other's leases; "
        "give each process its own worker_id_prefix, or none"
    )


def _owner_of(mark: Path) -> str | None:
    # The text is the owner and the process's ID, one a line; an owner may hold newlines.
    try:
        text = mark.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    owner, _, rest = text.removesuffix("\n").rpartition("\n")
    return owner if rest else None


def _mark_name(owner: str) -> str:
    # Owners are any text (a worker_id of the caller's choosing); a hash names a file.
    return hashlib.sha256(owner.encode("utf-8", "surrogatepass")).hexdigest()[:40] + ".lock"


def _is_free(path: Path) -> bool | None:
    """Whether the mark at ``path`` is free (``True``), held (``False``), or absent or
    unreadable (``None``)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:
        return None
    finally:
        os.close(descriptor)  # also drops the lock this look may have taken
    return True


class HeldMark:
    """A worker's mark while it runs; ``release`` it when the worker has stopped."""

    def __init__(self, descriptor: int, path: Path, *, took_over: bool = False) -> None:
        self._descriptor: int | None = descriptor
        self._path = path
        self.took_over = took_over
        """Whether it replaced the mark of an earlier process of the same owner ID, which
        ended: that process's leases bear this ID, and the worker recovers them before it
        claims anything (``LocalWorker.run``)."""

    @property
    def path(self) -> Path:
        """The mark's file."""
        return self._path

    def release(self) -> None:
        """Remove the mark's name, then drop its lock; a second call does nothing."""
        descriptor, self._descriptor = self._descriptor, None
        if descriptor is None:
            return
        # The name goes first: a look between the two steps finds no mark, never a free one.
        with contextlib.suppress(OSError):
            os.unlink(self._path)
        os.close(descriptor)
        # The directory too when no other mark is in it, so a database whose workers all
        # stopped leaves nothing beside it; a worker making its mark meanwhile tries again.
        with contextlib.suppress(OSError):
            self._path.parent.rmdir()


class WorkerMarkFiles:
    """The marks of one database's workers (``WorkerMarks`` of ``SqliteFlowStore``)."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory

    def hold_worker_mark(self, owner: str) -> HeldMark | None:
        """Hold ``owner``'s mark until its process ends or the mark is released.

        ``None``, with a warning, when the file system refuses: the worker then runs
        without one, and its leases lapse as before. ``WorkerIdInUseError`` when a
        running worker of another process holds the same owner's mark: the two would
        take each other's leases.
        """
        final = self._directory / _mark_name(owner)
        temporary = self._directory / f".{uuid.uuid4().hex}.tmp"
        try:
            descriptor = self._create(temporary)
        except OSError as error:
            logger.warning("worker %r runs without a mark: %s", owner, error)
            return None
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: never held
            if _is_free(temporary) is not False:
                # A file system whose locks lock nothing would show a live worker's mark
                # free: no mark is better than one that says a running worker is gone.
                logger.warning("worker %r runs without a mark: %s does not lock", owner, temporary)
                os.close(descriptor)
                return None
            os.write(descriptor, f"{owner}\n{os.getpid()}\n".encode("utf-8", "backslashreplace"))
            took_over = False
            for _ in range(_LINK_TRIES):
                try:
                    os.link(temporary, final)
                except FileExistsError:
                    if _is_free(final) is False:
                        raise WorkerIdInUseError(_in_use_message(owner, final)) from None
                    # A mark of an earlier process with this owner ID, which ended.
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(final)
                    took_over = True
                    continue
                return HeldMark(descriptor, final, took_over=took_over)
        except WorkerIdInUseError:
            os.close(descriptor)
            raise
        except OSError as error:
            logger.warning("worker %r runs without a mark: %s", owner, error)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        os.close(descriptor)
        return None

    def _create(self, temporary: Path) -> int:
        for _ in range(_LINK_TRIES):
            self._directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            try:
                return os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            except FileNotFoundError:
                continue  # the last worker's release removed the directory just now
        raise FileNotFoundError(f"{self._directory} keeps disappearing")

    def worker_gone(self, owner: str) -> bool:
        """Whether ``owner`` held a mark and its process has ended; ``False`` while it runs and
        whenever the marks cannot tell."""
        return _is_free(self._directory / _mark_name(owner)) is True

    def gone_owners(self) -> frozenset[str]:
        """The owners of every free mark: their process ended. A mark whose text does not
        name the owner it is named for (one that ``utf-8`` cannot spell) is left out."""
        try:
            names = [entry.name for entry in os.scandir(self._directory)]
        except OSError:
            return frozenset()
        gone: set[str] = set()
        # Temporary names are left alone: one is made unlocked, and locked just after.
        for name in names:
            path = self._directory / name
            if name.startswith(".") or _is_free(path) is not True:
                continue
            owner = _owner_of(path)
            if owner is not None and _mark_name(owner) == name:
                gone.add(owner)
        return frozenset(gone)

    def forget_worker_mark(self, owner: str) -> None:
        """Remove the mark of ``owner`` when it is free: its leases were recovered."""
        path = self._directory / _mark_name(owner)
        if _is_free(path) is True:
            # A new process of the same owner may have linked its own mark since the look:
            # removing it only makes that worker's marks say nothing, never that it is gone.
            with contextlib.suppress(OSError):
                os.unlink(path)
