"""ConnectorStepContext: the tool Step as a Connector operation (and its fence) sees it.

It exposes only what the fence uses: the attempt number, the earlier attempt's
heartbeat value, and ``heartbeat``, which stores each value as the tool Step's text
checkpoint so the session's background heartbeats repeat it and the next attempt
reads it back. The member names are the design's contract, not checked against the
Connector SDK.
"""

from __future__ import annotations

from dex_agents.adapters.connectors.fence import FenceObservation
from dex_agents.ports.runner import DeferredToolExecution

__all__ = ["ConnectorStepContext"]


class ConnectorStepContext:
    """One attempt of a connector tool Step, for ``run_query`` and ``run_mutation``."""

    def __init__(self, execution: DeferredToolExecution, observation: FenceObservation) -> None:
        self._execution = execution
        self._observation = observation

    @property
    def attempt(self) -> int:
        """The attempt number, from 1."""
        return self._execution.attempt

    def last_heartbeat_details(self) -> str | None:
        """The value the previous attempt saved last, or ``None``."""
        self._observation.read_earlier()
        return self._execution.heartbeat_checkpoint

    async def heartbeat(self, details: str | None = None) -> None:
        """Record liveness; with ``details``, save it as the Step's checkpoint first."""
        if details is None:
            await self._execution.heartbeat()
            return
        self._observation.saved(details)
        await self._execution.save_heartbeat_checkpoint(details)
