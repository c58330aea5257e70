"""A whole session on the embedded engine whose tools come from a ConnectorToolSource.

The Connector SDK is ``fake_sdk``; the engine, the session Flow, the tool Steps and
the approval are the real ones.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from dex_agents.builtin_loop import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    builtin_agent_session_flow,
)
from dex_agents.connectors import (
    CONNECTOR_RESULT_TRUNCATED_NOTE,
    ConnectorToolSource,
    connector_tool,
)
from dex_agents.local import LocalRuntime
from tests.adapters.connectors.fake_sdk import Branch, Call, FakeOperation, returning

TURN = timedelta(seconds=30)


async def test_a_query_and_an_approved_refund_run_once_each_through_the_sdk() -> None:
    charges = FakeOperation("stripe", "listChargeIDs", returning(Branch("listed", ["ch_1"])))

    async def refund_script(call: Call, context: Any, arguments: Any) -> Branch:
        return Branch("refunded", {"refund": "re_1", "amount": arguments["amount"]})

    refund = FakeOperation("stripe", "createRefund", refund_script)
    source = ConnectorToolSource(
        [
            connector_tool(charges, "billing-stripe"),
            connector_tool(
                refund, "billing-stripe", requires_approval=lambda a: a["amount"] > 5000
            ),
        ]
    )

    def respond(request: ModelRequest) -> ScriptedModelReply:
        done = [result.tool_name for result in ScriptedModelClient.tool_results(request)]
        if not done:
            return ScriptedModelReply(
                tool_calls=[ScriptedToolCall("stripe_list_charge_ids", {"customer": "cu_1"})]
            )
        if "stripe_create_refund" not in done:
            arguments = {"charge": "ch_1", "amount": 9000}
            return ScriptedModelReply(
                tool_calls=[ScriptedToolCall("stripe_create_refund", arguments)]
            )
        return ScriptedModelReply(text="Refunded.")

    model = ScriptedModelClient(respond)
    agent = AgentDefinition(
        name="support", instructions="You help customers.", model=model, tool_sources=[source]
    )
    flow = builtin_agent_session_flow(agent, flow_type="SupportAgent")
    async with LocalRuntime(None, [flow], poll_interval=timedelta(milliseconds=20)) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("s-1")
        assert await sessions.send_user_message("s-1", "Refund my last charge")
        snapshot = await sessions.wait_for_user("s-1", timeout=TURN)
        (interrupt,) = snapshot.pending_interrupts
        assert refund.runs == []  # it waits for approval
        await sessions.resolve_interrupt("s-1", interrupt.interrupt_id, approved=True)
        snapshot = await sessions.wait_for_user("s-1", timeout=TURN)

    assert snapshot.state is not None
    assert snapshot.state.last_turn_error is None
    assert snapshot.messages[-1].text == "Refunded."
    outputs = [m.tool_output for m in snapshot.messages if m.tool_output is not None]
    assert outputs == ['["ch_1"]', '{"amount":9000,"refund":"re_1"}']
    ((kind, call, arguments, attempt),) = refund.runs
    assert (kind, arguments, attempt) == ("mutation", {"charge": "ch_1", "amount": 9000}, 1)
    assert call.connection == "billing-stripe"
    assert call.idempotency_key.startswith("s-1/")
    assert call.call_id.startswith("call-")
    assert len(charges.runs) == 1


async def test_a_cut_result_keeps_its_full_size_on_the_record() -> None:
    charges = ["ch_" + "x" * 50] * 10
    listed = FakeOperation("stripe", "listChargeIDs", returning(Branch("listed", charges)))
    cancel = FakeOperation("stripe", "cancelSubscription", returning(Branch("cancelled", {})))
    source = ConnectorToolSource(
        [connector_tool(listed, "r", max_result_bytes=100), connector_tool(cancel, "r")]
    )

    def respond(request: ModelRequest) -> ScriptedModelReply:
        if not ScriptedModelClient.tool_results(request):
            return ScriptedModelReply(
                tool_calls=[ScriptedToolCall("stripe_list_charge_ids", {"customer": "cu_1"})]
            )
        # A write that waits for approval keeps the turn, and so its records, active.
        return ScriptedModelReply(
            tool_calls=[ScriptedToolCall("stripe_cancel_subscription", {"id": "sub_1"})]
        )

    agent = AgentDefinition(
        name="support",
        instructions="You help customers.",
        model=ScriptedModelClient(respond),
        tool_sources=[source],
    )
    flow = builtin_agent_session_flow(agent, flow_type="SupportAgent")
    async with LocalRuntime(None, [flow], poll_interval=timedelta(milliseconds=20)) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("s-1")
        assert await sessions.send_user_message("s-1", "List my charges")
        snapshot = await sessions.wait_for_user("s-1", timeout=TURN)

    read = next(call for call in snapshot.tool_calls if call.tool_name == "stripe_list_charge_ids")
    assert read.output is not None
    assert read.output.endswith(CONNECTOR_RESULT_TRUNCATED_NOTE)
    assert read.truncated_output_bytes == len(json.dumps(charges, separators=(",", ":")))
