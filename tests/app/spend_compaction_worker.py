"""The Worker child of the summary-spend crash test: ``python -m tests.app.spend_compaction_worker``.

The phase crash agent (``tests.app.phase_crash_agent``: its runner compacts at
turn 5 of short turns and logs ``summary <turn> through=<n>``) with a spend
limit that logs ``spend <check|record> <step execution> <attempt>`` for summary
calls only. Told the usage of a first attempt's summary call, it stops at gate
``record-<step execution>``: the call ran and was reported, ``CompactContext``
has not committed, so a test SIGKILLs the Worker there.
"""

from __future__ import annotations

import os
from pathlib import Path

from dex_agents import AgentSessionFlow
from dex_agents.app.options import AgentSessionOptions
from dex_agents.domain.usage import AgentUsage
from dex_agents.ports.spend_limit import ModelSpendCheck
from dex_agents.testing import run_agent_worker
from tests.app.phase_crash_agent import (
    POLICY,
    SMALL_STORAGE,
    STATE_DIR_ENV,
    PhaseCrashRunner,
    gate,
    invocation_log,
)

FLOW_TYPE = "SpendCompactionAgent"


def _state_dir() -> Path:
    # Read at call time: the test process builds the Flow too, without the variable.
    return Path(os.environ[STATE_DIR_ENV])


class SummarySpendLimit:
    """Allows every call; logs what it is asked and told about summary calls."""

    async def check_model_call(self, call: ModelSpendCheck) -> None:
        if call.step_type == "CompactContext":
            log = invocation_log(_state_dir())
            log.record(f"spend check {call.step_execution_id} {call.attempt}")

    async def record_model_usage(self, call: ModelSpendCheck, usage: AgentUsage) -> None:
        if call.step_type != "CompactContext":
            return
        log = invocation_log(_state_dir())
        log.record(f"spend record {call.step_execution_id} {call.attempt}")
        if call.attempt == 1:
            await gate(_state_dir(), "record", call.step_execution_id).wait_for_release()


def build_spend_compaction_flow() -> AgentSessionFlow:
    """The test's session Flow, identical in the test process and the Worker child."""
    options = AgentSessionOptions(
        compaction=POLICY,
        spend_limit=SummarySpendLimit(),
        **SMALL_STORAGE,
    )
    return AgentSessionFlow(PhaseCrashRunner(), flow_type=FLOW_TYPE, options=options)


if __name__ == "__main__":
    run_agent_worker([build_spend_compaction_flow()])
