"""The README's tour runs as written, and its Dex example gets as far as it can without a server.

The tour's fragments call an ``AgentSessionClient`` named ``sessions``; here
they run, in the README's order, against the agent of
``examples/first_agent.py`` on an in-memory ``LocalRuntime``, and each test
checks that the session did what the README says. The "Running on Dex" block
runs with its server address pointed at a closed port: every name in it is
real, and its first call fails as a retryable ``UNAVAILABLE`` engine error.
"""

from __future__ import annotations

import ast
import inspect
import runpy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from dex_agents import AgentSessionClient, AgentSnapshot, InterruptKind
from dex_agents.adapters.dex.errors import DexEngineError
from dex_agents.domain.tool_outcomes import STEERED_TOOL_RESULT, TURN_CANCELLED_TOOL_RESULT
from dex_agents.local import LocalRuntime
from dex_agents.testing import wait_for_agent_snapshot
from tests.test_examples import EXAMPLES, section_blocks

SESSION = "customer-8"


def tour_block(call: str) -> str:
    """The tour's python block that contains ``call``."""
    (block,) = [b for b in section_blocks("A tour of the API", "python") if call in b.text]
    return block.text


async def run_fragment(code: str, namespace: dict[str, Any]) -> None:
    """Run a README fragment whose statements ``await``, as the body of an async function."""
    compiled = compile(code, "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(compiled, namespace)
    if inspect.iscoroutine(result):
        await result


def first_agent() -> dict[str, Any]:
    """The globals of ``examples/first_agent.py``, without running its ``main``."""
    return runpy.run_path(str(EXAMPLES / "first_agent.py"))


@pytest.fixture
async def sessions() -> AsyncIterator[AgentSessionClient]:
    flow = first_agent()["flow"]
    async with LocalRuntime(None, [flow]) as runtime:
        yield runtime.sessions(flow)


def idle(snapshot: AgentSnapshot) -> AgentSnapshot | None:
    state = snapshot.state
    if state and state.active_turn_id is None and not snapshot.pending_interrupts:
        return snapshot
    return None


async def wait_idle(sessions: AgentSessionClient) -> AgentSnapshot:
    return await wait_for_agent_snapshot(sessions, SESSION, idle, description="an idle session")


def refund_results(snapshot: AgentSnapshot) -> list[str]:
    """What the model read as the result of each ``refund_order`` call, in order."""
    return [
        m.tool_output for m in snapshot.messages if m.tool_name == "refund_order" and m.tool_output
    ]


async def start_turn_waiting_for_approval(sessions: AgentSessionClient) -> AgentSnapshot:
    """A session whose running turn waits for the approval of its refund."""
    await sessions.open_session(SESSION)
    assert await sessions.send_user_message(SESSION, "Please refund order 8.")
    snapshot = await sessions.wait_for_user(SESSION)
    assert [i.tool_name for i in snapshot.pending_interrupts] == ["refund_order"]
    return snapshot


async def test_the_session_calls_start_wait_and_reject_the_approval(
    sessions: AgentSessionClient,
) -> None:
    await run_fragment(tour_block("open_session"), {"sessions": sessions})

    snapshot = await wait_idle(sessions)
    assert snapshot.messages[-1].text == "Done: order 7 shipped on Monday; Not today.."
    assert refund_results(snapshot) == ["Not today."]


async def test_the_read_calls_print_the_state_and_the_messages(
    sessions: AgentSessionClient, capsys: pytest.CaptureFixture[str]
) -> None:
    await run_fragment(tour_block("open_session"), {"sessions": sessions})
    await wait_idle(sessions)

    await run_fragment(tour_block("list_agent_messages"), {"sessions": sessions})

    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "waiting_for_user_message 3 0"
    assert lines[1] == "1 user Please refund order 8."
    assert lines[-1] == "6 assistant Done: order 7 shipped on Monday; Not today.."


async def test_cancel_turn_stops_the_turn_and_the_waiting_write_never_runs(
    sessions: AgentSessionClient,
) -> None:
    waiting = await start_turn_waiting_for_approval(sessions)
    assert waiting.state is not None
    assert waiting.state.active_turn_id is not None

    await run_fragment(tour_block("cancel_turn"), {"sessions": sessions})

    snapshot = await wait_idle(sessions)
    assert snapshot.state is not None
    assert snapshot.state.turn_count == 1
    # What the model reads for a call recorded rejected because the turn was cancelled.
    assert refund_results(snapshot) == [TURN_CANCELLED_TOOL_RESULT]


async def test_steer_user_message_starts_a_new_turn_with_its_text(
    sessions: AgentSessionClient,
) -> None:
    waiting = await start_turn_waiting_for_approval(sessions)
    (approval,) = waiting.pending_interrupts

    await run_fragment(tour_block("steer_user_message"), {"sessions": sessions})

    def next_turn_waits(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        pending = snapshot.pending_interrupts
        return snapshot if pending and pending[0].turn_id != approval.turn_id else None

    snapshot = await wait_for_agent_snapshot(
        sessions, SESSION, next_turn_waits, description="the steered turn's approval"
    )
    (steered,) = [m for m in snapshot.messages if m.text == "Refund only half, please."]
    assert steered.turn_id == snapshot.pending_interrupts[0].turn_id
    assert snapshot.pending_interrupts[0].kind is InterruptKind.APPROVAL
    assert refund_results(snapshot) == [STEERED_TOOL_RESULT]


async def test_the_dex_example_builds_everything_and_fails_cleanly_without_a_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (block,) = section_blocks("Running on Dex", "python")
    code = block.text.replace("localhost:8801", "127.0.0.1:1")
    assert code != block.text
    monkeypatch.chdir(tmp_path)  # the blob cache is made in the working directory
    namespace: dict[str, Any] = {"agent": first_agent()["agent"]}
    try:
        with pytest.raises(DexEngineError) as caught:
            await run_fragment(code, namespace)
    finally:
        if "client" in namespace:
            await namespace["client"].close()
        if "worker" in namespace:
            await namespace["worker"].close()
        if "cache" in namespace:
            namespace["cache"].close()
    assert caught.value.code == "UNAVAILABLE"
    assert caught.value.operation == "start_flow"
    assert (tmp_path / ".dex-cache").exists()
