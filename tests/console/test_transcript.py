"""What the snapshot route tells the page about a transcript: the rules run on wire JSON."""

from __future__ import annotations

from typing import Any

from dex_agents.console.transcript import plan_approvals
from dex_agents.domain.plans import executing_turn_user_message


def _message(sequence: int, role: str, text: str | None) -> dict[str, Any]:
    return {"sequence": sequence, "role": role, "text": text}


def test_only_the_sessions_own_approval_message_is_a_plan_approval() -> None:
    approval = executing_turn_user_message(2)
    snapshot = {
        "messages": [
            _message(1, "user", "migrate the orders table"),
            _message(4, "user", approval),
            # A person who typed the same words and more is still a person.
            _message(5, "user", approval + " Then stop."),
            # The model repeating them is the model.
            _message(6, "assistant", approval),
            _message(7, "assistant", None),
        ]
    }
    assert plan_approvals(snapshot) == {"4": 2}
    assert plan_approvals({"messages": []}) == {}
