"""Declared tools: effects that a tool's own declaration fixes, and how session policies merge in.

A connector manifest declares each operation's effect, and an MCP server built for
Dex declares its tools' effects with the Dex MCP conventions; an MCP tool without a
declaration gets its effect from its annotations (the MCP "Effects" table). A session
``ToolPolicy`` may keep or raise a declared tool's safety, never lower it ("Dex MCP
conventions"). A connector tool's effect always comes from its manifest, and a
policy changes only its approval ("Connector tools").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from dex_agents.domain.mcp_conventions import (
    APPROVAL_RECOMMENDED,
    DECLARABLE_EFFECTS,
    TOOL_APPROVAL_META_KEY,
    TOOL_EFFECT_META_KEY,
)
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy, default_requires_approval

EFFECT_RANK: Mapping[ToolEffect, int] = {
    ToolEffect.READ: 0,
    ToolEffect.IDEMPOTENT_WRITE: 1,
    ToolEffect.NON_IDEMPOTENT_WRITE: 2,
    ToolEffect.UNCLASSIFIED: 3,
}
"""How conservative each effect is: ``READ`` < ``IDEMPOTENT_WRITE`` < ``NON_IDEMPOTENT_WRITE`` < ``UNCLASSIFIED``."""


def more_conservative_effect(first: ToolEffect, second: ToolEffect) -> ToolEffect:
    """The more conservative of two effects by ``EFFECT_RANK``; equal effects give that effect."""
    first, second = ToolEffect(first), ToolEffect(second)
    return first if EFFECT_RANK[first] >= EFFECT_RANK[second] else second


@attrs.frozen(kw_only=True)
class ToolDeclaration:
    """What a tool's own declaration says: its effect and whether it recommends approval.

    ``approval_recommended`` is ``True`` for ``approval: recommended`` and, failing
    closed, for any other approval value a declared MCP tool carries.
    """

    effect: ToolEffect = attrs.field(converter=ToolEffect)
    approval_recommended: bool = False


def merge_declared_tool_policy(
    declared_effect: ToolEffect, approval_recommended: bool, policy: ToolPolicy | None
) -> ToolPolicy:
    """The policy a call of a declared tool runs with, given the session's policy for it.

    Without a session policy, the call has the declared effect and waits for approval
    only when the tool recommends it. With one, the call gets the more conservative of
    the declared effect and the policy's effect; the policy's ``requires_approval``
    wins when set, and when it is ``None`` the call waits for approval when the tool
    recommends it or the policy's effect asks for approval by default, as
    ``NON_IDEMPOTENT_WRITE`` does. The returned policy always sets
    ``requires_approval``, so no effect default applies to it again.
    """
    declared_effect = ToolEffect(declared_effect)
    if policy is None:
        return ToolPolicy(declared_effect, requires_approval=approval_recommended)
    effect = more_conservative_effect(declared_effect, policy.effect)
    if policy.requires_approval is not None:
        return ToolPolicy(effect, requires_approval=policy.requires_approval)
    asks = approval_recommended or default_requires_approval(policy.effect)
    return ToolPolicy(effect, requires_approval=asks)


def merge_tool_policies(
    declarations: Mapping[str, ToolDeclaration],
    policies: Mapping[str, ToolPolicy],
    *,
    base: Mapping[str, ToolPolicy] | None = None,
) -> dict[str, ToolPolicy]:
    """Merge an application's policies into a source's tools, keyed by tool name.

    ``base`` holds the policies the source derives for its undeclared tools, such as
    from MCP annotations; a policy of the same name replaces one of them. Every
    declared tool gets ``merge_declared_tool_policy`` of its declaration and the
    application's policy, so a policy can never lower a declared effect. Other
    policies pass through unchanged.
    """
    merged: dict[str, ToolPolicy] = {**(base or {}), **policies}
    for name, declaration in declarations.items():
        merged[name] = merge_declared_tool_policy(
            declaration.effect, declaration.approval_recommended, policies.get(name)
        )
    return merged


def merge_connector_tool_policy(
    manifest_effect: ToolEffect, tool_requires_approval: bool, policy: ToolPolicy | None
) -> ToolPolicy:
    """The policy a call of a connector tool runs with, given the session's policy for it.

    The effect always comes from the manifest; a session policy changes only the
    approval. ``tool_requires_approval`` is the tool's own answer
    (``connector_requires_approval``). The policy's ``requires_approval`` wins when
    set; when it is ``None`` the call waits when the tool asks or the policy's effect
    asks for approval by default, the same rule as for a declared MCP tool.
    """
    effect = ToolEffect(manifest_effect)
    if policy is None:
        return ToolPolicy(effect, requires_approval=tool_requires_approval)
    if policy.requires_approval is not None:
        return ToolPolicy(effect, requires_approval=policy.requires_approval)
    asks = tool_requires_approval or default_requires_approval(policy.effect)
    return ToolPolicy(effect, requires_approval=asks)


@attrs.frozen(kw_only=True)
class McpToolEffectClassification:
    """The effect of a listed MCP tool and whether its calls wait for approval by default.

    ``declared`` is ``True`` for a tool with a valid Dex ``effect`` key; then
    ``approval_recommended`` says whether it asks for approval (``recommended``, or any
    other ``approval`` value, failing closed). ``requires_approval`` is the approval
    without a session policy. ``warnings`` are log lines for the source to write.
    """

    effect: ToolEffect = attrs.field(converter=ToolEffect)
    declared: bool
    approval_recommended: bool
    requires_approval: bool
    warnings: tuple[str, ...] = ()

    @property
    def declaration(self) -> ToolDeclaration | None:
        """The tool's declaration for ``merge_tool_policies``, or ``None`` for an undeclared tool."""
        if not self.declared:
            return None
        return ToolDeclaration(effect=self.effect, approval_recommended=self.approval_recommended)


def _undeclared(effect: ToolEffect, warnings: tuple[str, ...] = ()) -> McpToolEffectClassification:
    return McpToolEffectClassification(
        effect=effect,
        declared=False,
        approval_recommended=False,
        requires_approval=default_requires_approval(effect),
        warnings=warnings,
    )


def classify_mcp_tool_effect(
    tool: Mapping[str, Any],
    *,
    default_tool_effect: ToolEffect = ToolEffect.UNCLASSIFIED,
    trusts_tool_annotations: bool = True,
) -> McpToolEffectClassification:
    """Classify a tool as ``tools/list`` returns it (the "Effects" table).

    In order: with ``trusts_tool_annotations=False`` the tool gets
    ``default_tool_effect``, ignoring its annotations and both Dex keys. A valid Dex
    ``effect`` key wins over the annotations; an ``effect`` value outside ``read``,
    ``idempotent_write`` and ``non_idempotent_write`` gives ``default_tool_effect``,
    ignores the annotations and warns. ``readOnlyHint: true`` gives ``read``;
    ``idempotentHint: true`` gives ``idempotent_write`` whatever ``destructiveHint``
    says; anything else gives ``default_tool_effect``. ``approval`` without ``effect``
    is ignored; an undeclared tool's approval follows its effect's default.
    """
    default = ToolEffect(default_tool_effect)
    if not trusts_tool_annotations:
        return _undeclared(default)
    name = tool.get("name")
    raw_meta = tool.get("_meta")
    meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
    if TOOL_EFFECT_META_KEY in meta:
        value = meta[TOOL_EFFECT_META_KEY]
        if not isinstance(value, str) or value not in DECLARABLE_EFFECTS:
            warning = (
                f"MCP tool {name!r} declares the unknown {TOOL_EFFECT_META_KEY} value "
                f"{value!r}; it gets the session's default effect {default.value}"
            )
            return _undeclared(default, (warning,))
        warnings: tuple[str, ...] = ()
        recommended = TOOL_APPROVAL_META_KEY in meta
        approval = meta.get(TOOL_APPROVAL_META_KEY)
        if recommended and approval != APPROVAL_RECOMMENDED:
            warnings = (
                f"MCP tool {name!r} has the unknown {TOOL_APPROVAL_META_KEY} value "
                f"{approval!r}; its calls ask for approval",
            )
        return McpToolEffectClassification(
            effect=ToolEffect(value),
            declared=True,
            approval_recommended=recommended,
            requires_approval=recommended,
            warnings=warnings,
        )
    annotations = tool.get("annotations")
    hints = annotations if isinstance(annotations, Mapping) else {}
    if hints.get("readOnlyHint") is True:
        return _undeclared(ToolEffect.READ)
    if hints.get("idempotentHint") is True:
        return _undeclared(ToolEffect.IDEMPOTENT_WRITE)
    return _undeclared(default)


def effective_mcp_tool_policy(
    classification: McpToolEffectClassification, policy: ToolPolicy | None
) -> ToolPolicy:
    """The policy a call of the tool runs with, given the session's ``ToolPolicy`` for its name.

    A declared tool merges the policy with ``merge_declared_tool_policy``, so the policy
    never lowers its effect. For an undeclared tool the policy wins over the annotations.
    The result always sets ``requires_approval``.
    """
    if classification.declared:
        return merge_declared_tool_policy(
            classification.effect, classification.approval_recommended, policy
        )
    if policy is None:
        return ToolPolicy(classification.effect, requires_approval=classification.requires_approval)
    asks = policy.requires_approval
    return ToolPolicy(
        policy.effect,
        requires_approval=default_requires_approval(policy.effect) if asks is None else asks,
    )
