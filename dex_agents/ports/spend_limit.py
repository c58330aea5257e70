"""Spend limits: an application's budget for model calls across sessions ("Spend limits")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from dex_agents.domain.usage import AgentUsage


@dataclass(frozen=True, kw_only=True)
class ModelSpendCheck:
    """The model call a ``ModelSpendLimit`` is asked about, or told about.

    ``step_type`` is ``"RunModel"`` for a turn's model call and ``"CompactContext"``
    for a summary call; ``step_execution_id`` names that Step execution, shared by
    its attempts, and ``attempt`` is the one-based attempt.
    ``session_settings`` is the running turn's copy, where an application usually
    finds the account or key it counts against.
    """

    flow_id: str
    turn_id: str
    step_type: str
    step_execution_id: str
    attempt: int
    session_settings: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class ModelSpendLimit(Protocol):
    """An application's spend limit; counters and limits belong to the application.

    Without one, the session makes no checks.

    Contract:

    - ``check_model_call`` runs before each model call, in ``RunModel`` and
      ``CompactContext``, after the steering and cancellation checks. Raise
      ``ModelSpendLimitExceededError`` to refuse the call: the turn fails at once,
      with no retry, and its message becomes ``last_turn_error``. Any other
      exception fails the attempt like a runner error, and the Step's retry policy
      runs it again.
    - ``record_model_usage`` runs after a model call returned, with that call's
      usage, before the Step commits. An allowed call marks its attempt started,
      so ``(flow_id, step_execution_id, attempt)`` names one model call: a Worker
      lost between the report and the commit runs the call again as a new
      attempt, which is reported too, since it was paid for too. Use the key to
      make your own counting idempotent, not to drop a report. A call whose
      attempt failed is not reported, because its usage is unknown; keep the
      counters approximate. An exception it raises is logged and ignored, so a
      counter outage never reruns a model call.
    - Both may run concurrently for many sessions; the session never holds a lock
      while it awaits them.
    """

    async def check_model_call(self, call: ModelSpendCheck) -> None:
        """Allow the call by returning; refuse it with ``ModelSpendLimitExceededError``."""
        ...

    async def record_model_usage(self, call: ModelSpendCheck, usage: AgentUsage) -> None:
        """Count what the call used."""
        ...
