"""``dex-agents-session-graph``: render the session Flow Definition Graph for Dex Web.

::

    dex-agents-session-graph FLOW_TYPE ACTION_PERMISSION [--output-dir DIR] [--format json|dot]

With ``--output-dir`` it writes ``DIR/<FLOW_TYPE>.json`` (or ``.dot``), replacing
an earlier file atomically so Dex Web never reads half a graph, and prints the
path; without it, it prints the rendering. Start Dex Web with
``--flow-rendering-dir DIR`` to show the sessions of ``FLOW_TYPE``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from dex_agents.domain.session_graph_document import (
    validate_action_permission,
    validate_flow_type,
)
from dex_agents.session_graph import render_session_flow_graph, render_session_flow_graph_dot

PROG = "dex-agents-session-graph"

_SIGPIPE_EXIT = 128 + 13  # what a shell reports for a program that SIGPIPE ended

_RENDERERS: dict[str, Callable[[str, str], str]] = {
    "json": render_session_flow_graph,
    "dot": render_session_flow_graph_dot,
}


def _checked(check: Callable[[str], None]) -> Callable[[str], str]:
    # argparse reports a ValueError from a type function as "argument NAME: invalid ..."
    # without its text, so the check's message travels in an ArgumentTypeError.
    def convert(value: str) -> str:
        try:
            check(value)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from error
        return value

    return convert


def build_parser() -> argparse.ArgumentParser:
    """The command's argument parser."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Render the session Flow Definition Graph of a Flow type for Dex Web's "
        "--flow-rendering-dir.",
    )
    parser.add_argument(
        "flow_type", metavar="FLOW_TYPE", type=_checked(validate_flow_type), help="the Flow type"
    )
    parser.add_argument(
        "action_permission",
        metavar="ACTION_PERMISSION",
        type=_checked(validate_action_permission),
        help="the permission a person needs for the session's Actions",
    )
    parser.add_argument(
        "--output-dir",
        metavar="DIR",
        type=Path,
        help="write DIR/FLOW_TYPE.json (or .dot) there and print its path; "
        "without it, print the rendering",
    )
    parser.add_argument(
        "--format",
        choices=sorted(_RENDERERS),
        default="json",
        help="json: a Flow Definition Graph for Dex Web (default); dot: Graphviz DOT",
    )
    return parser


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory and ``os.replace``."""
    # mkstemp creates the file readable by its owner only; a Dex Web running as
    # another user must still read the graph, so keep the old file's mode or use 0o644.
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = 0o644
    descriptor, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"
    )
    try:
        os.fchmod(descriptor, mode)
        with os.fdopen(descriptor, "w", encoding="utf-8", newline="\n") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def _print_rendering(text: str) -> int:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()  # a failed write is reported here, not at the interpreter's exit
    except OSError as error:
        # Point stdout at /dev/null so the interpreter's final flush of what is
        # still buffered does not fail again with a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        if isinstance(error, BrokenPipeError):
            return _SIGPIPE_EXIT  # the reader stopped reading (``... | head``): no message
        print(f"{PROG}: error: cannot write to standard output: {error}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``dex-agents-session-graph``; bad arguments exit 2, a failed write returns 1.

    A reader that stops reading standard output ends it quietly with 141, as SIGPIPE would.
    """
    arguments = build_parser().parse_args(argv)
    text = _RENDERERS[arguments.format](arguments.flow_type, arguments.action_permission)
    if arguments.output_dir is None:
        return _print_rendering(text)
    directory: Path = arguments.output_dir
    path = directory / f"{arguments.flow_type}.{arguments.format}"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_atomically(path, text)
    except OSError as error:
        print(f"{PROG}: error: cannot write {path}: {error}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
