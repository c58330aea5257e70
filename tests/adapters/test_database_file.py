"""``check_database_file``: one wording per fault, before SQLite opens or creates anything."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dex_agents import AgentSessionFlow
from dex_agents.adapters.local.database_file import DatabaseFileError, check_database_file
from dex_agents.local import LocalRuntime
from tests.app.scripted_runner import ScriptedRunner


def sqlite_file(path: Path) -> Path:
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE t (x)")
    connection.close()
    return path


def test_a_new_file_in_an_existing_folder_is_fine(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite3"
    assert check_database_file(path, must_exist=False) == path
    assert not path.exists()  # checking creates nothing


def test_an_existing_database_and_an_empty_file_are_fine(tmp_path: Path) -> None:
    database = sqlite_file(tmp_path / "db.sqlite3")
    empty = tmp_path / "empty.sqlite3"
    empty.touch()
    assert check_database_file(database, must_exist=True) == database
    assert check_database_file(empty, must_exist=False) == empty  # a new database
    with pytest.raises(DatabaseFileError, match="is empty, not a session database"):
        check_database_file(empty, must_exist=True)  # one that should exist was truncated


@pytest.mark.parametrize(
    ("make", "must_exist", "message"),
    [
        (lambda p: p, False, "{p} is a directory, not a session database"),
        (
            lambda p: p / "no-such-folder" / "db.sqlite3",
            False,
            "the folder {p}/no-such-folder does not exist",
        ),
        (lambda p: p / "missing.sqlite3", True, "no session database at {p}/missing.sqlite3"),
    ],
    ids=["directory", "missing folder", "missing file that must exist"],
)
def test_path_faults(
    tmp_path: Path, make: Callable[[Path], Path], must_exist: bool, message: str
) -> None:
    path = make(tmp_path)
    with pytest.raises(DatabaseFileError, match=message.format(p=tmp_path)):
        check_database_file(path, must_exist=must_exist)


def test_a_path_that_names_a_folder_or_nothing_is_refused(tmp_path: Path) -> None:
    # Path() reads "x/" as "x" and "" as ".": a database file was created named for the
    # folder meant, and an empty path was reported as the directory ".".
    with pytest.raises(DatabaseFileError, match=r"^the session database path is empty$"):
        check_database_file("", must_exist=False)
    sqlite_file(tmp_path / "db.sqlite3")
    for name in ("new-folder/", "db.sqlite3/"):  # a folder to be, and a file named as a folder
        given = f"{tmp_path}/{name}"
        with pytest.raises(DatabaseFileError) as refused:
            check_database_file(given, must_exist=False)
        assert str(refused.value) == (
            f"{given} ends with a slash: name the database file, not a folder"
        )
    assert not (tmp_path / "new-folder").exists()
    with pytest.raises(DatabaseFileError, match="is a directory, not a session database"):
        check_database_file(f"{tmp_path}/", must_exist=False)


def test_a_path_no_file_can_have_is_refused_by_name(tmp_path: Path) -> None:
    # A NUL passed as a missing file and SQLite failed with "embedded null byte"; a name
    # too long escaped as a bare OSError; a file in the folder's place read "does not exist".
    (tmp_path / "notes.txt").write_text("notes")
    nul, long, under_a_file = (
        f"{tmp_path}/a\0b",
        f"{tmp_path}/{'x' * 300}",
        f"{tmp_path}/notes.txt/db",
    )
    faults = {
        nul: f"{nul!r} contains a NUL character, which no file name can",
        long: f"{long} cannot be used as a session database: File name too long",
        under_a_file: f"{under_a_file}: {tmp_path}/notes.txt is a file, not a folder",
    }
    for path, message in faults.items():
        for must_exist in (False, True):
            with pytest.raises(DatabaseFileError) as refused:
                check_database_file(path, must_exist=must_exist)
            assert str(refused.value) == message


async def test_a_runtime_checks_the_path_as_given(tmp_path: Path) -> None:
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="Checked")
    with pytest.raises(DatabaseFileError, match="ends with a slash"):
        async with LocalRuntime(f"{tmp_path}/sessions/", [flow]):
            pass
    assert not os.listdir(tmp_path)


def test_a_file_that_is_not_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello, not a database\n")
    with pytest.raises(
        DatabaseFileError, match="is not a session database \\(not an SQLite file\\)"
    ):
        check_database_file(path, must_exist=False)


@pytest.fixture
def read_only_folder(tmp_path: Path) -> Iterator[Path]:
    """A folder holding a database, on a read-only tmpfs as root (root ignores modes), or a skip."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:
        sqlite_file(folder / "db.sqlite3")
        (folder / "db.sqlite3").chmod(0o444)
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    mount = ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)]
    mounted = subprocess.run(mount, capture_output=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        sqlite_file(folder / "db.sqlite3")
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_read_only_file_and_folder(read_only_folder: Path) -> None:
    with pytest.raises(DatabaseFileError, match=r"cannot be created: the folder .* is read-only"):
        check_database_file(read_only_folder / "new.sqlite3", must_exist=False)
    with pytest.raises(
        DatabaseFileError, match="is read-only: a session database must be writable"
    ):
        check_database_file(read_only_folder / "db.sqlite3", must_exist=True)
