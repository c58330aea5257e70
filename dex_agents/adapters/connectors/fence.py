"""What the core can see of a Mutation's single-dispatch fence: the markers it checkpoints.

The fence keeps its state in the tool Step's text checkpoint. ``FenceObservation``
watches every marker one attempt saves, bound to the call's Call ID and attempt, and
what the attempt read back from the earlier one, and answers ``may_have_sent`` for
``classify_connector_branch`` and ``proved_not_sent`` for ``classify_connector_retry``.

The marker's layout is assumed from the design, not read from the SDK: JSON text
``{"dexFence": "claimed" | "notSent" | "canResend", "callId": ..., "attempt": ...,
"providerId": ...}``. A forged ``canResend`` marker of the same call would count, as
the design says.
"""

from __future__ import annotations

import json
from typing import Any, Final

__all__ = ["CAN_RESEND", "CLAIMED", "NOT_SENT", "FenceObservation", "fence_marker"]

CLAIMED: Final = "claimed"
NOT_SENT: Final = "notSent"
CAN_RESEND: Final = "canResend"
_STATES: Final = frozenset({CLAIMED, NOT_SENT, CAN_RESEND})


def fence_marker(state: str, call_id: str, attempt: int, provider_id: str | None = None) -> str:
    """A marker's text, as the fence is assumed to save it (for fakes and tests)."""
    marker: dict[str, Any] = {"dexFence": state, "callId": call_id, "attempt": attempt}
    if provider_id is not None:
        marker["providerId"] = provider_id
    return json.dumps(marker, separators=(",", ":"), sort_keys=True)


def _parse(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        marker = json.loads(text)
    except ValueError:
        return None
    if (
        not isinstance(marker, dict)
        or marker.get("dexFence") not in _STATES
        or not isinstance(marker.get("callId"), str)
        or not isinstance(marker.get("attempt"), int)
        or not isinstance(marker.get("providerId", ""), str)
    ):
        return None
    return marker


class FenceObservation:
    """The fence markers of one attempt of one call, as its Step context sees them."""

    def __init__(self, call_id: str, attempt: int, earlier_checkpoint: str | None) -> None:
        self._call_id = call_id
        self._attempt = attempt
        self._earlier = earlier_checkpoint
        self.used = False
        self._earlier_may_have_sent = False
        self._this_may_have_sent = False
        self._claimed_without_provider = False
        self._proved_not_sent = False

    def read_earlier(self) -> None:
        """The attempt read the earlier checkpoint: a retry may resume only a safe one."""
        self.used = True
        marker = _parse(self._earlier)
        if self._earlier is None and self._attempt == 1:
            return
        safe = (
            marker is not None
            and marker["callId"] == self._call_id
            and marker["dexFence"] in (NOT_SENT, CAN_RESEND)
        )
        if not safe:
            self._earlier_may_have_sent = True

    def saved(self, text: str) -> None:
        """The attempt saved ``text``; a marker of another call or attempt, or none, lowers nothing."""
        marker = _parse(text)
        if marker is None or (marker["callId"], marker["attempt"]) != (
            self._call_id,
            self._attempt,
        ):
            return
        self.used = True
        state = marker["dexFence"]
        if state == CLAIMED or marker.get("providerId") is not None:
            self._this_may_have_sent = True
            self._claimed_without_provider = marker.get("providerId") is None
            self._proved_not_sent = False
        elif state == CAN_RESEND:
            if self._claimed_without_provider or not self._this_may_have_sent:
                self._this_may_have_sent = False
                self._proved_not_sent = True
        elif state == NOT_SENT and not self._this_may_have_sent:
            self._proved_not_sent = True

    @property
    def may_have_sent(self) -> bool:
        """This attempt may have sent, or the earlier checkpoint it read allows no send.

        A ``canResend`` of this attempt lowers only this attempt's claim: it says
        nothing of what an earlier attempt sent.
        """
        return self._earlier_may_have_sent or self._this_may_have_sent

    @property
    def proved_not_sent(self) -> bool:
        """The fence saved ``notSent`` or ``canResend`` in this attempt, and nothing since sent."""
        return self._proved_not_sent and not self.may_have_sent
