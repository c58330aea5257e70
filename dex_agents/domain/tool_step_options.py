"""A tool call's own tool Step options: what ``ToolCallStepOptionsProvider`` returns.

A runner or tool source that knows a call's limits, such as a connector
operation's ``executeMethodTimeout`` and retry policy, gives its tool Step its own
timeout and, for ``CallTool``, its own retries. These are movement-scoped options,
not stored values, so they are frozen dataclasses with ``timedelta`` durations.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True, kw_only=True)
class ToolCallRetryPolicy:
    """The retry policy of one call's ``CallTool`` Step, engine-neutral.

    ``None`` durations and zero numbers use the engine's default, as a Dex
    ``RetryPolicy`` does. Attempts include the first one.
    """

    maximum_attempts: int = 0
    initial_interval: timedelta | None = None
    backoff_coefficient: float = 0.0
    maximum_interval: timedelta | None = None
    total_duration: timedelta | None = None

    def __post_init__(self) -> None:
        if self.maximum_attempts < 0:
            raise ValueError(
                f"maximum_attempts must be 0 (the default) or more, not {self.maximum_attempts}"
            )
        if self.backoff_coefficient < 0:
            raise ValueError(
                f"backoff_coefficient must be 0 (the default) or more, not {self.backoff_coefficient}"
            )
        for name in ("initial_interval", "maximum_interval", "total_duration"):
            value: timedelta | None = getattr(self, name)
            if value is not None and value <= timedelta(0):
                raise ValueError(f"{name} must be positive, not {value}")


@dataclass(frozen=True, kw_only=True)
class ToolCallStepOptions:
    """A call's own tool Step options, from ``ToolCallStepOptionsProvider``.

    ``timeout`` bounds each attempt of the tool Step; ``retry_policy`` applies to
    ``CallTool`` only, because a single-attempt call never retries. ``None`` keeps
    the session's default.
    """

    timeout: timedelta | None = None
    retry_policy: ToolCallRetryPolicy | None = None

    def __post_init__(self) -> None:
        if self.timeout is not None and self.timeout <= timedelta(0):
            raise ValueError(f"timeout must be positive, not {self.timeout}")
