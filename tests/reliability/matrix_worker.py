"""The Worker child of the SIGKILL matrix: ``python -m tests.reliability.matrix_worker``."""

from dex_agents.testing import run_agent_worker
from tests.reliability.matrix_agent import build_matrix_flow

if __name__ == "__main__":
    run_agent_worker([build_matrix_flow()])
