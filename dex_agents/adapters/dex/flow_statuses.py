"""A Dex Flow status as the port's: running, completed, failed or stopped.

Dex has more statuses than the port; this says which port status each one is,
for ``DexFlowClient.describe_flow``/``list_flows`` and ``DexSyncFlowClient``.
"""

from __future__ import annotations

from collections.abc import Mapping

import dex

from dex_agents.ports.flow_rows import FlowStatus

_PORT_STATUS: Mapping[dex.FlowStatus, FlowStatus] = {
    dex.FlowStatus.RUNNING: FlowStatus.RUNNING,
    # The session goes on in the next run under the same ID.
    dex.FlowStatus.CONTINUED_AS_NEW: FlowStatus.RUNNING,
    dex.FlowStatus.COMPLETED: FlowStatus.COMPLETED,
    dex.FlowStatus.FAILED: FlowStatus.FAILED,
    # A Flow timeout that Dex enforces ends the run as a failure.
    dex.FlowStatus.SERVER_SIDE_TIMEOUT_INTERNAL_ONLY: FlowStatus.FAILED,
    # ``stop_flow`` cancels; an operator may terminate: both are the port's "stopped".
    dex.FlowStatus.CANCELED: FlowStatus.STOPPED,
    dex.FlowStatus.TERMINATED: FlowStatus.STOPPED,
}


def port_flow_status(status: dex.FlowStatus) -> str:
    """A Dex Flow status as the port's status text: running, completed, failed or stopped."""
    return _PORT_STATUS[status].value
