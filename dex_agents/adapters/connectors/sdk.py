"""Every name dex-agents takes from the Connector SDK (``dex_connectors_sdk``), in one place.

The SDK is not on the package index this project builds from, so this module is
written against the design's contract, not against the SDK itself. What is assumed:

- ``run_query(operation, call, context, arguments)`` and ``run_mutation(...)`` are
  coroutines that return the selected branch as an object with ``branch`` (``str``),
  ``value``, ``error_kind`` and ``message``;
- ``derive_call_id(flow_id, step_execution_id, operation_name) -> str``;
- ``Call(call_id=..., connection=..., idempotency_key=...)``;
- ``RetryError``, which an operation raises to ask for a retry, and
  ``raise_dex_retry(error)``, which raises the Dex retry error for it (SDK 0.9.0);
- an operation object with ``connector_id``, ``name`` (as in the manifest) and
  ``manifest_package`` (the package whose data holds ``dex-connector.json``).
"""

from __future__ import annotations

from dex_connectors_sdk import (  # type: ignore[import-not-found]
    Call,
    RetryError,
    derive_call_id,
    raise_dex_retry,
    run_mutation,
    run_query,
)

__all__ = ["Call", "RetryError", "derive_call_id", "raise_dex_retry", "run_mutation", "run_query"]
