"""``dex_agents.connectors`` without the Connector SDK: ``ImportError`` naming what to install.

The core needs no Connector SDK, and neither do the pure naming rules.
"""

from __future__ import annotations

from tests.support.missing_extras import import_without


def test_importing_without_the_sdk_names_it() -> None:
    printed = import_without(
        "dex_connectors_sdk",
        "dex_agents.connectors",
        also_import=["dex_agents.domain.connector_naming"],
    )
    assert printed == (
        "ImportError dex_agents.connectors | dex_agents.connectors needs the Connector SDK: "
        'install dex-connectors-sdk 0.9.0 or later with pip install "dex-agents[connectors]" '
        "(dex-connectors-sdk is not on PyPI; install it from the Dex package index) "
        "| ModuleNotFoundError"
    )
