"""What a session whose stored state is damaged ends as, and what it keeps.

A value of the session damaged in the file (bytes that are no UTF-8) makes each
attempt of the Step that loads it fail with ``UnreadableStateError``, under its
retry policy. ``AwaitUserMessage`` has no failure route, so the session fails,
saying which value could not be read and never the damaged text, and the
worker goes on serving the other sessions. The user's message the Step's wait
took was never read with the session's state, so it is handed back to its
Channel, not deleted with the failed execution (until 2026-12-07 it was lost).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from dex_agents.cli.main import main
from dex_agents.local import LocalRuntime
from dex_agents.ports.errors import FlowNotActiveError
from dex_agents.ports.flow_rows import FlowStatus
from tests.reliability.conftest import reliability_flow
from tests.support.flow_runs import channel_texts, wait_for_status
from tests.support.retry_intervals import retrying_runtime

WAIT = timedelta(seconds=30)
DAMAGED_TEXT = b"\xffsecret-ish"


def _damage_state(path: Path, session: str) -> None:
    with contextlib.closing(sqlite3.connect(path)) as raw, raw:
        raw.execute(
            "UPDATE attribute_values SET value = CAST(? AS TEXT)"
            " WHERE flow_id = ? AND name = 'AgentState'",
            (DAMAGED_TEXT, session),
        )


async def test_a_session_whose_state_is_damaged_fails_saying_why_and_keeps_the_message(
    tmp_path: Path,
) -> None:
    path, flow = tmp_path / "sessions.sqlite3", reliability_flow()
    async with LocalRuntime(path, [flow], poll_interval=timedelta(milliseconds=20)) as runtime:
        sessions = runtime.sessions(flow)
        for session in ("damaged", "whole"):
            await sessions.open_session(session)
            await sessions.wait_for_user(session, timeout=WAIT)
    _damage_state(path, "damaged")
    # A client of its own sends it, so that the worker's claim takes it, as in an app.
    async with LocalRuntime(path, [flow], workers=0) as client:
        assert await client.sessions(flow).send_user_message("damaged", "my words")
    async with retrying_runtime(path, [flow]) as runtime:
        sessions = runtime.sessions(flow)
        await wait_for_status(runtime.flow_client, "damaged", FlowStatus.FAILED)
        # The worker serves the other sessions meanwhile.
        assert await sessions.send_user_message("whole", "hello")
        done = await sessions.wait_for_user("whole", timeout=WAIT)
        assert done.messages[-1].text == "echo: hello"
        info = await runtime.flow_client.describe_flow("damaged")
        # A message sent now is refused saying why the session ended, not only that it did.
        with pytest.raises(FlowNotActiveError) as refused:
            await sessions.send_user_message("damaged", "more words")
        # Before, a wait for it raised the damaged file's error, which said neither.
        with pytest.raises(FlowNotActiveError) as waited:
            await sessions.wait_for_user("damaged", timeout=WAIT)
    reason = info.failure_reason
    assert reason is not None
    assert str(refused.value) == f"session 'damaged' is failed: {reason}"
    assert str(waited.value) == str(refused.value)
    assert "UnreadableStateError" in reason
    assert "Attribute 'AgentState'" in reason
    assert "Flow run 'damaged'" in reason
    assert "secret-ish" not in reason
    # Before, the failed AwaitUserMessage deleted the message its wait took with itself.
    (queued,) = channel_texts(path, "damaged", "QueuedUserMessages")
    assert "my words" in queued


async def test_show_says_why_a_session_whose_state_is_damaged_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, flow = tmp_path / "sessions.sqlite3", reliability_flow()
    async with LocalRuntime(path, [flow], poll_interval=timedelta(milliseconds=20)) as runtime:
        await runtime.sessions(flow).open_session("damaged")
        await runtime.sessions(flow).wait_for_user("damaged", timeout=WAIT)
    _damage_state(path, "damaged")
    async with retrying_runtime(path, [flow]) as runtime:
        assert await runtime.sessions(flow).send_user_message("damaged", "my words")
        await wait_for_status(runtime.flow_client, "damaged", FlowStatus.FAILED)

    code = await asyncio.to_thread(main, ["show", "damaged", "--db", str(path)])

    out, err = capsys.readouterr()
    # Before, show said only that the file is damaged, not that the session had failed.
    assert (code, out) == (1, "")
    assert err.startswith("dex-agents: error: session 'damaged' failed: Step AwaitUserMessage-")
    assert "UnreadableStateError" in err
    assert "Attribute 'AgentState'" in err
    assert "secret-ish" not in err

    code = await asyncio.to_thread(main, ["sessions", "--db", str(path)])

    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    (row,) = [line for line in out.splitlines() if line.startswith("damaged ")]
    # Before, the listing said only 'failed'; the cause, cut short, now follows it.
    assert "  failed: UnreadableStateError: the state of AwaitUserMessage in Fl...  " in row
