"""``dex_agents.s3`` without its extra: ``ImportError`` naming ``dex-agents[s3]``.

A fresh interpreter runs with ``aiobotocore`` made unimportable (``None`` in
``sys.modules``, as Python treats a module that must not be imported).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[3]

PROGRAM = textwrap.dedent(
    """
    import sys
    sys.modules["aiobotocore"] = None
    import dex_agents, dex_agents.builtin_loop  # the core needs no S3 client
    try:
        import dex_agents.s3
    except ImportError as error:
        print(type(error).__name__, error.name, "|", error, "|", type(error.__cause__).__name__)
    else:
        print("imported")
    """
)


def test_importing_without_the_extra_names_it() -> None:
    finished = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert finished.stdout.strip() == (
        "ImportError dex_agents.s3 | dex_agents.s3 needs aiobotocore: install it with "
        'pip install "dex-agents[s3]" | ModuleNotFoundError'
    )
