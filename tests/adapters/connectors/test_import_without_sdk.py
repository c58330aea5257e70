"""``dex_agents.connectors`` without the Connector SDK: ``ImportError`` naming what to install."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[3]

PROGRAM = textwrap.dedent(
    """
    import sys
    sys.modules["dex_connectors_sdk"] = None
    import dex_agents, dex_agents.builtin_loop  # the core needs no Connector SDK
    from dex_agents.domain import connector_naming  # nor do the pure rules
    try:
        import dex_agents.connectors
    except ImportError as error:
        print(type(error).__name__, error.name, "|", error, "|", type(error.__cause__).__name__)
    else:
        print("imported")
    """
)


def test_importing_without_the_sdk_names_it() -> None:
    finished = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert finished.stdout.strip() == (
        "ImportError dex_agents.connectors | dex_agents.connectors needs the Connector SDK: "
        'install dex-connectors-sdk 0.9.0 or later with pip install "dex-agents[connectors]" '
        "(dex-connectors-sdk is not on PyPI; install it from the Dex package index) "
        "| ModuleNotFoundError"
    )
