"""The agent of the spend-limit crash tests: a spend limit that a test kills the Worker inside.

Each model call and each call of the spend limit is recorded in
``$SPEND_STATE_DIR/invocations.log`` (``check <step execution> <attempt>``,
``model``, ``record <step execution> <attempt>``), and ``record_model_usage``
of a first attempt waits at ``FileGate`` ``record-<step execution>``, so a
test SIGKILLs the Worker after a model call returned and before its Step
commits.
"""

from __future__ import annotations

import os
from pathlib import Path

from dex_agents import AgentSessionFlow
from dex_agents.app.options import AgentSessionOptions
from dex_agents.domain.runner_outcomes import AgentTurnOutcome
from dex_agents.domain.usage import AgentUsage
from dex_agents.ports.runner import AgentTurnContext
from dex_agents.ports.spend_limit import ModelSpendCheck
from dex_agents.testing import FileGate, InvocationLog
from tests.app.scripted_runner import ScriptedRunner

STATE_DIR_ENV = "SPEND_STATE_DIR"
FLOW_TYPE = "SpendCrashAgent"


def _state_dir() -> Path:
    # Read at call time: the test process builds the Flow too, without the variable.
    return Path(os.environ[STATE_DIR_ENV])


def invocation_log(state_dir: Path) -> InvocationLog:
    """The log of model calls and spend-limit calls under a state directory."""
    return InvocationLog(state_dir / "invocations.log")


def record_gate(state_dir: Path, step_execution_id: str) -> FileGate:
    """The gate the first attempt's usage report of a Step execution stops at."""
    return FileGate(state_dir, f"record-{step_execution_id}")


class LoggedSpendLimit:
    """A spend limit that allows every call and logs what it is asked and told."""

    async def check_model_call(self, call: ModelSpendCheck) -> None:
        invocation_log(_state_dir()).record(f"check {call.step_execution_id} {call.attempt}")

    async def record_model_usage(self, call: ModelSpendCheck, usage: AgentUsage) -> None:
        invocation_log(_state_dir()).record(f"record {call.step_execution_id} {call.attempt}")
        if call.attempt == 1:
            await record_gate(_state_dir(), call.step_execution_id).wait_for_release()


class LoggedRunner(ScriptedRunner):
    """``ScriptedRunner`` that logs each real model call."""

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        invocation_log(_state_dir()).record("model")
        return await super().run_model_step(turn)


def build_spend_crash_flow() -> AgentSessionFlow:
    """The session Flow of the spend-limit crash tests, the same in the test and its Workers."""
    return AgentSessionFlow(
        LoggedRunner(),
        flow_type=FLOW_TYPE,
        options=AgentSessionOptions(spend_limit=LoggedSpendLimit()),
    )
