"""The Worker child of the retry interval scale test: ``python -m tests.adapters.retry_scale_worker``.

Its one Step fails its first attempt under a policy that waits an hour before the next.
"""

from __future__ import annotations

from datetime import timedelta

from dex_agents.ports.engine import RetryPolicy, Step, StepDecision, StepOptions, complete
from dex_agents.ports.step_contexts import StepContext
from dex_agents.testing import run_agent_worker
from tests.adapters.engine_flows import OneStepFlow


class FailsOnce(Step[None]):
    """Fails its first attempt; its policy waits an hour before the second."""

    def options(self) -> StepOptions:
        return StepOptions(retry=RetryPolicy(initial_interval=timedelta(hours=1)))

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        if context.attempt == 1:
            raise RuntimeError("the first attempt fails")
        return complete()


def build_flow() -> OneStepFlow:
    """The Flow type the test process and the Worker child both serve."""
    return OneStepFlow("FailsOnce", FailsOnce())


if __name__ == "__main__":
    run_agent_worker([build_flow()])
