"""``dex-agents`` at the door: one line per fault, found before anyone types, for every command."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import pytest

from dex_agents.cli.database import demo_flow
from dex_agents.cli.main import main
from dex_agents.local import LocalRuntime
from tests.cli.cli_support import read_only, read_only_unavailable, run_cli

COMMANDS: dict[str, Callable[[Path], list[str]]] = {
    "chat": lambda db: ["chat", "--db", str(db)],
    "sessions": lambda db: ["sessions", "--db", str(db)],
    "show": lambda db: ["show", "s1", "--db", str(db)],
}


def _directory(tmp_path: Path) -> tuple[Path, str]:
    db = tmp_path / "folder.sqlite3"
    db.mkdir()
    return db, f"{db} is a directory, not a session database"


def _missing_folder(tmp_path: Path) -> tuple[Path, str]:
    db = tmp_path / "nowhere" / "db.sqlite3"
    return db, f"{db}: the folder {db.parent} does not exist"


def _not_a_database(tmp_path: Path) -> tuple[Path, str]:
    db = tmp_path / "notes.sqlite3"
    db.write_text("this is not a SQLite database, just some text\n" * 100, encoding="utf-8")
    return db, f"{db} is not a session database (not an SQLite file)"


FAULTS = {
    "directory": _directory,
    "missing folder": _missing_folder,
    "not a database": _not_a_database,
}


def _run(capsys: pytest.CaptureFixture[str], arguments: list[str]) -> tuple[int, str, str]:
    code = main(arguments)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("command", COMMANDS)
def test_a_faulty_database_path_is_one_line_before_anything_is_typed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, fault: str
) -> None:
    db, message = FAULTS[fault](tmp_path)
    before = sorted(tmp_path.rglob("*"))
    assert _run(capsys, COMMANDS[command](db)) == (1, "", f"dex-agents: error: {message}\n")
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.parametrize("command", ["sessions", "show"])
def test_reading_commands_never_create_a_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    db = tmp_path / "missing.sqlite3"
    assert _run(capsys, COMMANDS[command](db)) == (
        1,
        "",
        f"dex-agents: error: no session database at {db}\n",
    )
    assert list(tmp_path.iterdir()) == []


def _new_database(db: Path) -> None:
    async def create() -> None:
        async with LocalRuntime(db, [demo_flow()], workers=0):
            pass

    asyncio.run(create())


@pytest.mark.parametrize("command", COMMANDS)
def test_a_read_only_database_fails_at_the_start(tmp_path: Path, command: str) -> None:
    reason = read_only_unavailable()
    if reason is not None:
        pytest.skip(reason)
    folder = tmp_path / "read-only"
    folder.mkdir()
    db = folder / "db.sqlite3"
    _new_database(db)
    with read_only(folder) as prefix:
        result = run_cli(tmp_path, *COMMANDS[command](db), prefix=prefix, stdin="hello\n/quit\n")
    assert (result.returncode, result.stdout, result.stderr) == (
        1,
        "",
        f"dex-agents: error: {db} is read-only: a session database must be writable\n",
    )


def test_chat_cannot_create_a_database_in_a_read_only_folder(tmp_path: Path) -> None:
    reason = read_only_unavailable()
    if reason is not None:
        pytest.skip(reason)
    folder = tmp_path / "read-only"
    folder.mkdir()
    db = folder / "db.sqlite3"
    with read_only(folder) as prefix:
        result = run_cli(tmp_path, *COMMANDS["chat"](db), prefix=prefix, stdin="/quit\n")
    assert (result.returncode, result.stdout, result.stderr) == (
        1,
        "",
        f"dex-agents: error: {db} cannot be created: the folder {folder} is read-only\n",
    )
    assert not db.exists()


@pytest.mark.parametrize(
    ("arguments", "fault"),
    [
        (["chat", "--session", "evil\x1b[2Jid"], "the control character U+001B at index 4"),
        (["chat", "--session", "a\rb"], "the control character U+000D at index 1"),
        (["chat", "--session", "a/b"], "it contains '/'"),
        (["chat", "--session", "  "], "it is blank"),
        (["show", "evil\x1b[31m"], "the control character U+001B at index 4"),
    ],
)
def test_a_session_id_with_control_characters_is_refused_and_printed_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], arguments: list[str], fault: str
) -> None:
    db = tmp_path / "db.sqlite3"
    code, out, err = _run(capsys, [*arguments, "--db", str(db)])
    assert (code, out) == (1, "")
    assert err.startswith("dex-agents: error: invalid session ID ")
    assert fault in err
    assert err.count("\n") == 1
    assert "\x1b" not in err
    assert "\r" not in err
    assert not db.exists()


def test_version_comes_from_the_package_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"dex-agents {metadata.version('dex-agents')}\n"
    assert metadata.version("dex-agents") == "0.5.0"


def test_a_bare_command_prints_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("usage: dex-agents [-h] [--version] COMMAND ...\n")
    for command in COMMANDS:
        assert f"    {command} " in captured.out
    assert captured.err == ""


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["chat", "--colour"], "dex-agents: error: unrecognized arguments: --colour"),
        (["frobnicate"], "dex-agents: error: argument COMMAND: invalid choice: 'frobnicate'"),
        (["show"], "dex-agents show: error: the following arguments are required: ID"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], arguments: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(arguments)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(message)


def test_show_names_a_session_that_is_not_there(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite3"
    _new_database(db)
    result = run_cli(tmp_path, "show", "nope", "--db", str(db))
    assert (result.returncode, result.stdout, result.stderr) == (
        1,
        "",
        f"dex-agents: error: no session with ID 'nope' in {db}\n",
    )
