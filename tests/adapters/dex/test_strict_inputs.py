"""On Dex, a session RPC's input decodes through the strict converter: a wrong type never reaches the handler."""

from __future__ import annotations

from typing import Any

import pytest

from dex_agents import AgentSessionFlow
from dex_agents.adapters.dex.wire_values import from_dex
from dex_agents.domain.errors import WireFormatError
from tests.app.scripted_runner import ScriptedRunner


@pytest.mark.parametrize(
    ("rpc", "text", "message"),
    [
        (
            "resolve_interrupt",
            '{"interrupt_id": "call-1", "approved": "false"}',
            "invalid ResolveInterruptRequest: approved: expected a bool, not str",
        ),
        (
            "send_user_message",
            '{"text": null}',
            "invalid AgentUserMessage: text: expected a str, not None",
        ),
        (
            "answer_question",
            '{"interrupt_id": "call-1", "answer": 5}',
            "invalid AnswerQuestionRequest: answer: expected a str, not int",
        ),
        (
            "list_agent_messages",
            '{"limit": "5"}',
            "invalid ListAgentMessagesRequest: limit: expected an int, not str",
        ),
        (
            "execute_plan",
            '{"revision": 1.5}',
            "invalid ExecutePlanRequest: revision: expected an int, not float",
        ),
    ],
)
def test_the_dex_rpc_handler_refuses_wrong_typed_json_before_it_reads_state(
    rpc: str, text: str, message: str
) -> None:
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="TriageAgent")
    handler = flow.dex_rpc_method(rpc)
    # The input is decoded before the Context is touched, so no Context is needed.
    context: Any = object()
    with pytest.raises(WireFormatError) as caught:
        handler(context, text)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("type_hint", "value", "message"),
    [
        (bool, "false", "invalid bool: expected a bool, not str"),
        (int, True, "invalid int: expected an int, not bool"),
        (str, 7, "invalid str: expected a str, not int"),
        (type(None), "x", "expected null, not str"),
    ],
)
def test_a_native_value_from_dex_is_checked_against_its_type(
    type_hint: Any, value: Any, message: str
) -> None:
    with pytest.raises(WireFormatError, match=message):
        from_dex(type_hint, value)
