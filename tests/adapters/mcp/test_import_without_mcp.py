"""``dex_agents.mcp`` without its extra: ``ImportError`` naming ``dex-agents[mcp]``.

The core needs no MCP SDK, and neither do the pure naming and convention rules.
"""

from __future__ import annotations

from tests.support.missing_extras import import_without


def test_importing_without_the_extra_names_it() -> None:
    printed = import_without(
        "mcp",
        "dex_agents.mcp",
        also_import=["dex_agents.domain.mcp_naming", "dex_agents.domain.mcp_conventions"],
    )
    assert printed == (
        'ImportError None | dex_agents.mcp needs the MCP SDK: pip install "dex-agents[mcp]" '
        "| ModuleNotFoundError"
    )
