"""Errors of the ports layer: what an engine or a port implementation raises on purpose.

::

    DexAgentsError
    ├── ModelSpendLimitExceededError   a spend limit refuses the next model call
    ├── ModelCallError                 a model client's call failed; ``retryable`` says if a retry may help
    ├── RetryAfterError                a Step attempt failed and asks its next attempt to wait
    └── EngineError                    an engine refused a request
        ├── FlowDefinitionError        a Flow declaration that cannot run (a developer's mistake)
        ├── FlowNotFoundError          no session with that ID
        ├── FlowAlreadyStartedError    a session with that ID exists
        ├── FlowNotActiveError         the session was stopped or completed
        ├── RpcLockConflictError       a Step holds a lock the RPC needs; retry
        ├── ChannelMessageNotFoundError  a message an RPC named was consumed meanwhile
        ├── InvalidResumeTokenError    a Stream resume token this session never issued
        ├── StreamReadTimeoutError     a long poll of the Stream saw no new event
        └── SessionWaitTimeoutError    a session did not need a person within the wait's timeout

Engines translate their own errors (SQLite's, Dex's) into these at the boundary,
so the session client handles one set whatever engine it runs on.
"""

from __future__ import annotations

from datetime import timedelta

from dex_agents.domain.errors import DexAgentsError


class ModelSpendLimitExceededError(DexAgentsError):
    """A ``ModelSpendLimit`` refuses the next model call.

    The message says which limit was reached; the session shows it as the turn's
    ``last_turn_error``, so keep secrets and account details out of it.
    """


class ModelCallError(DexAgentsError):
    """A model client's call failed; ``retryable`` says whether the same request may succeed later.

    ``RunModel`` and ``CompactContext`` let their retry policy repeat a retryable
    one (a 429, a 5xx, a timeout, a dropped stream). One that no retry can fix (a
    bad request, a refused key, a context that is too long) fails the turn at
    once with this error's text as ``last_turn_error``, spending no attempts.

    ``retry_after`` is how long the provider asked to wait before the same
    request (an HTTP ``Retry-After``), or ``None``. The Step's next attempt then
    waits that long instead of its retry policy's interval, and when that wait
    would end past the policy's total duration the turn fails at once. Any other
    value (a number of seconds) raises ``TypeError``, set or read.
    """

    retryable: bool = True
    _retry_after: timedelta | None = None

    @property
    def retry_after(self) -> timedelta | None:
        """The wait the provider asked for before the same request, or ``None``."""
        return self._retry_after

    @retry_after.setter
    def retry_after(self, value: timedelta | None) -> None:
        self._retry_after = checked_retry_after(value, self)


def checked_retry_after(value: object, error: ModelCallError) -> timedelta | None:
    """``value`` as ``error``'s ``retry_after``; anything but a ``timedelta`` or ``None``
    raises ``TypeError``.

    A number of seconds, the likeliest mistake, was compared with a ``timedelta``
    where the Step read it, and the turn failed with Python's "'>' not supported
    between instances of 'int' and 'datetime.timedelta'", the provider's error lost.
    """
    if value is None or isinstance(value, timedelta):
        return value
    raise TypeError(
        f"{type(error).__name__}.retry_after must be a datetime.timedelta or None, "
        f"not {type(value).__name__}; the model call failed with: {error}"
    )


class RetryAfterError(DexAgentsError):
    """Raised from a Step's execute phase: the attempt failed with ``cause``, and the
    next attempt should start ``delay`` from now instead of after its retry policy's interval.

    The retry policy still decides whether a next attempt runs: its
    ``maximum_attempts``, and its ``total_duration``, within which the delayed
    attempt must start, or the Step takes its failure route now. Engines report
    ``cause``, not this wrapper, as the attempt's error, as Dex's ``retry_after`` does.
    """

    def __init__(self, delay: timedelta, cause: Exception) -> None:
        if delay <= timedelta(0):
            raise ValueError(f"delay must be positive, not {delay}")
        super().__init__(str(cause))
        self.delay = delay
        self.cause = cause


class EngineError(DexAgentsError):
    """An engine refused a request. ``retryable`` says whether the same request may succeed later."""

    retryable: bool = False


class FlowDefinitionError(EngineError, ValueError):
    """A Flow declaration that cannot run: a developer's mistake, found when the Flow is registered."""


class FlowNotFoundError(EngineError, LookupError):
    """No session (Flow) with that ID exists."""


class FlowAlreadyStartedError(EngineError):
    """A session (Flow) with that ID was already started."""


class FlowNotActiveError(EngineError):
    """The session was stopped or completed, so it takes no Step or writing RPC."""


class RpcLockConflictError(EngineError):
    """A Step method holds a lock that the RPC needs; the same RPC may succeed when it is retried."""

    retryable = True


class ChannelMessageNotFoundError(EngineError, LookupError):
    """A Channel message that a transactional RPC named was consumed or deleted meanwhile."""


class InvalidResumeTokenError(EngineError, ValueError):
    """A Stream resume token that this session's Stream never issued, or one that is malformed."""


class StreamReadTimeoutError(EngineError, TimeoutError):
    """A long poll of a session's Stream ended with no new event."""

    retryable = True


class SessionWaitTimeoutError(EngineError, TimeoutError):
    """``wait_for_user`` saw the session still working when its timeout passed."""
