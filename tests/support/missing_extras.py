"""Import a facade in a fresh interpreter where an extra's package cannot be imported.

``None`` in ``sys.modules`` is how Python marks a module that must not be
imported: ``import`` of it raises ``ImportError``. The program first imports the
core (and any ``also_import`` modules, such as an adapter's pure rules) to show
that they need no extra, then the facade, and prints what its import raised.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]

_PROGRAM = textwrap.dedent(
    """
    import importlib, sys
    sys.modules[{missing!r}] = None
    for name in ("dex_agents", "dex_agents.builtin_loop", *{also_import!r}):
        importlib.import_module(name)
    try:
        importlib.import_module({module!r})
    except ImportError as error:
        print(type(error).__name__, error.name, "|", error, "|", type(error.__cause__).__name__)
    else:
        print("imported")
    """
)


def import_without(missing: str, module: str, also_import: Sequence[str] = ()) -> str:
    """What importing ``module`` prints when ``missing`` cannot be imported:
    ``"<error type> <error.name> | <message> | <cause type>"``, or ``"imported"``."""
    program = _PROGRAM.format(missing=missing, module=module, also_import=tuple(also_import))
    finished = subprocess.run(
        [sys.executable, "-c", program],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return finished.stdout.strip()
