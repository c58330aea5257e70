"""``dex_agents.litellm`` without its extra: ``ImportError`` naming ``dex-agents[litellm]``.

A fresh interpreter runs with ``litellm`` made unimportable (``None`` in
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
    sys.modules["litellm"] = None
    import dex_agents, dex_agents.builtin_loop  # the core needs no LiteLLM
    from dex_agents.adapters.litellm import routing  # nor do the client's rules
    try:
        import dex_agents.litellm
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
        "ImportError dex_agents.litellm | dex_agents.litellm needs LiteLLM: install it with "
        'pip install "dex-agents[litellm]" | ModuleNotFoundError'
    )
