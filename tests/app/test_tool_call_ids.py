"""Tool call IDs a session cannot record fail the turn at once, as the design's "Limits" says.

The design names IDs that are empty or contain ``/``. An ID with a lone surrogate
(a provider's JSON ``"\\ud800"``) has no UTF-8 form, so no store can key a record
with it: it fails the turn the same way.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dex_agents import ToolEffect
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
from tests.support.retry_intervals import RETRY_INTERVAL_SCALE


@function_tool(effect=ToolEffect.READ)
def look(topic: str) -> str:
    """Look a topic up."""
    return f"looked {topic} up"


@pytest.mark.parametrize(
    ("call_id", "error"),
    [
        ("a/b", "invalid tool call ID 'a/b': a tool call ID must not contain '/'"),
        (
            "call_\ud800",
            "invalid tool call ID 'call_\\ud800': a tool call ID must be valid Unicode text: "
            "it has a lone surrogate U+D800 at index 5",
        ),
    ],
)
@pytest.mark.parametrize("in_file", [False, True], ids=["memory", "sqlite"])
async def test_an_id_a_session_cannot_record_fails_the_turn_naming_it(
    call_id: str, error: str, in_file: bool, tmp_path: Path
) -> None:
    # The lone surrogate passed the check: SQLite refused each RunModel commit ("the
    # attempt's result could not be committed: 'utf-8' codec can't encode ..."), while
    # in memory the call ran, so the session's file could not be the same session.
    model_calls: list[str] = []

    def respond(request: ModelRequest) -> ScriptedModelReply:
        model_calls.append(ScriptedModelClient.user_texts(request)[-1])
        if model_calls[-1] == "look" and not ScriptedModelClient.tool_results(request):
            call = ScriptedToolCall("look", {"topic": "x"}, call_id=call_id)
            return ScriptedModelReply(tool_calls=(call,))
        return ScriptedModelReply(text="hello")

    agent = AgentDefinition(
        name="ids", instructions="i", model=ScriptedModelClient(respond), tools=[look]
    )
    flow = builtin_agent_session_flow(agent, flow_type="ToolCallIds")
    database = tmp_path / "s.sqlite3" if in_file else None
    async with LocalRuntime(database, [flow], retry_interval_scale=RETRY_INTERVAL_SCALE) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.start_session("s1", "look")
        snapshot = await sessions.wait_for_user("s1")
        assert snapshot.state is not None
        assert snapshot.state.last_turn_error == error
        # Like any failed RunModel attempt, it is retried with its model call.
        assert model_calls == ["look"] * 3
        assert await sessions.send_user_message("s1", "hi")
        snapshot = await sessions.wait_for_user("s1")
        assert snapshot.state is not None
        assert snapshot.state.last_turn_error is None
        assert snapshot.messages[-1].text == "hello"
