"""Two Worker processes SIGKILLed at random moments while sessions run tool turns.

A seeded ``random.Random`` paces the messages and picks when to kill which
Worker; each killed Worker is replaced at once, so two serve the database most
of the time. Once the killing stops, every invariant must hold:

- no message lost: every message ``send_user_message`` acknowledged is stored
  exactly once, in the order it was sent;
- no non-idempotent write twice: ``charge`` (non-idempotent) and ``poke``
  (unclassified) start at most once per call, and a call recorded
  ``succeeded`` did its effect exactly once;
- retried calls keep their key: every attempt of a ``lookup`` or ``upsert``
  call carries the same idempotency key, numbered 1, 2, ...;
- no session stuck: every session is idle within a deadline.

``DEX_AGENTS_SOAK=1`` runs more seeds, sessions, messages and kills.
"""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from pathlib import Path

import pytest

from dex_agents import AgentSessionClient
from dex_agents.domain.tool_calls import ToolCallStatus
from dex_agents.testing import AgentTestStack, InvocationLog
from tests.reliability.chaos_agent import (
    SINGLE_ATTEMPT_TOOLS,
    STATE_DIR_ENV,
    build_chaos_flow,
    invocation_log,
)
from tests.reliability.harness import (
    REPO_ROOT,
    Stopwatch,
    finished_tool_calls,
    lost_and_duplicated,
    record_figures,
    soak,
    stored_messages,
    user_texts,
    wait_idle,
)

SEEDS = [20261201 + n for n in range(soak(1, 6))]
SESSIONS = soak(4, 8)
MESSAGES_PER_SESSION = soak(3, 6)
KILLING_SECONDS = soak(8, 40)


async def send_messages(
    sessions: AgentSessionClient, rng: random.Random, acknowledged: dict[str, list[str]]
) -> None:
    """Send every session its messages in rounds, in a random order, at random moments."""
    for number in range(MESSAGES_PER_SESSION):
        for session in rng.sample(sorted(acknowledged), len(acknowledged)):
            text = f"{session} message {number}"
            if await sessions.send_user_message(session, text):
                acknowledged[session].append(text)
            await asyncio.sleep(rng.uniform(0.05, 0.6))  # pacing, not a wait for a condition


async def kill_workers(
    stack: AgentTestStack, rng: random.Random, sending: asyncio.Task[None]
) -> int:
    """SIGKILL a random Worker at random moments and replace it; return how many were killed."""
    loop = asyncio.get_running_loop()
    stop_at = loop.time() + KILLING_SECONDS
    alive = [stack.workers[-2], stack.workers[-1]]
    kills = 0
    while loop.time() < stop_at or not sending.done():
        await asyncio.sleep(rng.uniform(0.3, 1.8))  # the next kill's moment, chosen by the seed
        victim = rng.randrange(len(alive))
        alive[victim].kill()
        kills += 1
        alive[victim] = await stack.start_worker()
    return kills


def check_writes(log: InvocationLog, finished: dict[str, dict[str, ToolCallStatus]]) -> int:
    """Check the invariants on tool calls; return how many writes ran more than once."""
    calls: dict[tuple[str, str], list[int]] = defaultdict(list)
    effects: dict[tuple[str, str], int] = defaultdict(int)
    for entry in log.entries():
        kind, tool, key, *attempt = entry.name.split()
        if kind == "call":
            calls[tool, key].append(int(attempt[0].removeprefix("attempt=")))
        else:
            effects[tool, key] += 1
    duplicated = 0
    for (tool, key), attempts in calls.items():
        if tool in SINGLE_ATTEMPT_TOOLS:
            duplicated += len(attempts) - 1
            assert attempts == [1], f"{tool} {key} started {len(attempts)} times"
            assert effects[tool, key] <= 1
        else:
            # Each attempt once, in order. Not always from 1: a kill between an attempt's
            # start mark (the heartbeat before the tool runs) and the tool's first line
            # leaves that attempt started but unlogged, and the next one runs the tool.
            assert attempts == sorted(set(attempts)), f"{tool} {key}: {attempts}"
    for session, statuses in finished.items():
        for tool_call_id, status in statuses.items():
            done = {
                tool: count
                for (tool, key), count in effects.items()
                if key.startswith(f"{session}/") and key.endswith(f"/{tool_call_id}")
            }
            if status is ToolCallStatus.SUCCEEDED:
                assert len(done) == 1, f"{session} {tool_call_id} succeeded without its effect"
                ((tool, count),) = done.items()
                assert count == 1 or tool not in SINGLE_ATTEMPT_TOOLS, (session, tool_call_id)
    return duplicated


@pytest.mark.parametrize("seed", SEEDS)
async def test_random_kills_of_two_workers_lose_nothing_and_repeat_no_write(
    tmp_path: Path, seed: int
) -> None:
    clock = Stopwatch()
    rng = random.Random(seed)
    flow = build_chaos_flow()
    log = invocation_log(tmp_path)
    acknowledged: dict[str, list[str]] = {f"s-{n}": [] for n in range(SESSIONS)}
    async with AgentTestStack(
        tmp_path,
        [flow],
        "tests.reliability.chaos_worker",
        worker_cwd=REPO_ROOT,
        worker_env={STATE_DIR_ENV: str(tmp_path)},
    ) as stack:
        sessions = stack.sessions(flow)
        for _ in range(2):
            await stack.start_worker()
        for session in acknowledged:
            await sessions.open_session(session)
        sending = asyncio.create_task(send_messages(sessions, rng, acknowledged))
        kills = await kill_workers(stack, rng, sending)
        await sending
        try:
            for session in acknowledged:
                await wait_idle(sessions, session)
        except TimeoutError as error:
            pytest.fail(f"seed {seed}: {error}\n{stack.worker_logs()}")
        stored = {
            session: user_texts(await stored_messages(sessions, session))
            for session in acknowledged
        }
        finished = {
            session: await finished_tool_calls(stack.client, sessions, session)
            for session in acknowledged
        }

    lost = duplicated = 0
    for session, texts in acknowledged.items():
        assert stored[session] == texts, f"seed {seed}: {session}"
        session_lost, session_duplicated = lost_and_duplicated(texts, stored[session])
        lost, duplicated = lost + session_lost, duplicated + session_duplicated
    writes_duplicated = check_writes(log, finished)
    sent = sum(len(texts) for texts in acknowledged.values())
    assert sent == SESSIONS * MESSAGES_PER_SESSION
    assert kills >= 1
    record_figures(
        "random_kills",
        seed=seed,
        kills=kills,
        sessions=SESSIONS,
        messages=sent,
        tool_calls=sum(len(statuses) for statuses in finished.values()),
        outcome_unknown=sum(
            status is ToolCallStatus.OUTCOME_UNKNOWN
            for statuses in finished.values()
            for status in statuses.values()
        ),
        messages_lost=lost,
        messages_duplicated=duplicated,
        writes_duplicated=writes_duplicated,
        seconds=clock.seconds(),
    )
