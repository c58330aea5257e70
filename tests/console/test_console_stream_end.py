"""The end of a session's event stream: every event the session wrote is sent before it."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from datetime import timedelta
from pathlib import Path

from dex_agents.console.streams import until_session_ends
from dex_agents.local import LocalRuntime
from dex_agents.ui_stream import stream_agent_event_frames
from tests.console.agents import echo_flow

POLL = timedelta(milliseconds=20)


def _event_types(frames: list[str]) -> list[str]:
    return [json.loads(f.split("data: ", 1)[1])["type"] for f in frames if f.startswith("id: ")]


async def test_a_turn_written_between_the_last_empty_poll_and_the_end_is_sent(
    tmp_path: Path,
) -> None:
    # The stream looks at the session's status after a poll that saw no event. A turn that
    # ran between that poll and the look, the session stopped right after it, was never
    # sent: the stream ended at the look, and the page, told so, opens no other stream.
    flow = echo_flow()
    async with LocalRuntime(tmp_path / "s.sqlite3", [flow], workers=1) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.start_session("s", "message 1")
        await sessions.wait_for_user("s")

        async def frames_after(token: str) -> AsyncGenerator[str, None]:
            return await stream_agent_event_frames(
                runtime.flow_client, flow, "s", resume_token=token, poll_timeout=POLL
            )

        async def status_after_a_last_turn() -> str:
            # Where a commit elsewhere can come: after the empty poll, before the look.
            if await sessions.send_user_message("s", "message 2"):
                await sessions.wait_for_user("s")
                await runtime.flow_client.stop_flow("s", "stopped elsewhere")
            return (await runtime.flow_client.describe_flow("s")).status

        sent = [
            frame
            async for frame in until_session_ends(
                await frames_after(""), status_after_a_last_turn, frames_after
            )
        ]
        assert sent[-1] == 'event: session_ended\ndata: {"status": "stopped"}\n\n'
        assert _event_types(sent).count("turn_started") == 2
