"""The engine's statuses and decision kinds as module constants, for its hot paths.

On Python 3.11 a read of an enum member from its class (``ExecutionStatus.RUNNING``)
goes through ``EnumType.__getattr__``'s attribute hook: about 1.4 K instructions
against a few dozen for a module global, and a turn's hand-offs, claims and
transitions read about a hundred. These are the very members (``is`` holds).
"""

from __future__ import annotations

from typing import Final

from dex_agents.ports.engine import DecisionKind
from dex_agents.ports.flow_rows import ExecutionStatus, FlowStatus

PENDING_WAIT: Final = ExecutionStatus.PENDING_WAIT
WAITING: Final = ExecutionStatus.WAITING
READY: Final = ExecutionStatus.READY
RUNNING: Final = ExecutionStatus.RUNNING
COMPLETED: Final = ExecutionStatus.COMPLETED
CANCELLED: Final = ExecutionStatus.CANCELLED

RUNNABLE: Final = (PENDING_WAIT, READY)
"""What a hand-off may lease: a Step whose wait phase is still to run, or a ready one."""

FLOW_RUNNING: Final = FlowStatus.RUNNING
FLOW_COMPLETED: Final = FlowStatus.COMPLETED
FLOW_FAILED: Final = FlowStatus.FAILED

GO: Final = DecisionKind.GO
COMPLETE: Final = DecisionKind.COMPLETE
FAIL: Final = DecisionKind.FAIL
