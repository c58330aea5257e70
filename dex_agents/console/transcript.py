"""What the console's snapshot route adds to a transcript for the page to draw it.

The page shows the snapshot's messages as they are stored; what it cannot tell from a
message alone, the server says next to the snapshot, by the same rules the CLI uses,
so that no second copy of a rule lives in the page's JavaScript.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dex_agents.domain.messages import MessageRole
from dex_agents.domain.plans import executed_plan_revision


def plan_approvals(snapshot: Mapping[str, Any]) -> dict[str, int]:
    """``{sequence: revision}`` of the user messages the session wrote for a plan's approval.

    ``snapshot`` is the browser snapshot's wire JSON. The page shows each such message
    as the approval it is (``plan revision <n> approved; the agent executes it``), as
    ``dex-agents show`` does, not as the person's words. Keys are strings, as JSON's are.
    """
    approvals: dict[str, int] = {}
    for message in snapshot.get("messages", []):
        if message.get("role") != MessageRole.USER:
            continue
        revision = executed_plan_revision(message.get("text") or "")
        if revision is not None:
            approvals[str(message["sequence"])] = revision
    return approvals
