"""The Worker child of the phase crash tests: ``python -m tests.app.phase_crash_worker``."""

from dex_agents.testing import run_agent_worker
from tests.app.phase_crash_agent import build_phase_crash_flow

if __name__ == "__main__":
    run_agent_worker([build_phase_crash_flow()])
