"""Word that some process committed to a database's ``-wal`` file, from Linux's inotify.

A process learns of another process's commit only by reading the store's change
counter, which an idle engine does every ``poll_interval`` (100 ms): a client
process beside a worker process waited up to that long for the worker to see
its message, and as long again to see the reply. A store sets the ``-wal``
file's times once each commit that changed rows is visible (``WalSync.signal``),
so a descriptor that becomes readable then tells the engine when a read of the
counter is worth making (``LocalEngine``); the polls stay, for whatever this
misses.

Only those times are watched, not the file's page writes: a commit writes its
pages before it is visible, and a watch of the writes woke a reader three or
four times a commit (a client following its session, 16 times a turn beside a
worker process), each look but the last finding nothing. A writer that does not
set the times (a program other than dex-agents, or a dex-agents from before the
signal came in, 2026-12-06) is seen by the polls alone.

inotify takes a path, not a descriptor of the file: the process opens no
descriptor of SQLite's files that it would close (closing one drops every POSIX
lock the process holds on that file, SQLite's own included). Where inotify is
missing (not Linux) or refused (no instance left, the file not there yet),
``open`` gives ``None`` and the engine polls alone, as before.
"""

from __future__ import annotations

import ctypes
import os
import weakref
from collections.abc import Callable
from pathlib import Path

_IN_ATTRIB = 0x00000004  # the file's times set: a commit landed (``WalSync.signal``)
_READ_SIZE = 65536


_Init = Callable[[int], int]
_AddWatch = Callable[[int, bytes, int], int]


def _inotify() -> tuple[_Init, _AddWatch] | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        raw_init, raw_add_watch = libc.inotify_init1, libc.inotify_add_watch
    except (OSError, AttributeError):
        return None
    raw_init.argtypes = [ctypes.c_int]
    raw_init.restype = ctypes.c_int
    raw_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    raw_add_watch.restype = ctypes.c_int
    init: _Init = raw_init
    add_watch: _AddWatch = raw_add_watch
    return init, add_watch


_CALLS = _inotify()


class WalWrites:
    """A descriptor that becomes readable when any process signals a commit to the database's
    ``-wal`` file (sets its times).

    The commits of this process count too: the engine reads the change counter to
    tell them apart. ``drain`` empties it before the next wait.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        # An engine dropped without close() must not keep its inotify instance: a user has
        # few of them (128 by default).
        self._closing = weakref.finalize(self, os.close, fd)

    @classmethod
    def open(cls, database: Path) -> WalWrites | None:
        """Watch the signals of commits to ``database``'s ``-wal`` file; ``None`` when this
        system cannot."""
        if _CALLS is None:
            return None
        init, add_watch = _CALLS
        fd = init(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            return None
        wal = database.with_name(database.name + "-wal")
        if add_watch(fd, os.fsencode(wal), _IN_ATTRIB) < 0:
            os.close(fd)
            return None
        return cls(fd)

    def fileno(self) -> int:
        """The descriptor to wait on for reading."""
        return self._fd

    def drain(self) -> bool:
        """Read the events queued so far, and say whether there was any; the descriptor is not
        readable until the next signal."""
        if self._fd < 0:
            return False
        try:
            # One read takes every event queued (16 bytes each, and a watched file's events
            # coalesce while unread): a second one would only fail with EAGAIN, or take the
            # signals of commits made since, which a wait that follows would see anyway.
            return bool(os.read(self._fd, _READ_SIZE))
        except OSError:  # nothing queued (EAGAIN); the engine's counter read decides anyway
            return False

    def close(self) -> None:
        """Stop watching; closing twice does nothing."""
        self._fd = -1
        self._closing()
