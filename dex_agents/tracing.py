"""Tracing's public names in one place, and the logger its failures go to.

``AgentTracingOptions`` (passed as ``AgentSessionOptions.tracing``) and
``GenAISemanticConventionsVersion`` are also exported from ``dex_agents``.
``TRACING_LOGGER`` is the ``dex_agents.tracing`` logger: a failing OpenTelemetry
call is logged there once with its traceback, later ones at debug, and never
fails or retries a Step. Importing this module imports no OpenTelemetry.
"""

from __future__ import annotations

from dex_agents.app.options import AgentTracingOptions
from dex_agents.domain.tracing import GenAISemanticConventionsVersion
from dex_agents.ports.tracing import TRACING_LOGGER

__all__ = ["TRACING_LOGGER", "AgentTracingOptions", "GenAISemanticConventionsVersion"]
