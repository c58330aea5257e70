"""The Worker child of the session crash tests: ``python -m tests.app.crash_worker``."""

from dex_agents.testing import run_agent_worker
from tests.app.crash_agent import build_crash_flow

if __name__ == "__main__":
    run_agent_worker([build_crash_flow()])
