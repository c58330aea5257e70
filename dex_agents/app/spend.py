"""The session side of ``ModelSpendLimit`` ("Spend limits"): ask before a model call, report after.

``RunModel`` and ``CompactContext`` ask ``check_model_call`` right before they
call the runner, after the steering and cancellation checks, and tell
``record_model_usage`` what a returned call used before they commit. Without a
``spend_limit`` in ``AgentSessionOptions`` neither does anything. The session
holds no lock while it awaits the limit.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypeVar

from dex_agents.app.session import SessionRuntime
from dex_agents.app.steps import turn_end
from dex_agents.domain.usage import AgentUsage
from dex_agents.ports.engine import StepDecision
from dex_agents.ports.errors import ModelSpendLimitExceededError
from dex_agents.ports.persistence import StateTransaction, StreamDef
from dex_agents.ports.spend_limit import ModelSpendCheck
from dex_agents.ports.step_contexts import RecoveryError, StepContext
from dex_agents.ports.step_waits import WaitResult

T = TypeVar("T")

logger = logging.getLogger("dex_agents.spend")


def model_spend_check(
    context: StepContext, turn_id: str, session_settings: Mapping[str, Any]
) -> ModelSpendCheck:
    """The ``ModelSpendCheck`` of the model call this Step attempt makes."""
    return ModelSpendCheck(
        flow_id=context.flow_id,
        turn_id=turn_id,
        step_type=context.step_type,
        step_execution_id=context.step_execution_id,
        attempt=context.attempt,
        session_settings=dict(session_settings),
    )


async def check_model_call(
    context: StepContext,
    runtime: SessionRuntime,
    turn_id: str,
    session_settings: Mapping[str, Any],
) -> StepDecision | None:
    """Ask the spend limit about the next model call: ``None`` allows it.

    A refusal (``ModelSpendLimitExceededError``) ends the turn as failed at once,
    with no retry and the error's message as ``last_turn_error``, exactly as
    ``RecordTurnFailure`` ends a turn; the returned decision moves on from there.
    Any other exception propagates and fails the attempt like a runner error.

    An allowed call first marks the attempt started (a heartbeat), so a Worker
    lost after the model call makes the call that runs again a new attempt: the
    key ``(flow_id, step_execution_id, attempt)`` then names one model call.
    """
    limit = runtime.options.spend_limit
    if limit is None:
        return None
    try:
        await limit.check_model_call(model_spend_check(context, turn_id, session_settings))
    except ModelSpendLimitExceededError as error:
        refused = RecoveryError(detail=str(error), error_type=type(error).__name__)
        failure = turn_end.RecordTurnFailure(runtime)
        return await failure.execute(_RefusedCallContext(context, refused), None)
    # Without a start mark, the embedded engine hands a lost attempt that sent no
    # heartbeat out again under the same number: a call that returned and was
    # reported before the kill, and the call run again, shared one key, and an
    # application that deduplicated by it counted one call of the two it paid for.
    await context.heartbeat()
    return None


async def record_model_usage(
    context: StepContext,
    runtime: SessionRuntime,
    turn_id: str,
    session_settings: Mapping[str, Any],
    usage: AgentUsage,
) -> None:
    """Tell the spend limit what a returned model call used; its exceptions are logged and ignored.

    A counter outage must never rerun a model call, so nothing it raises fails
    the Step.
    """
    limit = runtime.options.spend_limit
    if limit is None:
        return
    try:
        await limit.record_model_usage(model_spend_check(context, turn_id, session_settings), usage)
    except Exception:
        logger.warning(
            "the spend limit could not record the usage of %s attempt %d; ignored",
            context.step_execution_id,
            context.attempt,
            exc_info=True,
        )


class _RefusedCallContext:
    """The Step's own context, seen by ``RecordTurnFailure`` as if the refusal were its recovery error.

    The turn ends in the refusing Step's commit, so its writes and events are
    that Step's; only ``recovery_error`` differs.
    """

    def __init__(self, context: StepContext, refused: RecoveryError) -> None:
        self._context = context
        self._refused = refused

    @property
    def flow_id(self) -> str:
        return self._context.flow_id

    @property
    def step_type(self) -> str:
        return self._context.step_type

    @property
    def step_execution_id(self) -> str:
        return self._context.step_execution_id

    @property
    def attempt(self) -> int:
        return self._context.attempt

    @property
    def first_attempt_at(self) -> datetime:
        return self._context.first_attempt_at

    @property
    def now(self) -> datetime:
        return self._context.now

    @property
    def state(self) -> StateTransaction:
        return self._context.state

    @property
    def wait_result(self) -> WaitResult:
        return self._context.wait_result

    @property
    def recovery_error(self) -> RecoveryError | None:
        return self._refused

    @property
    def last_heartbeat_value(self) -> str | None:
        return self._context.last_heartbeat_value

    async def heartbeat(self, checkpoint: str | None = None, *, durable: bool = True) -> None:
        await self._context.heartbeat(checkpoint, durable=durable)

    def write_event(self, stream: StreamDef[T], value: T) -> None:
        self._context.write_event(stream, value)

    def is_cancellation_requested(self) -> bool:
        return self._context.is_cancellation_requested()
