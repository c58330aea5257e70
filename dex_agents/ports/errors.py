"""Errors that a port implementation raises to tell the session something specific."""

from __future__ import annotations

from dex_agents.domain.errors import DexAgentsError


class ModelSpendLimitExceededError(DexAgentsError):
    """A ``ModelSpendLimit`` refuses the next model call.

    The message says which limit was reached; the session shows it as the turn's
    ``last_turn_error``, so keep secrets and account details out of it.
    """
