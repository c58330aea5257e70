"""The temporary files of ``LocalDirectoryMediaStore``, and the sweep of those a killed writer left.

A put writes ``<root>/sha256/.<sha256>.<16 hex digits>.tmp`` and renames it to
``<sha256>``; a writer killed in between (SIGKILL, a power failure) leaves it
behind. The writer holds an exclusive ``flock`` on its temporary file from just
after creating it until after the rename, so a live writer's file is always
locked, and the kernel drops the lock when the writer's process ends. A sweep
removes a temporary file only when all of these hold:

- its name is one a put makes, and it is a regular file (no link is followed);
- it is older than ``STALE_TEMPORARY_AGE``, far longer than any put takes, so a
  file between its creation and its writer's lock is never one (and a writer
  that finds its file taken in that gap makes another: ``create_temporary``);
- its lock can be taken now: no live writer holds it. Where the file system
  refuses locks, nothing is swept.

A store sweeps once, at its first put: the sweep lists the directory, which a put
of one image should not pay for every time.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
import time
from datetime import timedelta
from typing import Final

STALE_TEMPORARY_AGE: Final = timedelta(hours=1)
"""How old a temporary file must be before a sweep may remove it."""

_CREATE_TRIES: Final = 3
_TEMPORARY_NAME: Final = re.compile(r"\.[0-9a-f]{64}\.[0-9a-f]{16}\.tmp")
_OPEN_FLAGS: Final = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def create_temporary(sha_fd: int, sha256: str, flags: int, mode: int) -> tuple[str, int]:
    """Create a new temporary file for the image ``sha256`` in ``sha_fd`` with ``os.open``'s
    ``flags`` and ``mode``, and lock it: its name and descriptor, locked while it stays open.

    A sweep that took the file between its creation and its lock (only one that does
    not wait for a file's age: ``STALE_TEMPORARY_AGE`` is the first guard) removed or
    holds it: the writer sees that and makes another. A file system that refuses
    locks gets an unlocked file, which no sweep takes.
    """
    for _ in range(_CREATE_TRIES):
        name = f".{sha256}.{secrets.token_hex(8)}.tmp"
        fd = os.open(name, flags, mode, dir_fd=sha_fd)
        try:
            if _still_ours(sha_fd, name, fd):
                return name, fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    raise FileNotFoundError(f"temporary files in {sha256}'s directory keep disappearing")


def _still_ours(sha_fd: int, name: str, fd: int) -> bool:
    # Imported here, as in _remove_if_stale: the store module stays importable where
    # there is no fcntl, and refuses such a platform when a store is built.
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False  # a sweep holds it, and removes it
    except OSError:
        return True  # no locks here: no sweep takes it either
    try:
        named = os.stat(name, dir_fd=sha_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False  # a sweep removed it before the lock
    opened = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)


def sweep_stale_temporaries(sha_fd: int) -> list[str]:
    """Remove the stale temporary files of killed writers from the ``sha256`` directory
    ``sha_fd``; return their names. Best effort: what cannot be looked at is left."""
    removed: list[str] = []
    cutoff = time.time() - STALE_TEMPORARY_AGE.total_seconds()
    try:
        names = os.listdir(sha_fd)
    except (OSError, NotImplementedError):  # a platform that cannot list by descriptor
        return removed
    for name in names:
        if _TEMPORARY_NAME.fullmatch(name) and _remove_if_stale(sha_fd, name, cutoff):
            removed.append(name)
    return removed


def _remove_if_stale(sha_fd: int, name: str, cutoff: float) -> bool:
    import fcntl

    try:
        status = os.stat(name, dir_fd=sha_fd, follow_symlinks=False)
        if not stat.S_ISREG(status.st_mode) or status.st_mtime >= cutoff:
            return False
        fd = os.open(name, _OPEN_FLAGS, dir_fd=sha_fd)
    except OSError:
        return False
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (status.st_dev, status.st_ino):
            return False  # the name changed between the look and the open
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # a live writer holds it, or the file system cannot tell
        os.unlink(name, dir_fd=sha_fd)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True
