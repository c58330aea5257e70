"""The retry interval scale of the tests' engines that need not wait a retry policy's seconds."""

from __future__ import annotations

RETRY_INTERVAL_SCALE = 0.01
"""A hundredth of each policy's interval: a Step that keeps failing runs its attempts in the
same order, without the default policy's 1 s + 2 s (``LocalEngine``'s ``retry_interval_scale``)."""
