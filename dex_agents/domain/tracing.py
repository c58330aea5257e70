"""The GenAI semantic conventions versions the session's spans can follow."""

from __future__ import annotations

import enum


class GenAISemanticConventionsVersion(enum.Enum):
    """A pinned version of the OpenTelemetry GenAI semantic conventions.

    ``V1_42_0_DEV`` (the default) follows ``open-telemetry/semantic-conventions-genai``
    at commit ``dc3571562603552dc555c667dfa327a638d94ab2``; ``V1_36_0`` follows
    semantic conventions 1.36.0 (``gen_ai.system``, no cache or reasoning token
    counts, never content).
    """

    V1_42_0_DEV = "1.42.0-dev"
    V1_36_0 = "1.36.0"

    @property
    def schema_url(self) -> str:
        """The schema URL the session sets on its tracer."""
        if self is GenAISemanticConventionsVersion.V1_42_0_DEV:
            return "https://opentelemetry.io/schemas/gen-ai-dev/1.42.0-dev"
        return "https://opentelemetry.io/schemas/1.36.0"

    @property
    def carries_content(self) -> bool:
        """Whether spans may carry message content (1.36.0 recorded content as events)."""
        return self is GenAISemanticConventionsVersion.V1_42_0_DEV
