"""A fake ``dex_connectors_sdk`` written against the design's contract, not the real SDK.

``install_fake_sdk`` puts it in ``sys.modules`` so ``dex_agents.connectors`` imports.
A ``FakeOperation`` answers each run with its ``script``: a function of the call, the
Step context and the arguments that returns a ``Branch`` or raises ``RetryError``.
Every run is recorded, so a test can check the Call it got.
"""

from __future__ import annotations

import hashlib
import sys
import types
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

MODULE = "dex_connectors_sdk"


class RetryError(Exception):
    """The connector asks for a retry."""


class DexRetry(Exception):
    """What the fake ``raise_dex_retry`` raises: any error retries a CallTool Step."""


@dataclass(frozen=True)
class Call:
    call_id: str
    connection: Any
    idempotency_key: str


@dataclass(frozen=True)
class Branch:
    branch: str
    value: Any = None
    error_kind: str | None = None
    message: str | None = None


def derive_call_id(flow_id: str, step_execution_id: str, operation: str) -> str:
    digest = hashlib.sha256(f"{flow_id}\x00{step_execution_id}\x00{operation}".encode())
    return "call-" + digest.hexdigest()[:16]


def raise_dex_retry(error: RetryError) -> None:
    raise DexRetry(str(error)) from error


Script = Callable[[Call, Any, Any], Awaitable[Branch]]


@dataclass
class FakeOperation:
    connector_id: str
    name: str
    script: Script
    manifest_package: str = "tests.adapters.connectors.fake_stripe"
    runs: list[tuple[str, Call, Any, int]] = field(default_factory=list)


async def _run(
    kind: str, operation: FakeOperation, call: Call, context: Any, arguments: Any
) -> Any:
    operation.runs.append((kind, call, arguments, context.attempt))
    return await operation.script(call, context, arguments)


async def run_query(operation: FakeOperation, call: Call, context: Any, arguments: Any) -> Any:
    return await _run("query", operation, call, context, arguments)


async def run_mutation(operation: FakeOperation, call: Call, context: Any, arguments: Any) -> Any:
    return await _run("mutation", operation, call, context, arguments)


def install_fake_sdk() -> types.ModuleType:
    module = sys.modules.get(MODULE)
    if module is not None:
        return module
    module = types.ModuleType(MODULE)
    for name in (
        "Call",
        "RetryError",
        "derive_call_id",
        "raise_dex_retry",
        "run_query",
        "run_mutation",
    ):
        setattr(module, name, globals()[name])
    sys.modules[MODULE] = module
    return module


def returning(branch: Branch) -> Script:
    async def script(call: Call, context: Any, arguments: Any) -> Branch:
        return branch

    return script
