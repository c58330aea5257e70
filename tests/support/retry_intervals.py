"""The retry interval scale of the tests' engines that need not wait a retry policy's seconds."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import timedelta

from dex_agents.local import LocalRuntime
from dex_agents.ports.engine import FlowDefinition

RETRY_INTERVAL_SCALE = 0.01
"""A hundredth of each policy's interval: a Step that keeps failing runs its attempts in the
same order, without the default policy's 1 s + 2 s (``LocalEngine``'s ``retry_interval_scale``)."""


def retrying_runtime(
    path: str | os.PathLike[str] | None, flows: Sequence[FlowDefinition]
) -> LocalRuntime:
    """A ``LocalRuntime`` of ``flows`` that polls every 20 ms and retries a failed Step at
    ``RETRY_INTERVAL_SCALE`` of its policy's interval: a session whose Step keeps failing
    ends within a second."""
    return LocalRuntime(
        path,
        flows,
        poll_interval=timedelta(milliseconds=20),
        retry_interval_scale=RETRY_INTERVAL_SCALE,
    )
