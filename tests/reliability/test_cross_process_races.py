"""RPCs racing from several client processes on one database file.

Each racer is a process of its own (``tests.reliability.race_client``): it
opens the file as a client only, waits for a shared ``go`` file, and makes its
calls, so the calls race through SQLite's locks as separate programs' would.
The Worker runs in this process, on the same file.

- Several racers resolve the same approval: exactly one call returns ``True``,
  and the write runs once if that one approved it, never otherwise.
- Several racers send message storms to one session: every acknowledged message
  is stored exactly once, and each sender's messages in the order it sent them.
- ``answer_question`` and ``resolve_interrupt`` race ``cancel_turn``: an
  acknowledged answer is what the call records; an approved write runs at most
  once, and the record says whether it ran.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dex_agents import AgentSessionClient, BuiltInTool
from dex_agents.domain.builtin_tools import ask_user_answer_output
from dex_agents.domain.interrupts import AgentInterrupt
from dex_agents.domain.messages import MessageRole
from dex_agents.domain.tool_calls import ToolCallStatus
from dex_agents.local import LocalRuntime
from dex_agents.testing import InvocationLog
from tests.reliability.harness import (
    Stopwatch,
    finished_tool_calls,
    lost_and_duplicated,
    record_figures,
    soak,
    stored_messages,
    user_texts,
    wait_idle,
)
from tests.reliability.race_agent import build_race_flow
from tests.reliability.racers import Racers

FAST = timedelta(milliseconds=20)
TURN = timedelta(seconds=60)
RACERS = 3
# The Worker notices another process's commit within its poll interval: in the cancel races
# it looks every half second, so an answer stays unconsumed that long, and the sessions'
# cancel_turn calls start at even steps over 1.2 s. The first cancels race the answers, the
# middle ones land after an answer but before the Worker took it, the last ones after.
RACE_POLL = timedelta(milliseconds=500)
CANCEL_SPREAD_SECONDS = 1.2


@pytest.fixture
def racers(tmp_path: Path) -> Racers:
    directory = tmp_path / "racers"
    directory.mkdir()
    return Racers(directory, tmp_path / "db.sqlite3")


async def pending(sessions: AgentSessionClient, session: str, text: str) -> AgentInterrupt:
    """Start ``session`` with ``text`` and return the interrupt its turn waits at."""
    await sessions.open_session(session)
    assert await sessions.send_user_message(session, text)
    waiting = await sessions.wait_for_user(session, timeout=TURN)
    (interrupt,) = waiting.pending_interrupts
    return interrupt


async def pending_all(
    sessions: AgentSessionClient, ids: list[str], verb: str
) -> dict[str, AgentInterrupt]:
    """Start every session of ``ids`` with ``<verb> <session>``; the interrupt each one waits at."""
    found = await asyncio.gather(*(pending(sessions, s, f"{verb} {s}") for s in ids))
    return dict(zip(ids, found, strict=True))


def resolution_plan(
    rpc: str,
    interrupts: dict[str, AgentInterrupt],
    arguments: dict[str, Any] | Callable[[str], dict[str, Any]],
) -> dict[str, Any]:
    """``rpc`` on every session's interrupt at once, with ``arguments`` (or
    ``arguments(session)``) besides its ID."""
    of = arguments if callable(arguments) else lambda _: arguments
    return {
        "concurrent": True,
        "calls": [
            {
                "rpc": rpc,
                "session": session,
                "interrupt_id": interrupt.interrupt_id,
                **of(session),
            }
            for session, interrupt in interrupts.items()
        ],
    }


def tool_output(messages: list[Any], tool_name: str) -> str:
    (output,) = [
        m.tool_output for m in messages if m.role is MessageRole.TOOL and m.tool_name == tool_name
    ]
    assert isinstance(output, str)
    return output


async def test_racing_resolutions_of_one_approval_let_exactly_one_win(racers: Racers) -> None:
    clock = Stopwatch()
    log = InvocationLog(racers.directory / "invocations.log")
    flow = build_race_flow(log)
    count = soak(3, 12)
    ids = [f"approval-{n}" for n in range(count)]
    async with LocalRuntime(racers.database, [flow], poll_interval=FAST) as runtime:
        sessions = runtime.sessions(flow)
        interrupts = await pending_all(sessions, ids, "refund")
        plans = [
            resolution_plan(
                "resolve_interrupt",
                interrupts,
                {"approved": racer % 2 == 0, "rejection_message": f"no, says racer {racer}"},
            )
            for racer in range(RACERS)
        ]
        results = await racers.race(plans)
        messages = {}
        for session in ids:
            await wait_idle(sessions, session)
            messages[session] = await stored_messages(sessions, session)

    refunds = Counter(entry.name for entry in log.entries())
    for session in ids:
        calls = [
            (racer, r)
            for racer, plan in enumerate(results)
            for r in plan
            if r["session"] == session
        ]
        winners = [racer for racer, r in calls if r["result"] is True]
        assert len(winners) == 1, (session, calls)
        assert all(r["result"] is False for racer, r in calls if racer != winners[0])
        approved = winners[0] % 2 == 0
        assert refunds[f"refund {session}"] == (1 if approved else 0), session
        output = tool_output(messages[session], "refund")
        expected = f"refunded {session}" if approved else f"no, says racer {winners[0]}"
        assert expected in output, (session, output)
    record_figures(
        "racing_resolutions",
        approvals=count,
        racers=RACERS,
        calls=RACERS * count,
        writes_duplicated=sum(max(n - 1, 0) for n in refunds.values()),
        seconds=clock.seconds(),
    )


async def test_message_storms_from_several_processes_store_every_acknowledged_message_once(
    racers: Racers,
) -> None:
    clock = Stopwatch()
    flow = build_race_flow()
    senders, per_sender = 3, soak(15, 150)
    async with LocalRuntime(racers.database, [flow], poll_interval=FAST) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("storm")
        plans = [
            {
                "concurrent": False,
                "calls": [
                    {
                        "rpc": "send_user_message",
                        "session": "storm",
                        "text": f"sender {s} message {n:03d}",
                    }
                    for n in range(per_sender)
                ],
            }
            for s in range(senders)
        ]
        results = await racers.race(plans)
        await wait_idle(sessions, "storm")
        stored = user_texts(await stored_messages(sessions, "storm"))

    calls = [r for plan in results for r in plan]
    acknowledged = [r["text"] for r in calls if r["result"] is True]
    refused = [r["text"] for r in calls if r["result"] is not True]
    lost, duplicated = lost_and_duplicated(acknowledged, stored)
    assert (lost, duplicated) == (0, 0)
    assert not set(refused) & set(stored), "a refused message was stored"
    for sender in range(senders):
        mine = [text for text in stored if text.startswith(f"sender {sender} ")]
        assert mine == [r["text"] for r in results[sender] if r["result"] is True]
    record_figures(
        "message_storms",
        senders=senders,
        messages_sent=len(calls),
        acknowledged=len(acknowledged),
        messages_lost=lost,
        messages_duplicated=duplicated,
        seconds=clock.seconds(),
    )


def cancel_plan(
    ids: list[str], interrupts: dict[str, AgentInterrupt], step_seconds: float
) -> dict[str, Any]:
    """``cancel_turn`` of every session's turn, each a little later than the one before."""
    return {
        "concurrent": True,
        "calls": [
            {
                "rpc": "cancel_turn",
                "session": session,
                "turn_id": interrupts[session].turn_id,
                "delay": number * step_seconds,
            }
            for number, session in enumerate(ids)
        ],
    }


async def test_an_acknowledged_answer_racing_cancel_turn_is_what_the_call_records(
    racers: Racers,
) -> None:
    """An answer that ``answer_question`` acknowledged is the call's result, even when
    ``cancel_turn`` commits before the waiting Step took it.

    Before 07192e0 the call recorded ``rejected`` (``turn_cancelled``) in that window;
    this test failed on 800eedc three runs out of three.
    """
    clock = Stopwatch()
    flow = build_race_flow()
    count = soak(8, 32)
    ids = [f"question-{n}" for n in range(count)]
    async with LocalRuntime(racers.database, [flow], poll_interval=RACE_POLL) as runtime:
        sessions = runtime.sessions(flow)
        interrupts = await pending_all(sessions, ids, "ask")
        answers = resolution_plan(
            "answer_question", interrupts, lambda s: {"answer": f"savings of {s}"}
        )
        answered, cancelled = await racers.race(
            [answers, cancel_plan(ids, interrupts, CANCEL_SPREAD_SECONDS / count)]
        )
        outputs = {}
        for session in ids:
            await wait_idle(sessions, session)
            outputs[session] = tool_output(
                await stored_messages(sessions, session), BuiltInTool.ASK_USER
            )

    kept = sum(a["result"] is True for a in answered)
    both = sum(
        a["result"] is True and c["result"] is True
        for a, c in zip(answered, cancelled, strict=True)
    )
    for answer, cancel in zip(answered, cancelled, strict=True):
        session = answer["session"]
        if answer["result"] is True:
            # Accepted, the answer committed before the cancellation: the cancel came later.
            assert outputs[session] == ask_user_answer_output(f"savings of {session}"), (
                session,
                answer,
                cancel,
                outputs[session],
            )
        else:
            assert json.loads(outputs[session]).get("status") == "cancelled", outputs[session]
    record_figures(
        "answer_vs_cancel",
        races=count,
        answers_kept=kept,
        both_acknowledged=both,
        seconds=clock.seconds(),
    )


async def test_an_approval_racing_cancel_turn_runs_the_write_at_most_once_and_says_so(
    racers: Racers,
) -> None:
    clock = Stopwatch()
    log = InvocationLog(racers.directory / "invocations.log")
    flow = build_race_flow(log)
    count = soak(8, 32)
    ids = [f"approval-{n}" for n in range(count)]
    async with LocalRuntime(racers.database, [flow], poll_interval=RACE_POLL) as runtime:
        sessions = runtime.sessions(flow)
        interrupts = await pending_all(sessions, ids, "refund")
        approvals = resolution_plan("resolve_interrupt", interrupts, {"approved": True})
        approved, cancelled = await racers.race(
            [approvals, cancel_plan(ids, interrupts, CANCEL_SPREAD_SECONDS / count)]
        )
        outcomes = {}
        for session in ids:
            await wait_idle(sessions, session)
            finished = await finished_tool_calls(runtime.flow_client, sessions, session)
            ((_, status),) = finished.items()
            output = tool_output(await stored_messages(sessions, session), "refund")
            outcomes[session] = (status, output)

    refunds = Counter(entry.name for entry in log.entries())
    ran = 0
    for approval in approved:
        session = approval["session"]
        status, output = outcomes[session]
        runs = refunds[f"refund {session}"]
        assert runs <= 1, session
        if runs:
            # The tool ran: the record says it succeeded, whatever the cancellation said.
            assert approval["result"] is True
            assert (status, output) == (ToolCallStatus.SUCCEEDED, f"refunded {session}")
            ran += 1
        else:
            assert status is ToolCallStatus.REJECTED, (session, status, output)
    record_figures(
        "approval_vs_cancel",
        races=count,
        writes_run=ran,
        both_acknowledged=sum(
            a["result"] is True and c["result"] is True
            for a, c in zip(approved, cancelled, strict=True)
        ),
        writes_duplicated=sum(max(n - 1, 0) for n in refunds.values()),
        seconds=clock.seconds(),
    )
