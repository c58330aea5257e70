"""Tool effect classes and per-tool policies.

The effect of a call decides its tool Step, its retries, what a crash leaves
behind and whether it waits for approval by default ("Effects and policies").
"""

from __future__ import annotations

from enum import StrEnum

import attrs


class ToolEffect(StrEnum):
    """What a tool call may do to the world, as the wire carries it."""

    READ = "read"
    IDEMPOTENT_WRITE = "idempotent_write"
    NON_IDEMPOTENT_WRITE = "non_idempotent_write"
    UNCLASSIFIED = "unclassified"


@attrs.frozen
class ToolPolicy:
    """The effect of a tool and whether its calls wait for approval.

    ``requires_approval`` ``None`` uses the effect's default approval, which
    ``is_approval_required`` reports.
    """

    effect: ToolEffect = attrs.field(converter=ToolEffect)
    requires_approval: bool | None = None
