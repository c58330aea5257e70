"""The pure rules of connector tools ("Connector tools (dex_agents.connectors)").

A connector operation becomes the tool ``<connectorId>_<operation in snake case>``;
its manifest fixes its effect and approval; its result is cut to
``max_result_bytes``; and ``classify_connector_branch`` maps the branch the operation
selected to one recorded outcome. ``conformance/connector_tools.json`` fixes these
rules case by case for a second core.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from enum import StrEnum
from typing import Any

import attrs

from dex_agents.domain.canonical_json import dumps
from dex_agents.domain.tool_calls import ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect

DEFAULT_CONNECTOR_RESULT_MAX_BYTES = 64 * 1024
"""The default ``max_result_bytes`` of a connector tool's result, in bytes of UTF-8 text."""

CONNECTOR_RESULT_TRUNCATED_NOTE = (
    "\n[Dex] The connector result was cut here because it is longer than the tool's "
    "max_result_bytes."
)
"""What follows a connector result that was cut to ``max_result_bytes``."""

CONNECTOR_NOT_SENT_RETRY_LATER = (
    "the connector asked to retry and its fence shows the request was not sent, "
    "so it is safe to call the tool again later"
)
"""The error of a single-attempt write that asked to retry after its fence proved nothing was sent."""

MAX_CONNECTOR_TOOL_NAME_LENGTH = 64
"""The longest tool name a model provider takes; a longer default name is refused."""

_OPERATION = re.compile(r"[A-Za-z0-9_]+")
_CONNECTOR_ID = re.compile(r"[A-Za-z0-9_-]+")


def _starts_word(name: str, index: int) -> bool:
    char = name[index]
    if not char.isupper() or index == 0:
        return False
    previous = name[index - 1]
    if previous.islower() or previous.isdigit():
        return True
    if not previous.isupper() or index + 1 >= len(name) or not name[index + 1].islower():
        return False
    # "IDs": a lone "s" after an acronym is its plural, not the start of a word.
    plural = name[index + 1] == "s" and (index + 2 == len(name) or not name[index + 2].islower())
    return not plural


def connector_snake_case(name: str) -> str:
    """connectorctl's snake case of an operation name, which also names Python Step factories.

    Words start at an uppercase letter after a lowercase letter or a digit
    (``createRefund`` -> ``create_refund``), and at the last uppercase letter of an
    acronym run that a lowercase word follows (``HTTPServerError`` ->
    ``http_server_error``). An acronym run stays one word, and so does its plural
    ``s`` when no other lowercase letter follows (``listStoryIDs`` ->
    ``list_story_ids``). Digits never start a word; they join the word before them
    (``getV2Items`` -> ``get_v2_items``, ``base64Encode`` -> ``base64_encode``). An
    ``_`` separates words as it is, without doubling. Everything is then lowercased.

    Raises ``ValueError`` for a name that is empty or holds other than ASCII letters,
    digits and ``_``.
    """
    if not name.isascii() or not _OPERATION.fullmatch(name):
        raise ValueError(f"an operation name must be ASCII letters, digits and '_', not {name!r}")
    words: list[str] = []
    current: list[str] = []
    for index, char in enumerate(name):
        if char == "_" or (current and _starts_word(name, index)):
            if current:
                words.append("".join(current))
            current = []
        if char != "_":
            current.append(char)
    if current:
        words.append("".join(current))
    if not words:
        raise ValueError(f"an operation name needs a letter or digit, not {name!r}")
    return "_".join(words).lower()


def connector_tool_name(connector_id: str, operation: str) -> str:
    """The default tool name ``<connectorId>_<operation in snake case>``, such as ``stripe_create_refund``.

    Raises ``ValueError`` for a connector ID that is empty or holds other than ASCII
    letters, digits, ``_`` and ``-``, and for a name over 64 characters; pass the tool
    a shorter name then.
    """
    if not connector_id.isascii() or not _CONNECTOR_ID.fullmatch(connector_id):
        raise ValueError(
            f"a connector ID must be ASCII letters, digits, '_' and '-', not {connector_id!r}"
        )
    name = f"{connector_id}_{connector_snake_case(operation)}"
    if len(name) > MAX_CONNECTOR_TOOL_NAME_LENGTH:
        raise ValueError(
            f"the tool name {name!r} is longer than {MAX_CONNECTOR_TOOL_NAME_LENGTH} "
            "characters; give the connector tool a shorter name"
        )
    return name


_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]+")


def require_connector_tool_name(name: object) -> str:
    """Return a connector tool's own ``name``; ``ValueError`` unless it is a name a model takes.

    That is 1 to ``MAX_CONNECTOR_TOOL_NAME_LENGTH`` ASCII letters, digits, ``_`` and
    ``-``, the names a default connector tool name and a function tool may have.
    """
    if (
        not isinstance(name, str)
        or not name.isascii()
        or not _TOOL_NAME.fullmatch(name)
        or len(name) > MAX_CONNECTOR_TOOL_NAME_LENGTH
    ):
        raise ValueError(
            f"a connector tool name must be 1 to {MAX_CONNECTOR_TOOL_NAME_LENGTH} ASCII "
            f"letters, digits, '_' and '-', not {name!r}"
        )
    return name


class ConnectorOperationKind(StrEnum):
    """Whether a connector operation only reads (a Query) or changes something (a Mutation)."""

    QUERY = "query"
    MUTATION = "mutation"


def connector_tool_effect(kind: ConnectorOperationKind, *, retry_safe: bool) -> ToolEffect:
    """The effect of a connector tool, which always comes from its manifest.

    A Query is ``READ``; a Mutation with ``agent.retry: safe`` (``retry_safe``) is
    ``IDEMPOTENT_WRITE``; any other Mutation is ``NON_IDEMPOTENT_WRITE``.
    """
    if ConnectorOperationKind(kind) is ConnectorOperationKind.QUERY:
        return ToolEffect.READ
    return ToolEffect.IDEMPOTENT_WRITE if retry_safe else ToolEffect.NON_IDEMPOTENT_WRITE


def connector_requires_approval(
    *, approval_recommended: bool, requires_approval: bool | None
) -> bool:
    """Whether a connector tool's call waits for approval, before any session policy.

    ``requires_approval`` is the tool's own setting for this call: ``True`` or
    ``False`` overrides the manifest, and a predicate's answer for the call's
    arguments (``True`` when the predicate raised) arrives here as that ``bool``.
    When it is ``None`` the call waits only with ``agent.approval: recommended``
    (``approval_recommended``), so other Mutations run without approval.
    """
    return approval_recommended if requires_approval is None else requires_approval


def truncate_connector_result(text: str, max_bytes: int) -> tuple[str, int | None]:
    """Cut a result over ``max_bytes`` of UTF-8 text; return the text and its full size.

    A result that fits comes back unchanged with ``None``. A longer one is cut at the
    last UTF-8 character boundary at or before ``max_bytes``, followed by
    ``CONNECTOR_RESULT_TRUNCATED_NOTE``, with the full size in bytes for
    ``AgentToolCall.truncated_output_bytes``. Raises ``ValueError`` unless
    ``max_bytes`` is a positive whole number.
    """
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise ValueError(f"max_result_bytes must be a positive whole number, not {max_bytes!r}")
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text, None
    end = max_bytes
    # A UTF-8 continuation byte is 0b10xxxxxx; back up to the start of its character.
    while end > 0 and data[end] & 0xC0 == 0x80:
        end -= 1
    return data[:end].decode("utf-8") + CONNECTOR_RESULT_TRUNCATED_NOTE, len(data)


class ConnectorBranchListing(StrEnum):
    """How ``agent.branches`` lists a branch the agent may see."""

    REJECTED = "rejected"
    UNKNOWN = "unknown"


UNCERTAIN_BRANCH = "uncertain"
"""The branch a connector selects when it cannot tell what the provider did."""

DEFECT_BRANCH = "defect"
"""The branch a connector selects for a defect, sometimes after it called the provider."""


@attrs.frozen(kw_only=True)
class ConnectorBranchOutcome:
    """What a connector call records: ``succeeded`` with ``output``, or an ``error``.

    An ``outcome_unknown`` call's model reads ``OUTCOME_UNKNOWN_TOOL_RESULT``; its
    ``error`` says which branch the operation returned.
    """

    status: ToolCallStatus = attrs.field(converter=ToolCallStatus)
    output: str | None = None
    error: str | None = None


def connector_branch_text(
    connector: str, operation: str, branch: str, kind: str | None, message: str | None
) -> str:
    """``<connector> <operation> returned <branch>: <kind>: <message>``; a missing part is left out."""
    parts = [f"{connector} {operation} returned {branch}"]
    parts.extend(part for part in (kind, message) if part is not None)
    return ": ".join(parts)


def classify_connector_branch(
    *,
    connector: str,
    operation: str,
    kind: ConnectorOperationKind,
    branch: str,
    required_branches: Collection[str],
    listed_branches: Mapping[str, str],
    may_have_sent: bool = False,
    value: Any = None,
    error_kind: str | None = None,
    message: str | None = None,
) -> ConnectorBranchOutcome:
    """Map the branch an operation selected to its record; the first matching row wins.

    1. ``uncertain``, whatever the listing or the required branches say: outcome unknown.
    2. A Mutation's ``defect``, likewise: outcome unknown.
    3. A required (success) branch other than ``defect``: succeeded, with ``value``
       as compact JSON with sorted keys.
    4. Any Mutation branch while its fence cannot prove nothing was sent
       (``may_have_sent``): outcome unknown.
    5. Listed ``rejected`` under ``agent.branches``: failed, with
       ``<connector> <operation> returned <branch>: <kind>: <message>``.
    6. Listed ``unknown``, or a Mutation branch not listed: outcome unknown.
    7. A Query branch not listed, ``defect`` included: failed, with that text.

    ``may_have_sent`` is ignored for a Query. Raises ``ValueError`` for a listing
    value other than ``rejected`` and ``unknown``.
    """
    kind = ConnectorOperationKind(kind)
    for listed, listing in listed_branches.items():
        if listing not in tuple(ConnectorBranchListing):
            raise ValueError(
                f"agent.branches lists {listed!r} as {listing!r}; use 'rejected' or 'unknown'"
            )
    mutation = kind is ConnectorOperationKind.MUTATION
    text = connector_branch_text(connector, operation, branch, error_kind, message)
    unknown = ConnectorBranchOutcome(status=ToolCallStatus.OUTCOME_UNKNOWN, error=text)
    failed = ConnectorBranchOutcome(status=ToolCallStatus.FAILED, error=text)
    if branch == UNCERTAIN_BRANCH or (mutation and branch == DEFECT_BRANCH):
        return unknown
    if branch in required_branches and branch != DEFECT_BRANCH:
        return ConnectorBranchOutcome(status=ToolCallStatus.SUCCEEDED, output=dumps(value))
    if mutation and may_have_sent:
        return unknown
    listed_as = listed_branches.get(branch)
    if listed_as == ConnectorBranchListing.REJECTED:
        return failed
    if listed_as == ConnectorBranchListing.UNKNOWN or mutation:
        return unknown
    return failed


def classify_connector_retry(
    effect: ToolEffect, *, fence_proved_not_sent: bool
) -> ConnectorBranchOutcome | None:
    """What a connector ``RetryError`` records, or ``None`` when the tool Step retries.

    A ``CallTool`` effect (``read``, ``idempotent_write``) retries by its policy. A
    single-attempt write records outcome unknown, unless its fence saved ``notSent``
    or ``canResend`` in this attempt, which proves the provider did not process it:
    then it records failed with ``CONNECTOR_NOT_SENT_RETRY_LATER``.
    """
    if ToolEffect(effect) in (ToolEffect.READ, ToolEffect.IDEMPOTENT_WRITE):
        return None
    if fence_proved_not_sent:
        return ConnectorBranchOutcome(
            status=ToolCallStatus.FAILED, error=CONNECTOR_NOT_SENT_RETRY_LATER
        )
    return ConnectorBranchOutcome(
        status=ToolCallStatus.OUTCOME_UNKNOWN,
        error="the connector asked to retry a single-attempt write that may have been sent",
    )
