"""Which tracer a session Flow type's Steps use: the OpenTelemetry adapter or none."""

from __future__ import annotations

from dex_agents.app.options import AgentTracingOptions
from dex_agents.ports.tracing import NoTracer, SessionTracer


def build_session_tracer(options: AgentTracingOptions) -> SessionTracer:
    """The OpenTelemetry adapter when tracing is enabled and the API is installed; else ``NoTracer``.

    With tracing disabled, OpenTelemetry is never imported.
    """
    if not options.is_enabled:
        return NoTracer()
    try:
        from dex_agents.adapters.otel.tracer import OpenTelemetrySessionTracer
    except ImportError:
        return NoTracer()
    return OpenTelemetrySessionTracer(options.tracer_provider, options.semantic_conventions_version)
