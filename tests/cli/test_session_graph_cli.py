"""``dex-agents-session-graph``: renders the session graph to stdout or, atomically, into a directory."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dex_agents.cli.session_graph import main
from dex_agents.session_graph import render_session_flow_graph, render_session_flow_graph_dot


@pytest.mark.parametrize(
    ("options", "file_name", "render"),
    [
        ([], "SupportAgent.json", render_session_flow_graph),
        (["--format", "json"], "SupportAgent.json", render_session_flow_graph),
        (["--format", "dot"], "SupportAgent.dot", render_session_flow_graph_dot),
    ],
)
def test_writes_the_rendering_into_the_output_dir_and_prints_its_path(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    options: list[str],
    file_name: str,
    render: Callable[[str, str], str],
) -> None:
    code = main(["SupportAgent", "support-agent.operate", "--output-dir", str(tmp_path), *options])
    assert code == 0
    path = tmp_path / file_name
    assert capsys.readouterr().out == f"{path}\n"
    assert path.read_text(encoding="utf-8") == render("SupportAgent", "support-agent.operate")
    assert [entry.name for entry in tmp_path.iterdir()] == [file_name]
    # Readable by a Dex Web that runs as another user, whatever the temporary file's mode was.
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_the_json_file_round_trips_as_a_flow_definition_graph(tmp_path: Path) -> None:
    assert main(["SupportAgent", "support-agent.operate", "--output-dir", str(tmp_path)]) == 0
    graph = json.loads((tmp_path / "SupportAgent.json").read_text(encoding="utf-8"))
    assert graph["schemaVersion"] == "1.0"
    assert graph["flow"]["name"] == "SupportAgent"
    rpcs = [node for node in graph["nodes"] if node["kind"] == "rpc"]
    assert {node["metadata"]["requiredPermission"] for node in rpcs} == {"support-agent.operate"}


def test_replaces_an_earlier_file_and_creates_missing_directories(tmp_path: Path) -> None:
    directory = tmp_path / "build" / "flows"
    assert main(["SupportAgent", "old.permission", "--output-dir", str(directory)]) == 0
    path = directory / "SupportAgent.json"
    path.chmod(0o640)
    assert main(["SupportAgent", "support-agent.operate", "--output-dir", str(directory)]) == 0
    assert path.read_text(encoding="utf-8") == render_session_flow_graph(
        "SupportAgent", "support-agent.operate"
    )
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert [entry.name for entry in directory.iterdir()] == ["SupportAgent.json"]


@pytest.mark.parametrize(
    ("options", "render"),
    [([], render_session_flow_graph), (["--format", "dot"], render_session_flow_graph_dot)],
)
def test_without_an_output_dir_prints_the_rendering(
    capsys: pytest.CaptureFixture[str], options: list[str], render: Callable[[str, str], str]
) -> None:
    assert main(["SupportAgent", "support-agent.operate", *options]) == 0
    assert capsys.readouterr().out == render("SupportAgent", "support-agent.operate")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the following arguments are required: FLOW_TYPE, ACTION_PERMISSION"),
        (["SupportAgent"], "the following arguments are required: ACTION_PERMISSION"),
        (
            ["agents/SupportAgent", "p"],
            "argument FLOW_TYPE: flow_type must not contain '/': 'agents/SupportAgent'",
        ),
        (["", "p"], "argument FLOW_TYPE: flow_type must not be blank"),
        (
            ["SupportAgent", " "],
            "argument ACTION_PERMISSION: action_permission must not be blank",
        ),
        (
            # os.fsdecode of a command line that is not UTF-8.
            ["Support\udcffAgent", "p"],
            "argument FLOW_TYPE: flow_type is not valid Unicode text: "
            "it has a lone surrogate U+DCFF at index 7",
        ),
        (
            ["SupportAgent", "p", "--format", "svg"],
            "argument --format: invalid choice: 'svg' (choose from 'dot', 'json')",
        ),
    ],
)
def test_bad_arguments_exit_2_naming_the_argument(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as raised:
        main(argv)
    assert raised.value.code == 2
    error = capsys.readouterr().err
    assert error.endswith(f"dex-agents-session-graph: error: {message}\n")


def test_an_unwritable_output_dir_returns_1_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("", encoding="utf-8")
    code = main(["SupportAgent", "p", "--output-dir", str(not_a_directory)])
    assert code == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(
        f"dex-agents-session-graph: error: cannot write {not_a_directory / 'SupportAgent.json'}: "
    )


ROOT = Path(__file__).resolve().parents[2]
COMMAND = (sys.executable, "-m", "dex_agents.cli.session_graph", "SupportAgent", "p")


def test_a_reader_that_stops_reading_ends_the_command_quietly() -> None:
    # `dex-agents-session-graph ... | head` once the reader is gone: a pipe without a reader.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        finished = subprocess.run(
            COMMAND, cwd=ROOT, stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60
        )
    finally:
        os.close(write_end)
    assert finished.stderr == ""
    assert finished.returncode == 141


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_failed_write_to_standard_output_is_one_line_and_1() -> None:
    with open("/dev/full", "w", encoding="utf-8") as full:
        finished = subprocess.run(
            COMMAND, cwd=ROOT, stdout=full, stderr=subprocess.PIPE, text=True, timeout=60
        )
    assert finished.stderr == (
        "dex-agents-session-graph: error: cannot write to standard output: "
        "[Errno 28] No space left on device\n"
    )
    assert finished.returncode == 1
