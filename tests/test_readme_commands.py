"""The ``dex-agents`` command lines the README shows are ones the CLI takes.

A newcomer types them as written: a command or flag the CLI renamed or dropped
would end their first try with a usage error. Each line is parsed with the
CLI's own parser, not run (the chats would wait for a key, the consoles serve
until stopped); ``tests/cli`` runs the commands themselves.
"""

from __future__ import annotations

import shlex

import pytest

from dex_agents.cli.main import build_parser
from tests.test_examples import readme_blocks


def readme_command_lines() -> list[str]:
    """Every ``uv run dex-agents ...`` line of the README's bash blocks, in order."""
    return [
        line.strip()
        for block in readme_blocks()
        if block.language == "bash"
        for line in block.text.splitlines()
        if " uv run dex-agents" in f" {line}"
    ]


def test_the_readme_shows_every_command_of_the_cli() -> None:
    shown = {
        shlex.split(line.split("uv run dex-agents", 1)[1])[0] for line in readme_command_lines()
    }

    assert shown == {"chat", "sessions", "show", "serve"}


@pytest.mark.parametrize("line", readme_command_lines())
def test_each_readme_command_line_parses(line: str, capsys: pytest.CaptureFixture[str]) -> None:
    words = shlex.split(line.split("uv run dex-agents", 1)[1])
    try:
        arguments = build_parser().parse_args(words)
    except SystemExit as refused:
        pytest.fail(f"{line!r} is refused ({refused.code}): {capsys.readouterr().err}")

    assert arguments.command == words[0]
