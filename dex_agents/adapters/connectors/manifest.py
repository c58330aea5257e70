"""An operation's entry in its package's ``dex-connector.json``, as ``connector_tool`` reads it.

The manifest is read as package data of the operation's ``manifest_package``. Its
layout here is the design's contract, not checked against a published Connector
package: ``{"connectorId": ..., "operations": {<name>: {"kind": "query"|"mutation",
"description", "inputSchema", "requiredBranches", "executeMethodTimeoutSeconds",
"retryPolicy": {"maximumAttempts", "initialIntervalSeconds", "backoffCoefficient",
"maximumIntervalSeconds"}, "agent": {"exposed", "retry", "approval", "branches"}}}}``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import timedelta
from importlib import resources
from typing import Any, Final

import attrs

from dex_agents.adapters.connectors.input_schema import require_supported_schema
from dex_agents.domain.connector_naming import ConnectorBranchListing, ConnectorOperationKind
from dex_agents.domain.tool_step_options import ToolCallRetryPolicy

__all__ = [
    "MANIFEST_FILE",
    "MAX_CONNECTOR_ATTEMPTS",
    "OperationManifest",
    "read_operation_manifest",
]

MANIFEST_FILE: Final = "dex-connector.json"
MAX_CONNECTOR_ATTEMPTS: Final = 3
"""A connector tool's ``CallTool`` Step runs at most three attempts, whatever the policy says."""

_AGENT_KEYS: Final = frozenset({"exposed", "retry", "approval", "branches"})
_RETRY_VALUES: Final = frozenset({"safe"})
_APPROVAL_VALUES: Final = frozenset({"recommended"})


@attrs.frozen(kw_only=True)
class OperationManifest:
    """What a connector tool takes from its operation's manifest entry."""

    connector_id: str
    operation: str
    kind: ConnectorOperationKind
    description: str
    input_schema: Mapping[str, Any]
    required_branches: frozenset[str]
    listed_branches: Mapping[str, str]
    retry_safe: bool
    approval_recommended: bool
    timeout: timedelta | None
    retry_policy: ToolCallRetryPolicy | None


def _seconds(value: object, where: str) -> timedelta | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{where} must be a positive number of seconds, not {value!r}")
    try:
        return timedelta(seconds=value)
    except OverflowError:
        raise ValueError(f"{where} is too long: {value!r} seconds") from None


def _coefficient(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{where}.backoffCoefficient must be a number, not {value!r}")
    return float(value)


def _retry_policy(data: object, where: str) -> ToolCallRetryPolicy | None:
    if data is None:
        return ToolCallRetryPolicy(maximum_attempts=MAX_CONNECTOR_ATTEMPTS)
    if not isinstance(data, Mapping):
        raise ValueError(f"{where} must be an object")
    attempts = data.get("maximumAttempts", 0)
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 0:
        raise ValueError(f"{where}.maximumAttempts must be a whole number, not {attempts!r}")
    capped = MAX_CONNECTOR_ATTEMPTS if attempts == 0 else min(attempts, MAX_CONNECTOR_ATTEMPTS)
    return ToolCallRetryPolicy(
        maximum_attempts=capped,
        initial_interval=_seconds(
            data.get("initialIntervalSeconds"), f"{where}.initialIntervalSeconds"
        ),
        backoff_coefficient=_coefficient(data.get("backoffCoefficient", 0.0), where),
        maximum_interval=_seconds(
            data.get("maximumIntervalSeconds"), f"{where}.maximumIntervalSeconds"
        ),
    )


def _agent(entry: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    agent = entry.get("agent")
    if not isinstance(agent, Mapping) or agent.get("exposed") is not True:
        raise ValueError(f"{where} is not exposed to agents: its entry lacks agent.exposed: true")
    unknown = sorted(set(agent) - _AGENT_KEYS)
    if unknown:
        raise ValueError(f"{where} has agent keys this version does not know: {unknown}")
    if "retry" in agent and not (
        isinstance(agent["retry"], str) and agent["retry"] in _RETRY_VALUES
    ):
        raise ValueError(f"{where} has agent.retry {agent['retry']!r}; the only value is 'safe'")
    if "approval" in agent and not (
        isinstance(agent["approval"], str) and agent["approval"] in _APPROVAL_VALUES
    ):
        raise ValueError(
            f"{where} has agent.approval {agent['approval']!r}; the only value is 'recommended'"
        )
    branches = agent.get("branches", {})
    if not isinstance(branches, Mapping) or any(
        value not in tuple(ConnectorBranchListing) for value in branches.values()
    ):
        raise ValueError(f"{where} lists agent.branches other than 'rejected' and 'unknown'")
    return agent


def parse_operation_manifest(document: Mapping[str, Any], operation: str) -> OperationManifest:
    """The entry of ``operation`` in a parsed manifest; ``ValueError`` names what is wrong."""
    if not isinstance(document, Mapping):
        raise ValueError(f"{MANIFEST_FILE} is not a JSON object")
    connector_id = document.get("connectorId")
    if not isinstance(connector_id, str):
        raise ValueError(f"{MANIFEST_FILE} has no connectorId")
    where = f"{connector_id} operation {operation!r}"
    operations = document.get("operations", {})
    if not isinstance(operations, Mapping):
        raise ValueError(f"{MANIFEST_FILE} of {connector_id}: operations must be an object")
    entry = operations.get(operation)
    if not isinstance(entry, Mapping):
        raise ValueError(f"{MANIFEST_FILE} of {connector_id} has no operation {operation!r}")
    agent = _agent(entry, where)
    schema = entry.get("inputSchema", {"type": "object"})
    require_supported_schema(schema, f"{where} inputSchema")
    kinds = {kind.value: kind for kind in ConnectorOperationKind}
    raw_kind = entry.get("kind")
    kind = kinds.get(raw_kind) if isinstance(raw_kind, str) else None
    if kind is None:
        raise ValueError(f"{where} has kind {raw_kind!r}; use 'query' or 'mutation'")
    # A string would be read as a set of letters, so its success branch would never match.
    required = entry.get("requiredBranches", [])
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        raise ValueError(f"{where} requiredBranches must be a list of branch names")
    description = entry.get("description", "")
    if not isinstance(description, str):
        raise ValueError(f"{where} description must be a string")
    return OperationManifest(
        connector_id=connector_id,
        operation=operation,
        kind=kind,
        description=description,
        input_schema=schema,
        required_branches=frozenset(required),
        listed_branches=dict(agent.get("branches", {})),
        retry_safe=agent.get("retry") == "safe",
        approval_recommended=agent.get("approval") == "recommended",
        timeout=_seconds(entry.get("executeMethodTimeoutSeconds"), f"{where} executeMethodTimeout"),
        retry_policy=_retry_policy(entry.get("retryPolicy"), f"{where} retryPolicy"),
    )


def read_operation_manifest(package: str, operation: str) -> OperationManifest:
    """Read ``dex-connector.json`` from ``package``'s data and return ``operation``'s entry."""
    text = resources.files(package).joinpath(MANIFEST_FILE).read_text(encoding="utf-8")
    try:
        document = json.loads(text)
    except ValueError as error:
        raise ValueError(f"{MANIFEST_FILE} of package {package!r} is not JSON: {error}") from None
    return parse_operation_manifest(document, operation)
