"""Approvals and questions: the agent asks the user, then a write is rejected with a reason.

The scripted model first asks which subscription to cancel with the built-in
``ask_user`` tool; the program answers with ``answer_question``. The model then
calls ``cancel_subscription``, a write that needs approval; the program rejects
it with a ``rejection_message``, which the model reads as the call's result, so
the tool never runs. Last, it prints the turn's stored messages.

Run it with ``uv run python examples/approvals_and_questions.py``. The session
lives in ``approvals-and-questions.sqlite3``; each run sends one more request.
"""

from __future__ import annotations

import asyncio
import json

from dex_agents import AgentMessage, BuiltInTool, InterruptKind, MessageRole, ToolEffect
from dex_agents.builtin_loop import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    builtin_agent_session_flow,
    function_tool,
)
from dex_agents.local import LocalRuntime


@function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=True)
def cancel_subscription(plan: str) -> str:
    """Cancel one of the customer's subscriptions."""
    print(f"  (cancel_subscription ran for {plan})")
    return f"cancelled the {plan} subscription"


def scripted_model(request: ModelRequest) -> ScriptedModelReply:
    """Ask which plan, cancel it once answered, then report what the call returned."""
    results = ScriptedModelClient.tool_results(request)
    if not results:
        question = {"question": "Which subscription?", "choices": ["basic", "pro"]}
        return ScriptedModelReply(tool_calls=(ScriptedToolCall(BuiltInTool.ASK_USER, question),))
    latest = results[-1]
    if latest.tool_name == BuiltInTool.ASK_USER:
        plan = json.loads(latest.output)["answer"]
        return ScriptedModelReply(
            tool_calls=(ScriptedToolCall("cancel_subscription", {"plan": plan}),)
        )
    return ScriptedModelReply(text=f"The cancellation did not happen: {latest.output}")


agent = AgentDefinition(
    name="billing",
    instructions="You manage the customer's subscriptions.",
    model=ScriptedModelClient(scripted_model),
    tools=[cancel_subscription],
    built_in_tools=frozenset({BuiltInTool.ASK_USER}),
)
flow = builtin_agent_session_flow(agent, flow_type="BillingAgent")


def describe(message: AgentMessage) -> str:
    """One line for a stored message: its text, the tool it calls, or the tool's result."""
    if message.role is MessageRole.TOOL:
        return f"{message.tool_name} -> {message.tool_output}"
    if message.tool_name is not None:
        return f"calls {message.tool_name} {message.tool_arguments}"
    return message.text or ""


async def main() -> None:
    async with LocalRuntime("approvals-and-questions.sqlite3", [flow]) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("customer-9")
        await sessions.send_user_message("customer-9", "Cancel my subscription.")
        while True:
            snapshot = await sessions.wait_for_user("customer-9")
            if not snapshot.pending_interrupts:
                break
            interrupt = snapshot.pending_interrupts[0]
            if interrupt.kind is InterruptKind.QUESTION:
                print(f"question: {interrupt.question} {list(interrupt.choices)} -> pro")
                await sessions.answer_question("customer-9", interrupt.interrupt_id, "pro")
            else:
                print(f"rejecting {interrupt.tool_name} {interrupt.arguments}")
                await sessions.resolve_interrupt(
                    "customer-9",
                    interrupt.interrupt_id,
                    approved=False,
                    rejection_message="Not today: keep it until the end of the month.",
                )
        answer = snapshot.messages[-1]
        print(f"agent: {answer.text}")
        print(f"the messages of {answer.turn_id}:")
        page = await sessions.list_agent_messages("customer-9", limit=20)
        for message in (m for m in page.messages if m.turn_id == answer.turn_id):
            print(f"  {message.sequence} {message.role}: {describe(message)}")


if __name__ == "__main__":
    asyncio.run(main())
