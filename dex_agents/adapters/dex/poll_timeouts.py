"""How long a Dex long poll waits: Dex takes whole seconds, from 1 s to an int32's worth.

``DexFlowClient.read_stream`` and ``DexSyncFlowClient.read_stream`` both turn the
port's ``poll_timeout`` into a wait Dex accepts here, and re-poll with what is
left of it.
"""

from __future__ import annotations

import math
import time
from datetime import timedelta

from dex_agents.ports.flow_client import check_poll_timeout

DEX_STREAM_POLL_TIMEOUT = timedelta(seconds=30)
"""How long ``read_stream`` long-polls Dex by default, as the embedded engine does."""

MIN_DEX_POLL_TIMEOUT = timedelta(seconds=1)
"""Dex's shortest long poll that is not its server default."""

MAX_DEX_POLL_TIMEOUT = timedelta(seconds=2**31 - 1)
"""Dex's longest long poll: the SDK sends the wait as an int32 of seconds."""


def dex_poll_timeout(poll_timeout: timedelta | None) -> timedelta:
    """A long poll's wait as Dex takes it: rounded up to whole seconds, from 1 s to about
    68 years (``MAX_DEX_POLL_TIMEOUT``); 30 s for ``None``.

    The SDK raises ``ValueError`` for any other wait, so ``wait_for_user``'s short
    reads and the browser stream's token check wait up to a second on Dex.
    """
    checked = check_poll_timeout(poll_timeout)
    if checked is None:
        return DEX_STREAM_POLL_TIMEOUT
    seconds = min(math.ceil(checked.total_seconds()), int(MAX_DEX_POLL_TIMEOUT.total_seconds()))
    return max(timedelta(seconds=seconds), MIN_DEX_POLL_TIMEOUT)


def remaining_poll_timeout(deadline: float) -> timedelta:
    """What is left of a long poll ending at ``deadline`` (``time.monotonic()``), as Dex waits."""
    return dex_poll_timeout(timedelta(seconds=max(0.0, deadline - time.monotonic())))
