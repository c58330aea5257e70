"""The session's GenAI spans: one trace per activation, emitted through the tracing port.

The Steps call these helpers; the helpers decide names, parents, kinds and
attributes and hand them to a ``SessionTracer`` (the OpenTelemetry adapter, or
``NoTracer``). Nothing here raises into a Step: each helper reports a failure
with ``report_tracing_failure`` and skips its span.

The activation's root (``invoke_agent``) stores its ``traceparent`` in
``AgentTraceContext`` in the commit of the Step that starts the activation;
``RunModel`` parents its ``chat`` span from it and creates each tool call record
with it; each tool Step parents its ``execute_tool`` span from its record.
"""

from dex_agents.app.tracing.activation import start_activation
from dex_agents.app.tracing.common import TracerSlot
from dex_agents.app.tracing.model_spans import ModelAttempt, model_attempt
from dex_agents.app.tracing.tool_spans import ToolAttempt, tool_attempt

__all__ = [
    "ModelAttempt",
    "ToolAttempt",
    "TracerSlot",
    "model_attempt",
    "start_activation",
    "tool_attempt",
]
