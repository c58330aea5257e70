"""The Worker child of the spec's example: ``python -m tests.my_worker``."""

from dex_agents.testing import run_agent_worker
from tests.my_agent import build_flow

if __name__ == "__main__":
    run_agent_worker([build_flow()])
