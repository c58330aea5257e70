"""The Worker child of the spend-limit crash tests: ``python -m tests.app.spend_crash_worker``."""

from dex_agents.testing import run_agent_worker
from tests.app.spend_crash_agent import build_spend_crash_flow

if __name__ == "__main__":
    run_agent_worker([build_spend_crash_flow()])
