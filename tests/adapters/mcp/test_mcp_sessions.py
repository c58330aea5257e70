"""``McpToolSource`` in whole sessions on the embedded engine, against a real stdio server."""

from __future__ import annotations

import json
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest

from dex_agents import AgentSessionClient
from dex_agents.builtin_loop import (
    FrameworkToolSourceRouter,
    InMemoryMediaStore,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
)
from dex_agents.domain.errors import ToolExecutionError
from dex_agents.domain.runner_outcomes import DeferredToolCall
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy, is_approval_required
from dex_agents.domain.tool_outcomes import OUTCOME_UNKNOWN_TOOL_RESULT
from dex_agents.mcp import McpStdioServerConfig, McpToolCallInterruptedError, McpToolSource
from dex_agents.ports.runner import AgentTurnContext, DeferredToolExecution
from tests.adapters.mcp import session_support
from tests.adapters.mcp.added_fields_proxy import OWN_FIELD
from tests.adapters.mcp.conftest import CallLog
from tests.adapters.mcp.mcp_test_server import schema_v2_file
from tests.adapters.mcp.session_support import SESSION, calls_then_answer, keys, outputs, turn
from tests.adapters.mcp.task_support import NoEvents

ADDED_FIELDS_PROXY = Path(__file__).with_name("added_fields_proxy.py")


def session(
    source: McpToolSource, *calls: tuple[str, dict[str, Any] | str], media_store: Any = None
) -> AbstractAsyncContextManager[AgentSessionClient]:
    """The open session of an agent whose model calls ``calls`` in turn, then answers."""
    return session_support.session(source, calls_then_answer(*calls), media_store=media_store)


async def test_a_read_runs_without_approval_and_carries_the_idempotency_key(
    stdio_server: McpStdioServerConfig, call_log: CallLog
) -> None:
    source = McpToolSource([stdio_server])
    async with session(source, ("notes__read_note", {"name": "a"})) as sessions:
        snapshot = await turn(sessions)
    assert snapshot.pending_interrupts == ()
    assert snapshot.messages[-1].text == "note a: hello"
    (key,) = keys(call_log, "read_note")
    assert key.startswith(f"{SESSION}/")
    assert key.endswith("/c1")


async def test_an_unannotated_write_waits_for_approval_then_runs_once(
    stdio_server: McpStdioServerConfig, call_log: CallLog
) -> None:
    source = McpToolSource([stdio_server])
    async with session(source, ("notes__send_email", {"to": "bo"})) as sessions:
        waiting = await turn(sessions)
        (approval,) = waiting.pending_interrupts
        assert approval.tool_name == "notes__send_email"
        assert call_log.calls("send_email") == []
        assert await sessions.resolve_interrupt(SESSION, approval.interrupt_id, True)
        snapshot = await sessions.wait_for_user(SESSION)
    assert snapshot.messages[-1].text == "sent to bo"
    assert len(call_log.calls("send_email")) == 1


async def test_a_declared_write_asks_despite_its_read_only_hint(
    stdio_server: McpStdioServerConfig, call_log: CallLog
) -> None:
    source = McpToolSource([stdio_server])
    async with session(source, ("notes__send_payment", {"amount": 5})) as sessions:
        waiting = await turn(sessions)
        (approval,) = waiting.pending_interrupts
        assert await sessions.resolve_interrupt(SESSION, approval.interrupt_id, True)
        snapshot = await sessions.wait_for_user(SESSION)
    assert snapshot.messages[-1].text == "paid 5"


async def test_arguments_nested_too_deeply_fail_a_write_without_sending_it(
    stdio_server: McpStdioServerConfig, call_log: CallLog
) -> None:
    source = McpToolSource([stdio_server])
    deep = '{"amount": ' + "[" * 100_000 + "]" * 100_000 + "}"
    async with session(source, ("notes__send_payment", deep)) as sessions:
        waiting = await turn(sessions)
        (approval,) = waiting.pending_interrupts
        assert await sessions.resolve_interrupt(SESSION, approval.interrupt_id, True)
        snapshot = await sessions.wait_for_user(SESSION)
    assert outputs(snapshot) == ["The tool call failed: the tool arguments are nested too deeply"]
    assert call_log.calls("send_payment") == []


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
async def test_arguments_that_are_not_json_numbers_fail_a_write_without_sending_it(
    stdio_server: McpStdioServerConfig, call_log: CallLog, number: str
) -> None:
    # json.loads reads NaN and Infinity (and 1e400 as infinity); no JSON peer can take them.
    source = McpToolSource([stdio_server])
    arguments = '{"amount": ' + number + "}"
    async with session(source, ("notes__send_payment", arguments)) as sessions:
        waiting = await turn(sessions)
        (approval,) = waiting.pending_interrupts
        assert await sessions.resolve_interrupt(SESSION, approval.interrupt_id, True)
        snapshot = await sessions.wait_for_user(SESSION)
    (output,) = outputs(snapshot)
    assert output.startswith("The tool call failed: the tool arguments are not JSON: ")
    assert call_log.calls("send_payment") == []


async def test_a_read_whose_server_crashes_is_sent_again_with_the_same_key(
    stdio_server: McpStdioServerConfig, call_log: CallLog
) -> None:
    source = McpToolSource([stdio_server])
    async with session(source, ("notes__crash_once_read", {})) as sessions:
        snapshot = await turn(sessions)
    assert snapshot.messages[-1].text == "read after a crash"
    first, second = keys(call_log, "crash_once_read")
    assert first == second


async def test_a_write_whose_server_crashes_records_outcome_unknown_and_is_never_resent(
    stdio_server: McpStdioServerConfig, call_log: CallLog
) -> None:
    source = McpToolSource([stdio_server])
    async with session(source, ("notes__crash_write", {})) as sessions:
        waiting = await turn(sessions)
        (approval,) = waiting.pending_interrupts
        assert await sessions.resolve_interrupt(SESSION, approval.interrupt_id, True)
        snapshot = await sessions.wait_for_user(SESSION)
    assert outputs(snapshot) == [OUTCOME_UNKNOWN_TOOL_RESULT]
    assert len(call_log.calls("crash_write")) == 1


async def test_outcomes_errors_and_images_are_recorded_as_the_table_says(
    stdio_server: McpStdioServerConfig, call_log: CallLog
) -> None:
    store = InMemoryMediaStore()
    source = McpToolSource([stdio_server], media_store=store)
    script: tuple[tuple[str, dict[str, Any]], ...] = (
        ("notes__outcome", {"kind": "unknown"}),
        ("notes__outcome", {"kind": "rejected"}),
        ("notes__fails", {}),
        ("notes__rpc_error", {"code": -32602}),
        ("notes__picture", {}),
        ("notes__bad_picture", {}),
    )
    async with session(source, *script, media_store=store) as sessions:
        snapshot = await turn(sessions)
    assert outputs(snapshot) == [
        OUTCOME_UNKNOWN_TOOL_RESULT,
        "The tool call failed: the provider said rejected",
        "The tool call failed: Error executing tool fails",
        "The tool call failed: MCP error -32602: broken",
        "a dot:\n[image 1]",
        "The tool call failed: MCP image 1 is not valid base64",
    ]
    (picture,) = [m for m in snapshot.messages if m.tool_output == "a dot:\n[image 1]"]
    assert len(picture.images) == 1
    assert len(call_log.calls("outcome")) == 2  # neither outcome is sent again


async def test_resources_and_prompts_tools(stdio_server: McpStdioServerConfig) -> None:
    source = McpToolSource([stdio_server], resource_and_prompt_tools_enabled=True)
    script: tuple[tuple[str, dict[str, Any]], ...] = (
        ("mcp_list_resources_and_prompts", {"server": "notes"}),
        ("mcp_read_resource", {"server": "notes", "uri": "note://greeting"}),
        ("mcp_get_prompt", {"server": "notes", "name": "greet", "arguments": {"name": "Al"}}),
        ("mcp_read_resource", {"server": "elsewhere", "uri": "note://x"}),
    )
    async with session(source, *script) as sessions:
        snapshot = await turn(sessions)
    listed, read, prompt, unconfigured = outputs(snapshot)
    everything = json.loads(listed)
    assert [r["uri"] for r in everything["resources"]] == ["note://greeting"]
    assert [t["uriTemplate"] for t in everything["resource_templates"]] == ["note://{name}"]
    assert [p["name"] for p in everything["prompts"]] == ["greet"]
    assert json.loads(read)["contents"][0]["text"] == "hello from a resource"
    assert "Please greet Al." in prompt
    assert unconfigured == "The tool call failed: MCP server 'elsewhere' is not configured"


async def test_a_resource_or_prompt_read_whose_server_crashes_is_sent_again(
    stdio_server: McpStdioServerConfig, call_log: CallLog
) -> None:
    # Found by an audit: the closed connection was recorded failed, as if the server
    # had answered with an error, where a read tool's crash is a Step failure, retried.
    source = McpToolSource([stdio_server], resource_and_prompt_tools_enabled=True)
    script: tuple[tuple[str, dict[str, Any]], ...] = (
        ("mcp_read_resource", {"server": "notes", "uri": "note://crash-once"}),
        (
            "mcp_get_prompt",
            {"server": "notes", "name": "greet", "arguments": {"name": "crash-once"}},
        ),
    )
    async with session(source, *script) as sessions:
        snapshot = await turn(sessions)
    read, prompt = outputs(snapshot)
    assert json.loads(read)["contents"][0]["text"] == "note crash-once"
    assert "Please greet crash-once." in prompt
    assert len(call_log.calls("read_resource")) == len(call_log.calls("get_prompt")) == 2


async def test_resource_and_prompt_outputs_keep_the_fields_the_server_sent(
    stdio_server: McpStdioServerConfig,
) -> None:
    # Found by an audit: the outputs were the SDK's models dumped again, which lost a
    # field the server sent as null (exclude_none) and a field of its own (no MCP type
    # has it), where the design says the items are shown as the server sent them, so
    # both cores show the same text.
    proxied = attrs.evolve(stdio_server, args=(str(ADDED_FIELDS_PROXY),))
    source = McpToolSource([proxied], resource_and_prompt_tools_enabled=True)
    script: tuple[tuple[str, dict[str, Any]], ...] = (
        ("mcp_list_resources_and_prompts", {"server": "notes"}),
        ("mcp_read_resource", {"server": "notes", "uri": "note://greeting"}),
        ("mcp_get_prompt", {"server": "notes", "name": "greet", "arguments": {"name": "Al"}}),
    )
    async with session(source, *script) as sessions:
        snapshot = await turn(sessions)
    listed, read, prompt = (json.loads(output) for output in outputs(snapshot))
    own, value = OWN_FIELD
    for kind in ("prompts", "resource_templates", "resources"):
        assert [(item["title"], item[own]) for item in listed[kind]] == [(None, value)], kind
    assert read == {
        "contents": [
            {
                "_meta": None,
                "mimeType": "text/plain",
                "text": "hello from a resource",
                "uri": "note://greeting",
                own: value,
            }
        ]
    }
    assert prompt == {
        "description": "Greet someone.",
        "messages": [
            {
                "content": {
                    "annotations": None,
                    "text": "Please greet Al.",
                    "type": "text",
                    own: value,
                },
                "role": "user",
            }
        ],
    }


async def test_a_servers_own_32000_or_32001_error_is_its_answer_and_never_sent_again(
    stdio_server: McpStdioServerConfig, call_log: CallLog
) -> None:
    # Found by an audit: the SDK's closed-stream and timeout codes are also in the
    # server-defined range, and a server's answer was read as a broken stream.
    source = McpToolSource([stdio_server])
    script = (("notes__rpc_error", {"code": -32000}), ("notes__rpc_error", {"code": -32001}))
    async with session(source, *script) as sessions:
        snapshot = await turn(sessions)
    assert outputs(snapshot) == [
        "The tool call failed: MCP error -32000: broken",
        "The tool call failed: MCP error -32001: broken",
    ]
    assert [row["arguments"]["code"] for row in call_log.calls("rpc_error")] == [-32000, -32001]


async def test_the_sdks_own_timeout_is_interrupted_where_a_servers_32001_is_not(
    stdio_server: McpStdioServerConfig,
) -> None:
    # Both carry -32001; only the SDK's, whose answer never came, may follow a call that ran.
    source = McpToolSource([stdio_server], request_timeout=timedelta(seconds=1))
    try:
        with pytest.raises(ToolExecutionError, match=r"^MCP error -32001: broken$"):
            await source.call_tool("notes__rpc_error", {"code": -32001})
        with pytest.raises(McpToolCallInterruptedError, match="timed out"):
            await source.call_tool("notes__stall", {})
    finally:
        await source.aclose()


async def test_a_result_is_recorded_when_the_server_changed_its_output_schema_since_listing(
    stdio_server: McpStdioServerConfig, call_log: CallLog
) -> None:
    # Found by an audit: the SDK checked a structured result against the output schema
    # of the Worker's listing, up to listing_ttl old, so a server deployed again with a
    # new schema had every answered call recorded interrupted: a read sent 3 times and
    # failed, a write outcome_unknown.
    def respond(request: ModelRequest) -> ScriptedModelReply:
        done = ScriptedModelClient.tool_results(request)
        if len(done) == 1:
            schema_v2_file(call_log.path).touch()  # after this model call's listing
        if len(done) < 2:
            call = ScriptedToolCall("notes__count_notes", {}, call_id=f"c{len(done) + 1}")
            return ScriptedModelReply(tool_calls=(call,))
        return ScriptedModelReply(text="counted")

    source = McpToolSource([stdio_server])
    async with session_support.session(source, ScriptedModelClient(respond)) as sessions:
        snapshot = await turn(sessions)
    assert [json.loads(output) for output in outputs(snapshot)] == [{"count": 3}, {"total": 3}]
    assert len(call_log.calls("count_notes")) == 2


@pytest.mark.parametrize("trusts", [True, False])
async def test_a_framework_adapter_keeps_the_session_default_for_a_tool_without_an_effect(
    stdio_server: McpStdioServerConfig, trusts: bool
) -> None:
    # Found by an audit: tool_policies() named every tool, so through a framework
    # adapter an unannotated tool (or any tool of a server whose annotations are not
    # trusted) was pinned to unclassified, where the built-in loop gives it the
    # session's default_tool_effect, as the "Effects" table says.
    server = attrs.evolve(stdio_server, trusts_tool_annotations=trusts)
    source = McpToolSource([server])
    try:
        await source.list_tools()
        policies = source.merge_tool_policies({})
    finally:
        await source.aclose()

    def turn(policies: dict[str, ToolPolicy]) -> AgentTurnContext:
        return AgentTurnContext(
            flow_id=SESSION,
            turn_id="t1",
            attempt=1,
            messages=(),
            events=None,  # type: ignore[arg-type]
            heartbeat=None,  # type: ignore[arg-type]
            tool_policies=policies,
            default_tool_effect=ToolEffect.IDEMPOTENT_WRITE,
        )

    adapter = turn(policies)
    for name in ("notes__send_email", "notes__read_note", "notes__send_payment"):
        # The built-in loop's policy: the session has no policies of its own.
        builtin = source.deferred_tool_call(
            turn({}), tool_call_id="c1", tool_name=name, arguments="{}"
        )
        resolved = adapter.resolve_tool_policy(name)
        assert resolved.effect is builtin.policy.effect, name
        assert is_approval_required(resolved) is builtin.policy.requires_approval, name
    assert adapter.resolve_tool_policy("notes__send_email").effect is ToolEffect.IDEMPOTENT_WRITE


def _turn(*records: AgentToolCall) -> AgentTurnContext:
    """A model call of turn ``t1`` that already recorded ``records``."""
    return AgentTurnContext(
        flow_id=SESSION,
        turn_id="t1",
        attempt=1,
        messages=(),
        events=NoEvents(),
        heartbeat=None,  # type: ignore[arg-type]
        tool_calls={record.tool_call_id: record for record in records},
    )


def _first_attempt(call: DeferredToolCall) -> DeferredToolExecution:
    """The first attempt of ``call``, approved as its policy says, as its tool Step hands it over."""

    async def beat() -> None:
        return None

    async def save(checkpoint: str) -> None:
        raise AssertionError(f"no checkpoint is saved, not {checkpoint!r}")

    record = AgentToolCall(
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
        arguments=call.arguments,
        turn_id="t1",
        effect=call.policy.effect,
        requires_approval=is_approval_required(call.policy),
        status=ToolCallStatus.APPROVED,
        deferral_order=0,
        ordered=call.ordered,
        tool_source_reference=call.tool_source_reference,
    )
    return DeferredToolExecution(
        flow_id=SESSION,
        tool_call=record,
        idempotency_key=f"{SESSION}/t1/{call.tool_call_id}",
        attempt=1,
        events=NoEvents(),
        heartbeat=beat,
        save_heartbeat_checkpoint=save,
    )


async def test_a_name_the_source_never_listed_fails_as_unknown_tool_without_approval(
    stdio_server: McpStdioServerConfig, call_log: CallLog
) -> None:
    # Found by an audit: deferred_tool_call raised a bare LookupError, so a runner
    # that defers the model's calls to the source, as the design's runner example
    # does, failed its RunModel attempt on a name the model made up, and so the
    # turn, where the design records it failed as "unknown tool <name>", unapproved.
    source = McpToolSource([stdio_server])
    try:
        await source.list_tools()
        call = source.deferred_tool_call(
            _turn(), tool_call_id="c1", tool_name="notes__nope", arguments="{}"
        )
        assert call.policy == ToolPolicy(ToolEffect.UNCLASSIFIED, requires_approval=False)
        with pytest.raises(ToolExecutionError) as raised:
            await source.execute_deferred_tool_call(_first_attempt(call))
    finally:
        await source.aclose()
    assert str(raised.value) == "unknown tool notes__nope"
    assert call_log.calls() == []


async def test_a_framework_adapter_rebuilds_a_recorded_call_while_its_server_is_down(
    stdio_server: McpStdioServerConfig,
) -> None:
    # Found by an audit: the router rebuilds a recorded call of a tool the live listing
    # lacks (replay-only) through its source with listed_tool=None, but the source
    # looked only in its listing and raised LookupError, so a Step-mode adapter's
    # RunModel failed while the call's server was down, where the design says the
    # recorded call resumes.
    arguments = '{"to": "bo"}'
    first = McpToolSource([stdio_server])
    router = FrameworkToolSourceRouter([first])
    try:
        listing = await router.list_tools(_turn(), [])
        built = router.deferred_tool_call(_turn(), "c1", "notes__send_email", arguments, listing)
    finally:
        await first.aclose()
    assert built.policy.requires_approval  # an unannotated write, not an unknown tool
    recorded = _turn(_first_attempt(built).tool_call)
    down = attrs.evolve(stdio_server, args=("-c", "raise SystemExit(1)"))
    later = McpToolSource([down], connection_attempts=1)
    router = FrameworkToolSourceRouter([later])
    try:
        listing = await router.list_tools(recorded, [])
        assert listing.replay_only_tools == frozenset({"notes__send_email"})
        rebuilt = router.deferred_tool_call(recorded, "c1", "notes__send_email", arguments, listing)
    finally:
        await later.aclose()
    assert rebuilt == built
