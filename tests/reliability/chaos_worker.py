"""A Worker child of the random-kill scenario: ``python -m tests.reliability.chaos_worker``."""

from dex_agents.testing import run_agent_worker
from tests.reliability.chaos_agent import build_chaos_flow

if __name__ == "__main__":
    run_agent_worker([build_chaos_flow()])
