"""Connector operations as agent tools (``dex_agents.connectors``; needs ``dex-connectors-sdk``).

``ConnectorToolSource`` is a ``ToolSource`` of reviewed Connector operations, each
built with ``connector_tool``; every call runs in its own tool Step through the
Connector SDK's ``run_query`` or ``run_mutation``. See the design's "Connector tools".
"""

from __future__ import annotations

try:
    import dex_connectors_sdk  # type: ignore[import-not-found]
except ImportError as error:
    # Not "pip install dex-agents[connectors]": that extra is empty in this build
    # (docs/spec-differences.md), so following the advice would change nothing.
    raise ImportError(
        "dex_agents.connectors needs the Connector SDK: install dex-connectors-sdk 0.9.0 or "
        "later from the Dex package index; it is not on PyPI, so the connectors extra of "
        "this build installs nothing",
        name=__name__,
    ) from error
if not hasattr(dex_connectors_sdk, "raise_dex_retry"):
    # An older SDK would otherwise fail below with "cannot import name", naming no version.
    raise ImportError(
        "dex_agents.connectors needs Connector SDK 0.9.0 or later, the first release that "
        "exports raise_dex_retry; the installed dex-connectors-sdk does not: upgrade it "
        "from the Dex package index",
        name=__name__,
    )

from dex_agents.adapters.connectors.source import (
    DEFAULT_CONNECTOR_SOURCE_NAME,
    ConnectorTool,
    ConnectorToolSource,
    connector_tool,
)
from dex_agents.adapters.connectors.step_context import ConnectorStepContext
from dex_agents.domain.connector_naming import (
    CONNECTOR_NOT_SENT_RETRY_LATER,
    CONNECTOR_RESULT_TRUNCATED_NOTE,
    DEFAULT_CONNECTOR_RESULT_MAX_BYTES,
)

__all__ = [
    "CONNECTOR_NOT_SENT_RETRY_LATER",
    "CONNECTOR_RESULT_TRUNCATED_NOTE",
    "DEFAULT_CONNECTOR_RESULT_MAX_BYTES",
    "DEFAULT_CONNECTOR_SOURCE_NAME",
    "ConnectorStepContext",
    "ConnectorTool",
    "ConnectorToolSource",
    "connector_tool",
]
