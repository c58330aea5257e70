"""``dex_agents.litellm`` without its extra: ``ImportError`` naming ``dex-agents[litellm]``.

The core needs no LiteLLM, and neither do the client's rules.
"""

from __future__ import annotations

from tests.support.missing_extras import import_without


def test_importing_without_the_extra_names_it() -> None:
    printed = import_without(
        "litellm", "dex_agents.litellm", also_import=["dex_agents.adapters.litellm.routing"]
    )
    assert printed == (
        "ImportError dex_agents.litellm | dex_agents.litellm needs LiteLLM: install it with "
        'pip install "dex-agents[litellm]" | ModuleNotFoundError'
    )
