"""The free slots a worker's claim round holds, lent to hand-offs whenever the round does not need them.

A claim round reserves every free slot of its worker before its transaction
runs, so that no two claims of one worker fill the same slot, and releases them
once the claim loop resumes after the commit. A client of the worker's own
process whose commit came meanwhile (a user's message) found no slot left, so
the Step it made runnable was not handed off in that commit: the round after
claimed it, one more durable commit and a wake-up later. That happened to 3 in
100 in-process tool turns, and to 3 in 10 with the turn slowed down under
``strace``: mostly in the instant between the round's commit and the claim
loop's next step.

So a hand-off may take slots the round holds (``lend``) before its
transaction begins (the round then claims that many fewer) and once the
transaction has claimed what it found (``took``: the slots beyond its claims
are free again). While the transaction runs, the round lends nothing. It may run
on the store's thread, so every step takes a lock.
"""

from __future__ import annotations

import threading


class RoundSlots:
    """The slots one claim round reserved: ``limit`` of them, fewer what it lent."""

    def __init__(self, limit: int) -> None:
        if limit < 0:
            raise ValueError(f"a claim round reserves 0 slots or more, not {limit}")
        self._limit = limit
        self._claim_limit = limit
        self._running = False
        self._claimed = 0
        self._lock = threading.Lock()

    @property
    def limit(self) -> int:
        """The slots the round holds now, which it releases when it is done."""
        return self._limit

    @property
    def claim_limit(self) -> int:
        """The most the round's transaction could claim, as it began."""
        return self._claim_limit

    def begin(self) -> int:
        """The round's transaction begins (again, after a store fault): the most it may claim."""
        with self._lock:
            self._running = True
            self._claimed = 0
            self._claim_limit = self._limit
            return self._limit

    def took(self, claimed: int) -> None:
        """The round's transaction claimed ``claimed`` Steps: the slots beyond them are free."""
        with self._lock:
            self._running = False
            self._claimed = claimed

    def lend(self, most: int) -> int:
        """Up to ``most`` slots the round does not need, handed to a hand-off (which releases
        them); none while its transaction runs."""
        with self._lock:
            if self._running:
                return 0
            lent = min(most, self._limit - self._claimed)
            self._limit -= lent
            return lent
