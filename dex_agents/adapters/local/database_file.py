"""Checks at the door of a session database file, before SQLite opens (or creates) it.

SQLite's own errors for a bad path name the symptom ("unable to open database
file", "file is not a database") and a read-only file is found only at the first
write, after a user has typed a message. These checks name the fault once, in
the same words for every caller: an empty path or one that ends with a slash,
a NUL character or a name the system refuses (too long), a directory, a
missing folder or a file in its place, a missing file that should exist, a file
that is not SQLite, and a file or folder that cannot be written.
"""

from __future__ import annotations

import os
from pathlib import Path

from dex_agents.ports.errors import EngineError

SQLITE_HEADER = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file."""


class DatabaseFileError(EngineError, ValueError):
    """A session database path that cannot be used as one; the message names the fault."""


def _read_only_file_system(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def check_database_file(path: str | os.PathLike[str], *, must_exist: bool) -> Path:
    """Return ``path`` when a session database can be opened there, else raise ``DatabaseFileError``.

    ``must_exist`` refuses a missing file instead of letting SQLite create an
    empty one (listing or showing sessions must never create a database).
    """
    text = os.fspath(path)
    # Path() drops a trailing slash and turns "" into ".": a folder meant as a folder
    # became a database file of its name, and an empty --db became "the directory .".
    if not text:
        raise DatabaseFileError("the session database path is empty")
    if "\0" in text:
        # Passed the checks below as a missing file, then SQLite said "embedded null byte".
        raise DatabaseFileError(f"{text!r} contains a NUL character, which no file name can")
    try:
        return _check_path(text, must_exist=must_exist)
    except DatabaseFileError:
        raise
    except OSError as error:
        # pathlib's checks raise what they cannot read as "no", such as a name too long.
        raise DatabaseFileError(
            f"{text} cannot be used as a session database: {error.strerror}"
        ) from error


def _check_path(text: str, *, must_exist: bool) -> Path:
    if text.endswith(("/", os.sep)) and not Path(text).is_dir():
        raise DatabaseFileError(f"{text} ends with a slash: name the database file, not a folder")
    database = Path(text)
    folder = database.parent
    if database.is_dir():
        raise DatabaseFileError(f"{database} is a directory, not a session database")
    if not folder.is_dir():
        if folder.exists():
            raise DatabaseFileError(f"{database}: {folder} is a file, not a folder")
        raise DatabaseFileError(f"{database}: the folder {folder} does not exist")
    if not database.exists():
        if must_exist:
            raise DatabaseFileError(f"no session database at {database}")
        if _read_only_file_system(folder) or not os.access(folder, os.W_OK | os.X_OK):
            raise DatabaseFileError(
                f"{database} cannot be created: the folder {folder} is read-only"
            )
        return database
    if not database.is_file():
        raise DatabaseFileError(f"{database} is not a regular file, not a session database")
    try:
        with database.open("rb") as file:
            header = file.read(len(SQLITE_HEADER))
    except OSError as error:
        raise DatabaseFileError(f"{database} cannot be read: {error.strerror}") from error
    # SQLite writes its header with the first table, so an empty file is a new database:
    # fine to create into, but not a database that should exist (a truncated one).
    if not header and must_exist:
        raise DatabaseFileError(f"{database} is empty, not a session database")
    if header and header != SQLITE_HEADER:
        raise DatabaseFileError(f"{database} is not a session database (not an SQLite file)")
    if _read_only_file_system(database) or not os.access(database, os.W_OK):
        raise DatabaseFileError(f"{database} is read-only: a session database must be writable")
    # WAL mode keeps two files beside the database, so the folder must take writes too.
    if not os.access(folder, os.W_OK | os.X_OK):
        raise DatabaseFileError(
            f"{database} cannot be used: its folder {folder} is read-only "
            "(SQLite keeps its write-ahead log beside the database)"
        )
    return database
