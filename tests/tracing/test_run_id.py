"""``dex.run.id``: the Flow run ID reaches spans on both engines, and only when it is known."""

from __future__ import annotations

from datetime import UTC, datetime

import dex

from dex_agents.adapters.dex.contexts import DexStepContext
from dex_agents.app.tracing.common import common_attributes
from dex_agents.ports.step_contexts import StepContext, step_run_id
from dex_agents.ports.step_waits import WaitResult


class _DexContext:
    """What ``DexStepContext`` reads of a Dex SDK ``AsyncContext`` for one attempt.

    The Dex server hands every Step attempt its Flow run ID in ``Context.run_id``
    (dex-python-sdk 1.23.0); no server runs here, so this stands in for the SDK's
    own context object.
    """

    flow_id = "s1"
    run_id = "0197f0c2-run"
    step_execution_id = "RunModel-3"
    attempt = 2

    def has_last_heartbeat_value(self) -> bool:
        return False


def dex_step_context() -> DexStepContext:
    context: dex.AsyncContext = _DexContext()  # type: ignore[assignment]
    return DexStepContext(
        context,
        None,  # type: ignore[arg-type]  # state and schema: the span attributes read neither
        None,  # type: ignore[arg-type]
        "RunModel",
        WaitResult(),
        datetime(2026, 12, 1, tzinfo=UTC),
    )


def test_a_dex_attempt_names_the_run_dex_gave_it() -> None:
    context = dex_step_context()
    assert step_run_id(context) == "0197f0c2-run"
    attributes = common_attributes(context, "turn-2", "chat")
    assert attributes["dex.run.id"] == "0197f0c2-run"
    assert attributes["dex.step.execution_id"] == "RunModel-3"
    assert attributes["dex.step.attempt"] == 2


class _Wrapped:
    """A context that forwards only the port's required members, as a wrapper may."""

    def __init__(self, inner: StepContext) -> None:
        self.flow_id = inner.flow_id
        self.step_type = inner.step_type
        self.step_execution_id = inner.step_execution_id
        self.attempt = inner.attempt


def test_a_context_without_a_run_id_leaves_the_attribute_out() -> None:
    wrapped: StepContext = _Wrapped(dex_step_context())  # type: ignore[assignment]
    assert step_run_id(wrapped) is None
    assert "dex.run.id" not in common_attributes(wrapped, "turn-2", "chat")
