"""The model spend limit port: a budget limit fits it and refuses with its own error.

``limit: ModelSpendLimit = BudgetSpendLimit(...)`` is also mypy's check that it fits.
"""

from __future__ import annotations

import pytest

from dex_agents.domain.errors import DexAgentsError
from dex_agents.domain.usage import AgentUsage
from dex_agents.ports.errors import ModelSpendLimitExceededError
from dex_agents.ports.spend_limit import ModelSpendCheck, ModelSpendLimit
from tests.ports.turn_fakes import USAGE


class BudgetSpendLimit:
    def __init__(self, budget_tokens: int) -> None:
        self.budget_tokens = budget_tokens
        self.used: dict[str, int] = {}

    async def check_model_call(self, call: ModelSpendCheck) -> None:
        account = str(call.session_settings.get("account", "default"))
        if self.used.get(account, 0) >= self.budget_tokens:
            raise ModelSpendLimitExceededError(f"account {account} reached its token budget")

    async def record_model_usage(self, call: ModelSpendCheck, usage: AgentUsage) -> None:
        account = str(call.session_settings.get("account", "default"))
        self.used[account] = self.used.get(account, 0) + usage.total_tokens


async def test_a_spend_limit_refuses_with_its_own_error() -> None:
    limit: ModelSpendLimit = BudgetSpendLimit(budget_tokens=4)
    check = ModelSpendCheck(
        flow_id="session-42",
        turn_id="turn-1",
        step_type="RunModel",
        step_execution_id="RunModel-3",
        attempt=1,
        session_settings={"account": "acme"},
    )
    await limit.check_model_call(check)
    await limit.record_model_usage(check, USAGE)
    with pytest.raises(
        ModelSpendLimitExceededError, match=r"^account acme reached its token budget$"
    ):
        await limit.check_model_call(check)
    assert isinstance(limit, ModelSpendLimit)
    assert issubclass(ModelSpendLimitExceededError, DexAgentsError)
    assert (
        ModelSpendCheck(
            flow_id="f", turn_id="t", step_type="CompactContext", step_execution_id="s", attempt=1
        ).session_settings
        == {}
    )
