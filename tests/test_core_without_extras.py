"""The core and the CLI import with no extra installed, as ``./demo.sh`` installs them.

A module that imports an extra's library at import time breaks the main job on a
fresh machine (``dex-agents chat`` once failed because ``serve`` imported
Starlette). Each extra's packages are made unimportable in a fresh interpreter.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXTRA_PACKAGES = ("starlette", "uvicorn", "litellm", "opentelemetry", "mcp", "aiobotocore")
CORE_MODULES = (
    "dex_agents",
    "dex_agents.builtin_loop",
    "dex_agents.local",
    "dex_agents.testing",
    "dex_agents.ui_stream",
    "dex_agents.tracing",
    "dex_agents.cli.main",
)

PROGRAM = """
import sys
for name in {packages!r}:
    sys.modules[name] = None  # import name now raises ImportError
import importlib
for module in {modules!r}:
    importlib.import_module(module)
from dex_agents.cli.main import main
raise SystemExit(main(["chat", "--help"]))
"""


def test_the_core_and_the_cli_import_without_any_extra() -> None:
    program = PROGRAM.format(packages=EXTRA_PACKAGES, modules=CORE_MODULES)
    completed = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode == 0, completed.stderr
    assert "usage: dex-agents chat" in completed.stdout


ROOT = Path(__file__).resolve().parents[1]

COMMAND_WITHOUT = """
import sys
sys.path.insert(0, {root!r})  # this checkout's package, run in the test's directory
for name in {packages!r}:
    sys.modules[name] = None
from dex_agents.cli.main import main
raise SystemExit(main({argv!r}))
"""


def _refused_without(packages: tuple[str, ...], argv: list[str], cwd: Path) -> str:
    program = COMMAND_WITHOUT.format(root=str(ROOT), packages=packages, argv=argv)
    completed = subprocess.run(
        [sys.executable, "-c", program],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 1, completed.stderr
    return completed.stderr


def test_the_hints_for_a_missing_extra_keep_the_extras_installed_before(tmp_path: Path) -> None:
    # `uv sync --extra console` uninstalls LiteLLM and `uv sync --extra litellm` the
    # console: `serve --model` sent a newcomer from one hint to the other and back.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    model = _refused_without(("litellm",), ["chat", "--model", "openai/gpt-5-mini"], tmp_path)
    console = _refused_without(("starlette", "uvicorn"), ["serve"], tmp_path)

    for stderr, command in (
        (model, "uv sync --inexact --extra litellm"),
        (console, "uv sync --inexact --extra console"),
    ):
        assert f"needs the {command.rsplit(' ', 1)[1]} extra: {command} (" in stderr
        assert len(stderr.splitlines()) == 1
        assert f"`{command}`" in readme
