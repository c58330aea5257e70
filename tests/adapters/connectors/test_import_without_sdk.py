"""``dex_agents.connectors`` without the Connector SDK: ``ImportError`` naming what to install.

The core needs no Connector SDK, and neither do the pure naming rules.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.support.missing_extras import REPOSITORY, import_without


def test_importing_without_the_sdk_names_it() -> None:
    printed = import_without(
        "dex_connectors_sdk",
        "dex_agents.connectors",
        also_import=["dex_agents.domain.connector_naming"],
    )
    # Found by an audit: the message said to pip install "dex-agents[connectors]",
    # whose extra installs nothing in this build, so following it changed nothing.
    assert printed == (
        "ImportError dex_agents.connectors | dex_agents.connectors needs the Connector SDK: "
        "install dex-connectors-sdk 0.9.0 or later from the Dex package index; it is not on "
        "PyPI, so the connectors extra of this build installs nothing | ModuleNotFoundError"
    )


def test_importing_with_an_sdk_older_than_0_9_0_names_the_version() -> None:
    # SDKs before 0.9.0 lack raise_dex_retry; the import once failed with only
    # "cannot import name 'raise_dex_retry'".
    program = textwrap.dedent(
        """
        import sys, types
        old = types.ModuleType("dex_connectors_sdk")
        for name in ("Call", "RetryError", "derive_call_id", "run_query", "run_mutation"):
            setattr(old, name, object())
        sys.modules["dex_connectors_sdk"] = old
        try:
            import dex_agents.connectors
        except ImportError as error:
            print(error.name, "|", error)
        """
    )
    finished = subprocess.run(
        [sys.executable, "-c", program],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert finished.stdout.strip() == (
        "dex_agents.connectors | dex_agents.connectors needs Connector SDK 0.9.0 or later, "
        "the first release that exports raise_dex_retry; the installed dex-connectors-sdk "
        "does not: upgrade it from the Dex package index"
    )
