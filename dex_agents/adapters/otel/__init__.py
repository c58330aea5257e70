"""The OpenTelemetry adapter of the tracing port; import ``.tracer`` only when the API is installed."""
