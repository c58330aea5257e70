"""``conformance/mcp_dex_conventions.json`` through a real ``McpToolSource`` and a real server.

``tests/conformance`` runs the cases against the pure rules. Here each case's tool
definition, result or JSON-RPC error is served by ``conventions_server.py`` over
Streamable HTTP, so it crosses the MCP SDK on the wire, and the source's listing,
``McpTool``, ``deferred_tool_call`` and ``call_tool`` must still give what the
case expects. The task and input cases (``poll_interval``, ``input_request``,
``unanswerable_text``, ``input_response``) need a task on the server and run
through the source in the task tests, not here. A result or error case whose
served JSON holds a ``null`` is left out: the MCP SDK's server drops ``null``
values from what it sends (mcp 2.3), so no server built with it can send that
case (the server sends a tool definition's ``annotations`` and ``_meta`` as the
case has them, nulls and string hints too). ``KNOWN_DEVIATIONS`` are cases the
source gets wrong today: strict ``xfail``, so fixing one fails its test until the
entry goes.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest

from dex_agents.builtin_loop import InMemoryMediaStore
from dex_agents.domain.errors import ToolExecutionError, ToolOutcomeUnknownError
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy, is_approval_required
from dex_agents.mcp import (
    McpStreamableHttpServerConfig,
    McpTool,
    McpToolCallInterruptedError,
    McpToolSource,
)
from dex_agents.ports.runner import AgentTurnContext
from tests.adapters.mcp.conventions_server import ANSWER_OPS, DEFINITION_OPS, cases, tool_name
from tests.adapters.mcp.http_server import HttpTestServer

KNOWN_DEVIATIONS: dict[str, str] = {}
SERVER = "served"
LOGGER = "dex_agents.adapters.mcp"


def _has_null(value: object) -> bool:
    if isinstance(value, dict):
        return any(_has_null(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_null(item) for item in value)
    return value is None


def _unsendable(case_input: dict[str, Any]) -> bool:
    return case_input["op"] in ANSWER_OPS and _has_null(
        case_input.get("result", case_input.get("error"))
    )


def params(ops: frozenset[str]) -> list[Any]:
    """The cases of ``ops`` as ``(index, input, expect)``, each with its name as its ID."""
    return [
        pytest.param(
            index,
            case["input"],
            case["expect"],
            id=case["name"],
            marks=(
                [pytest.mark.xfail(reason=KNOWN_DEVIATIONS[case["name"]], strict=True)]
                if case["name"] in KNOWN_DEVIATIONS
                else []
            ),
        )
        for index, case in enumerate(cases())
        if case["input"]["op"] in ops and not _unsendable(case["input"])
    ]


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with HttpTestServer({}, module="tests.adapters.mcp.conventions_server") as server:
        yield server.url


def source(url: str, *, trusts: bool = True, uploads: bool = False) -> McpToolSource:
    config = McpStreamableHttpServerConfig(name=SERVER, url=url, trusts_tool_annotations=trusts)
    return McpToolSource([config], media_store=InMemoryMediaStore() if uploads else None)


def turn(default: ToolEffect, policies: dict[str, ToolPolicy] | None = None) -> AgentTurnContext:
    return AgentTurnContext(
        flow_id="s1",
        turn_id="t1",
        attempt=1,
        messages=(),
        events=None,  # type: ignore[arg-type]
        heartbeat=None,  # type: ignore[arg-type]
        tool_policies=policies or {},
        default_tool_effect=default,
    )


async def listed(tools: McpToolSource, index: int) -> McpTool:
    offered = {tool.name: tool for tool in await tools.list_tools()}
    tool = offered[f"{SERVER}__{tool_name(index)}"]
    assert isinstance(tool, McpTool)
    return tool


def source_warnings(caplog: pytest.LogCaptureFixture, module: str) -> list[str]:
    """The warnings the source's ``module`` logged (not the SDK's or the HTTP client's)."""
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == f"{LOGGER}.{module}" and record.levelno >= logging.WARNING
    ]


def warned_about(caplog: pytest.LogCaptureFixture, index: int) -> bool:
    # The classification's warnings name the tool, quoted.
    return any(f"'{tool_name(index)}'" in message for message in source_warnings(caplog, "tools"))


@pytest.mark.parametrize(("index", "case_input", "expect"), params(frozenset({"classify_tool"})))
async def test_a_listed_tool_is_classified_as_the_case_says(
    url: str,
    caplog: pytest.LogCaptureFixture,
    index: int,
    case_input: dict[str, Any],
    expect: dict[str, Any],
) -> None:
    tools = source(url, trusts=case_input["trusts_tool_annotations"])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        tool = await listed(tools, index)
    default = ToolEffect(case_input["default_tool_effect"])
    classification = tool.classify(default)
    call = tools.deferred_tool_call(
        turn(default), tool_call_id="c1", tool_name=tool.name, arguments="{}"
    )
    assert {
        "effect": call.policy.effect.value,
        "declared": classification.declared,
        "approval_recommended": classification.approval_recommended,
        "requires_approval": call.policy.requires_approval,
        "warned": warned_about(caplog, index),
    } == expect
    await tools.aclose()


@pytest.mark.parametrize(("index", "case_input", "expect"), params(frozenset({"tool_policy"})))
async def test_a_call_runs_with_the_policy_the_case_says(
    url: str, index: int, case_input: dict[str, Any], expect: dict[str, Any]
) -> None:
    tools = source(url)
    tool = await listed(tools, index)
    policy = case_input["policy"]
    policies = (
        {}
        if policy is None
        else {
            tool.name: ToolPolicy(
                ToolEffect(policy["effect"]), requires_approval=policy["requires_approval"]
            )
        }
    )
    call = tools.deferred_tool_call(
        turn(ToolEffect.UNCLASSIFIED, policies),
        tool_call_id="c1",
        tool_name=tool.name,
        arguments="{}",
    )
    assert {
        "effect": call.policy.effect.value,
        "requires_approval": call.policy.requires_approval,
    } == (expect)
    # merge_tool_policies, the framework adapter's path, gives the same policy; a tool
    # it leaves out gets the session's default, as the adapter's session resolves it.
    merged = turn(ToolEffect.UNCLASSIFIED, tools.merge_tool_policies(policies)).resolve_tool_policy(
        tool.name
    )
    assert merged.effect is call.policy.effect
    assert is_approval_required(merged) is call.policy.requires_approval
    await tools.aclose()


@pytest.mark.parametrize(("index", "case_input", "expect"), params(ANSWER_OPS))
async def test_a_call_records_what_the_case_says(
    url: str,
    caplog: pytest.LogCaptureFixture,
    index: int,
    case_input: dict[str, Any],
    expect: dict[str, Any],
) -> None:
    tools = source(url, uploads=case_input.get("uploads_images", False))
    tool = await listed(tools, index)
    caplog.clear()
    kind: str
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        try:
            result = await tools.call_tool(tool.name, {})
        except ToolOutcomeUnknownError as error:
            kind, text = "outcome_unknown", str(error)
        except McpToolCallInterruptedError as error:
            kind, text = "interrupted", str(error)
        except ToolExecutionError as error:
            kind, text = "failed", str(error)
        else:
            kind, text = "succeeded", result.output
            # Each image the text shows was uploaded and recorded.
            assert len(result.images) == len(re.findall(r"\[image \d+\]", text))
    assert {"kind": kind, "text": text, "warned": bool(source_warnings(caplog, "calls"))} == expect
    await tools.aclose()


def test_the_left_out_cases_are_few_and_named() -> None:
    names = {case["name"] for case in cases()}
    assert set(KNOWN_DEVIATIONS) <= names
    covered = DEFINITION_OPS | ANSWER_OPS
    ran = [case for case in cases() if case["input"]["op"] in covered]
    left_out = [case["name"] for case in ran if _unsendable(case["input"])]
    assert len(ran) == 53
    assert len(left_out) == 1, left_out
