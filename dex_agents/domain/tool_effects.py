"""Tool effect classes and per-tool policies.

The effect of a call decides its tool Step, its retries, what a crash leaves
behind and whether it waits for approval by default ("Effects and policies").
``tool_effect_rules`` holds that table; the other functions here read one of its
columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import TYPE_CHECKING

import attrs

from dex_agents.domain.arguments import refusal, require_instance

if TYPE_CHECKING:
    from dex_agents.domain.tool_calls import ToolCallStatus


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
    requires_approval: bool | None = attrs.field(default=None)

    @requires_approval.validator
    def _check_requires_approval(self, _: attrs.Attribute[bool | None], value: object) -> None:
        # Only a bool or None: "no" or 0 would be read by truth, so "no" asked for approval
        # and 1 compared unequal to True, with no error naming the field.
        require_instance(
            "ToolPolicy", "requires_approval", value, (bool, type(None)), "a bool or None"
        )


DEFAULT_TOOL_EFFECT = ToolEffect.UNCLASSIFIED
"""The effect of a tool that neither a policy nor framework metadata classifies
(``AgentSessionOptions.default_tool_effect``)."""


class ToolStepType(StrEnum):
    """The Step that runs a tool call, named as the session Flow names it."""

    CALL_TOOL = "CallTool"
    CALL_SINGLE_ATTEMPT_TOOL = "CallSingleAttemptTool"


class ToolFailureRoute(StrEnum):
    """The Step a tool Step routes to when its attempts are used up."""

    RECORD_TOOL_FAILURE = "RecordToolFailure"
    RECORD_TOOL_OUTCOME_UNKNOWN = "RecordToolOutcomeUnknown"


@dataclass(frozen=True, kw_only=True)
class ToolEffectRules:
    """One row of the "Effects and policies" table.

    ``failure_status`` is what a tool Step that ran and then failed without a
    ``ToolExecutionError`` leaves: ``failed`` for a read, ``outcome_unknown`` for a
    write, because the write may have taken effect. ``reruns_after_crash`` says
    whether a crash mid-call runs the call again (with the same idempotency key)
    rather than leaving its outcome unknown.
    """

    effect: ToolEffect
    step: ToolStepType
    max_attempts: int
    failure_route: ToolFailureRoute
    failure_status: ToolCallStatus
    reruns_after_crash: bool
    requires_approval_by_default: bool


@cache
def _effect_rules() -> Mapping[ToolEffect, ToolEffectRules]:
    # ToolCallStatus lives in tool_calls, which imports ToolEffect from this module,
    # so the table is built on first use instead of at import time.
    from dex_agents.domain.tool_calls import ToolCallStatus

    def row(
        effect: ToolEffect, step: ToolStepType, max_attempts: int, status: ToolCallStatus
    ) -> ToolEffectRules:
        retried = step is ToolStepType.CALL_TOOL
        return ToolEffectRules(
            effect=effect,
            step=step,
            max_attempts=max_attempts,
            failure_route=ToolFailureRoute.RECORD_TOOL_FAILURE
            if retried
            else ToolFailureRoute.RECORD_TOOL_OUTCOME_UNKNOWN,
            failure_status=status,
            reruns_after_crash=retried,
            requires_approval_by_default=not retried,
        )

    rows = (
        row(ToolEffect.READ, ToolStepType.CALL_TOOL, 3, ToolCallStatus.FAILED),
        row(ToolEffect.IDEMPOTENT_WRITE, ToolStepType.CALL_TOOL, 3, ToolCallStatus.OUTCOME_UNKNOWN),
        row(
            ToolEffect.NON_IDEMPOTENT_WRITE,
            ToolStepType.CALL_SINGLE_ATTEMPT_TOOL,
            1,
            ToolCallStatus.OUTCOME_UNKNOWN,
        ),
        row(
            ToolEffect.UNCLASSIFIED,
            ToolStepType.CALL_SINGLE_ATTEMPT_TOOL,
            1,
            ToolCallStatus.OUTCOME_UNKNOWN,
        ),
    )
    return {rules.effect: rules for rules in rows}


def _effect(effect: ToolEffect | str) -> ToolEffect:
    if type(effect) is ToolEffect:
        return effect  # as it is: calling the enum class is slow on Python 3.11, see tool_calls
    try:
        return ToolEffect(effect)
    except ValueError:
        known = ", ".join(member.value for member in ToolEffect)
        raise ValueError(f"unknown tool effect {effect!r}; expected one of {known}") from None


def tool_effect_rules(effect: ToolEffect | str) -> ToolEffectRules:
    """The row of the "Effects and policies" table for ``effect``.

    - ``read``: ``CallTool``, 3 attempts, then ``RecordToolFailure`` records
      ``failed``; a crash runs it again; no approval by default.
    - ``idempotent_write``: ``CallTool``, 3 attempts with the same idempotency key,
      then ``RecordToolFailure`` records ``outcome_unknown``; a crash runs it again
      with the same key; no approval by default.
    - ``non_idempotent_write`` and ``unclassified``: ``CallSingleAttemptTool``, one
      attempt, then ``RecordToolOutcomeUnknown`` records ``outcome_unknown``; a
      crash leaves the outcome unknown; approval by default.
    """
    return _effect_rules()[_effect(effect)]


def tool_step_for_effect(effect: ToolEffect | str) -> ToolStepType:
    """The tool Step that runs a call: ``CallTool`` for reads and idempotent writes,
    else ``CallSingleAttemptTool``."""
    return tool_effect_rules(effect).step


def max_tool_attempts(effect: ToolEffect | str) -> int:
    """How many attempts the tool Step of a call gets by default: 3, or 1 for a single-attempt call."""
    return tool_effect_rules(effect).max_attempts


def tool_failure_route(effect: ToolEffect | str) -> ToolFailureRoute:
    """The failure route of a call's tool Step and of its ``PollToolTask``."""
    return tool_effect_rules(effect).failure_route


def tool_failure_status(effect: ToolEffect | str) -> ToolCallStatus:
    """What a started call that failed without ``ToolExecutionError`` records:
    ``failed`` for a read, ``outcome_unknown`` for a write."""
    return tool_effect_rules(effect).failure_status


def default_requires_approval(effect: ToolEffect | str) -> bool:
    """Whether a call of this effect waits for approval by default ("Effects and policies").

    ``non_idempotent_write`` and ``unclassified`` do; ``read`` and ``idempotent_write`` do not.
    """
    return tool_effect_rules(effect).requires_approval_by_default


def start_mark_may_be_lost(effect: ToolEffect | str) -> bool:
    """Whether the mark a tool Step commits before the tool runs may skip waiting for the disk.

    Only for ``read``: a read that runs again is harmless ("Runs again"), and
    if a lost mark later makes the call look as if it never ran, it records
    ``failed``, which a read records anyway. A write's mark must be on disk: a
    write that looks as if it never ran would be recorded as safe to call
    again, and a second call under a new tool call ID has a new idempotency key.
    """
    return tool_failure_status(effect) == "failed"


UNKNOWN_TOOL_POLICY = ToolPolicy(ToolEffect.UNCLASSIFIED, requires_approval=False)
"""The policy of a call whose name no tool offers: it fails as ``unknown tool <name>``, unapproved.

Both the built-in loop and a tool source asked for a name it never listed use it
("Tool sources"): the call never runs, so no one should approve it.
"""


def is_approval_required(policy: ToolPolicy) -> bool:
    """Whether calls under ``policy`` wait for ``AwaitToolApproval``.

    An explicit ``requires_approval`` wins; ``None`` uses the effect's default:
    ``non_idempotent_write`` and ``unclassified`` ask, ``read`` and
    ``idempotent_write`` do not.
    """
    if policy.requires_approval is not None:
        return policy.requires_approval
    return default_requires_approval(policy.effect)


def resolve_tool_policy(
    name: str,
    policies: Mapping[str, ToolPolicy],
    framework_effect: ToolEffect | None = None,
    default_effect: ToolEffect = DEFAULT_TOOL_EFFECT,
) -> ToolPolicy:
    """The policy for tool ``name``: explicit policy, else framework metadata, else
    ``default_tool_effect``.

    ``policies`` are ``AgentSessionOptions.tool_policies`` by tool name.
    ``framework_effect`` is what the framework's metadata says, such as MCP
    ``readOnlyHint`` (``READ``) or ``idempotentHint`` (``IDEMPOTENT_WRITE``). A
    policy that does not come from ``policies`` has ``requires_approval`` ``None``,
    so the effect's default approval applies.
    """
    explicit = policies.get(name)
    if explicit is not None:
        if not isinstance(explicit, ToolPolicy):
            raise TypeError(
                f"the tool policy for {name!r} must be a ToolPolicy, not {type(explicit).__name__}"
            )
        return explicit
    if framework_effect is not None:
        return ToolPolicy(_effect(framework_effect))
    return ToolPolicy(_effect(default_effect))


def require_tool_effect(where: str, name: str, value: object) -> ToolEffect:
    """Return ``value`` as a ``ToolEffect``; raise ``TypeError`` naming ``where`` and ``name``.

    A string that is a ``ToolEffect`` value (``"read"``) converts, as ``ToolPolicy("read")``
    and ``function_tool(effect="read")`` convert it; any other value is refused.
    """
    if isinstance(value, str):
        try:
            return ToolEffect(value)
        except ValueError:
            pass
    expected = "a ToolEffect (" + ", ".join(repr(effect.value) for effect in ToolEffect) + ")"
    raise refusal(where, name, expected, value)


def require_tool_policies(where: str, value: object) -> Mapping[str, ToolPolicy]:
    """Return ``value`` if it maps tool names (``str``) to ``ToolPolicy`` values.

    Raise ``TypeError`` naming ``where`` and the first key or policy of the wrong type:
    a policy under a key that is no tool name never matched any tool.
    """
    if not isinstance(value, Mapping):
        raise refusal(where, "tool_policies", "a mapping", value)
    for key, policy in value.items():
        require_instance(where, "every key of tool_policies", key, str, "a tool name (str)")
        require_instance(where, f"tool_policies[{key!r}]", policy, ToolPolicy, "a ToolPolicy")
    return value
