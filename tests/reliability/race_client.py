"""A client process of the RPC races: ``python -m tests.reliability.race_client <request.json>``.

It opens the race test's database as a client only (``LocalRuntime(path,
flows, workers=0, create=False)``), writes its ``ready`` file, waits for the
``go`` file, makes its RPC calls (one after another, or all at once with
``"concurrent": true``), and writes one result per call to ``out`` as JSON:
``{"rpc", "session", "result", "error", "started_ns", "ended_ns"}``, with
``result`` the call's return value, or ``null`` and ``error`` naming what it
raised. The times are ``time.monotonic_ns()``, one clock for every process of
the machine. A call's ``delay`` (seconds) holds it back after ``go``, so
different sessions race at different offsets.

The request is ``{"database", "ready", "go", "out", "concurrent", "calls"}``;
each call names its ``rpc`` (``send_user_message``, ``resolve_interrupt``,
``answer_question`` or ``cancel_turn``), its ``session`` and its arguments.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from dex_agents import AgentSessionClient
from dex_agents.local import LocalRuntime
from dex_agents.testing import wait_until
from tests.reliability.race_agent import build_race_flow

GO_TIMEOUT_SECONDS = 120.0


async def call_rpc(sessions: AgentSessionClient, call: dict[str, Any]) -> dict[str, Any]:
    """Make one call; its result or its error, and when it ran."""
    rpc, session = call["rpc"], call["session"]
    if call.get("delay"):
        await asyncio.sleep(call["delay"])  # a chosen offset into the race
    started = time.monotonic_ns()
    result: object = None
    error: str | None = None
    try:
        if rpc == "send_user_message":
            result = await sessions.send_user_message(session, call["text"])
        elif rpc == "resolve_interrupt":
            result = await sessions.resolve_interrupt(
                session, call["interrupt_id"], call["approved"], call.get("rejection_message")
            )
        elif rpc == "answer_question":
            result = await sessions.answer_question(session, call["interrupt_id"], call["answer"])
        elif rpc == "cancel_turn":
            result = await sessions.cancel_turn(session, call["turn_id"])
        else:
            raise ValueError(f"unknown rpc {rpc!r}")
    except Exception as raised:
        error = f"{type(raised).__name__}: {raised}"
    ended = time.monotonic_ns()
    return {
        **{k: call[k] for k in ("rpc", "session", "text") if k in call},
        "result": result,
        "error": error,
        "started_ns": started,
        "ended_ns": ended,
    }


async def race(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Open the database, say ready, wait for go, make the calls; return their results."""
    flow = build_race_flow()
    async with LocalRuntime(request["database"], [flow], workers=0, create=False) as runtime:
        sessions = runtime.sessions(flow)
        await runtime.flow_client.list_flows()  # the database is open and readable
        await asyncio.to_thread(Path(request["ready"]).write_text, "ready", encoding="utf-8")
        go = Path(request["go"])
        await wait_until("the go file", go.exists, GO_TIMEOUT_SECONDS)
        calls = request["calls"]
        if request.get("concurrent"):
            results = list(await asyncio.gather(*(call_rpc(sessions, c) for c in calls)))
        else:
            results = [await call_rpc(sessions, call) for call in calls]
    return results


def main(request_path: str) -> None:
    request = json.loads(Path(request_path).read_text(encoding="utf-8"))
    results = asyncio.run(race(request))
    Path(request["out"]).write_text(json.dumps(results), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1])
