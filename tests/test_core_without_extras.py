"""The core and the CLI import with no extra installed, as ``./demo.sh`` installs them.

A module that imports an extra's library at import time breaks the main job on a
fresh machine (``dex-agents chat`` once failed because ``serve`` imported
Starlette). Each extra's packages are made unimportable in a fresh interpreter.
"""

from __future__ import annotations

import subprocess
import sys

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
