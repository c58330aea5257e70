"""An MCP image upload, a task poll and a task cancellation, each cut by a Worker SIGKILL
before its commit.

The gated Worker child (``tests.adapters.mcp.gated_worker``) stops once an
image of a ``picture`` result is stored, once a poll has read its task
completed, and once ``tasks/cancel`` is sent, each before its Step commits. The test kills it there and starts
another. The promise: a crash repeats only the one call that ran, so the read
``picture`` is called again and stores the same object once more (the store is
keyed by SHA-256), the task's poll runs again while ``build_report`` is never
sent again, and a task cancellation killed once sent is sent again, for the
same task, and recorded once. A task's question answered while no Worker runs
is delivered once by the next one. A poll killed once it sent an answer
(``tasks/update``) is retried as attempt 2, which never sends it: a task that took
the answer ends the call with it, one that still lists the request gets the
question asked again (the spec's "the user may answer twice"). A call killed
once the server returned its task resumes that task from its checkpoint and never
sends ``tools/call`` again. A put killed
between its temporary file and the rename leaves no image under its name, and
the next store's first put sweeps that file once it is old.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from dex_agents import AgentSessionClient
from dex_agents.adapters.media.local_temporaries import STALE_TEMPORARY_AGE
from dex_agents.domain.events import ToolCallFinishedPayload
from dex_agents.domain.messages import MessageRole
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.state import AgentStatus
from dex_agents.domain.tool_calls import ToolCallStatus
from dex_agents.testing import (
    RETRY_INTERVAL_SCALE_ENV,
    AgentTestStack,
    Invocation,
    wait_for_agent_snapshot,
    wait_until,
)
from tests.adapters.mcp.conftest import CallLog
from tests.adapters.mcp.gated_worker import (
    STATE_DIR_ENV,
    build_gated_flows,
    gate,
    invocation_log,
    media_root,
)
from tests.adapters.mcp.http_server import ROOT, HttpTestServer
from tests.adapters.mcp.mcp_test_server import (
    answer_held_file,
    answer_taken_file,
    release_file,
)
from tests.adapters.mcp.session_support import SESSION
from tests.adapters.mcp.task_support import waiting_for_task
from tests.adapters.mcp.task_worker import REPORT_NAME, URL_ENV
from tests.support.retry_intervals import RETRY_INTERVAL_SCALE
from tests.support.session_events import session_events


@dataclass
class Gated:
    """The stack of the gated Worker children, and a client of each agent."""

    stack: AgentTestStack
    pictures: AgentSessionClient
    tasks: AgentSessionClient
    accounts: AgentSessionClient
    state_dir: Path


@pytest.fixture
async def gated(tmp_path: Path, http_test_server: HttpTestServer) -> AsyncIterator[Gated]:
    flows = build_gated_flows(http_test_server.url, tmp_path)
    async with AgentTestStack(
        tmp_path,
        flows,
        "tests.adapters.mcp.gated_worker",
        worker_cwd=ROOT,
        worker_env={
            URL_ENV: http_test_server.url,
            STATE_DIR_ENV: str(tmp_path),
            RETRY_INTERVAL_SCALE_ENV: str(RETRY_INTERVAL_SCALE),
        },
    ) as stack:
        pictures, tasks, accounts = (stack.sessions(flow) for flow in flows)
        yield Gated(stack, pictures, tasks, accounts, tmp_path)


async def answered(gated: Gated, sessions: AgentSessionClient) -> AgentSnapshot:
    """The snapshot once the first turn ended with the model's answer."""

    def done(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        state = snapshot.state
        idle = state is not None and state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
        return snapshot if idle and state is not None and state.turn_count == 1 else None

    try:
        return await wait_for_agent_snapshot(sessions, SESSION, done, description="the answer")
    except TimeoutError as error:
        pytest.fail(f"{error}\n{gated.stack.worker_logs()}")


async def finished(sessions: AgentSessionClient) -> list[ToolCallStatus]:
    events = await session_events(sessions.flow_client, sessions.flow, SESSION)
    return [e.payload.status for e in events if isinstance(e.payload, ToolCallFinishedPayload)]


async def test_an_image_stored_before_a_kill_is_stored_once_more_as_one_object(
    gated: Gated, call_log: CallLog
) -> None:
    gate(gated.state_dir, "put-renaming").release()  # this test kills no Worker there
    first = await gated.stack.start_worker()
    await gated.pictures.start_session(SESSION, "show me")
    stored = gate(gated.state_dir, "put-stored")
    assert await stored.wait_until_reached() == first.pid
    first.kill()
    stored.release()
    second = await gated.stack.start_worker()
    snapshot = await answered(gated, gated.pictures)

    (put_1, put_2) = invocation_log(gated.state_dir).entries()
    assert (put_1.pid, put_2.pid) == (first.pid, second.pid)
    assert put_1.name == put_2.name
    sha256 = put_1.name.split()[1]
    # A read runs again after a kill: two calls, one object, no file left half-written.
    assert len(call_log.calls("picture")) == 2
    objects = media_root(gated.state_dir) / "sha256"
    assert sorted(p.name for p in objects.iterdir()) == [sha256]
    assert await finished(gated.pictures) == [ToolCallStatus.SUCCEEDED]
    (result,) = [m for m in snapshot.messages if m.role is MessageRole.TOOL]
    assert [image.sha256 for image in result.images] == [sha256]


async def test_a_put_killed_before_its_rename_shows_no_image_and_its_temporary_is_swept(
    gated: Gated, call_log: CallLog
) -> None:
    gate(gated.state_dir, "put-stored").release()  # only the stop before the rename
    first = await gated.stack.start_worker()
    await gated.pictures.start_session(SESSION, "show me")
    renaming = gate(gated.state_dir, "put-renaming")
    assert await renaming.wait_until_reached() == first.pid
    first.kill()

    objects = media_root(gated.state_dir) / "sha256"
    # Written and synced, not renamed: no file under the image's name, half or whole.
    (temporary,) = objects.iterdir()
    _, sha256, _, _ = temporary.name.split(".")
    assert temporary.name == f".{sha256}.{temporary.name.split('.')[2]}.tmp"
    # A sweep takes a killed put's file once it is STALE_TEMPORARY_AGE old: age it so.
    stale = time.time() - STALE_TEMPORARY_AGE.total_seconds() - 60
    os.utime(temporary, (stale, stale))
    renaming.release()
    second = await gated.stack.start_worker()
    snapshot = await answered(gated, gated.pictures)

    # The killed put never returned; the read ran again and stored the image once.
    assert invocation_log(gated.state_dir).entries() == [Invocation(second.pid, f"put {sha256}")]
    assert len(call_log.calls("picture")) == 2
    # The new store's first put swept the file the killed one left (its lock died with it).
    assert sorted(p.name for p in objects.iterdir()) == [sha256]
    assert await finished(gated.pictures) == [ToolCallStatus.SUCCEEDED]
    (result,) = [m for m in snapshot.messages if m.role is MessageRole.TOOL]
    assert [image.sha256 for image in result.images] == [sha256]


async def test_a_poll_killed_after_it_read_its_task_completed_polls_again_and_never_resends(
    gated: Gated, call_log: CallLog
) -> None:
    log = invocation_log(gated.state_dir)
    gate(gated.state_dir, "task-started").release()  # this test kills no Worker there
    first = await gated.stack.start_worker()
    await gated.tasks.start_session(SESSION, "go")

    def polls() -> list[Invocation]:
        return [e for e in log.entries() if e.name.startswith("poll")]

    await wait_until("a first poll", lambda: polls() or None)
    release_file(call_log.path, REPORT_NAME).touch()  # the next poll reads it completed
    completed = gate(gated.state_dir, "poll-completed")
    assert await completed.wait_until_reached() == first.pid
    first.kill()
    completed.release()
    second = await gated.stack.start_worker()
    snapshot = await answered(gated, gated.tasks)

    *before, retried = polls()
    assert {p.pid for p in before} == {first.pid}
    # The killed poll runs again on the new Worker (as the same attempt: it sent no heartbeat).
    assert retried.pid == second.pid
    events = await session_events(gated.tasks.flow_client, gated.tasks.flow, SESSION)
    # What the killed poll read never committed: one status change, one result.
    statuses = [e.payload for e in events if e.type == "mcp.task_status"]
    assert [p["status"] for p in statuses if isinstance(p, Mapping)] == ["completed"]
    assert len(call_log.calls("build_report")) == 1  # polls only read the task
    assert await finished(gated.tasks) == [ToolCallStatus.SUCCEEDED]
    assert snapshot.messages[-1].text == f"report {REPORT_NAME} ready"


async def test_a_call_killed_once_its_task_started_resumes_the_task_and_never_calls_again(
    gated: Gated, call_log: CallLog
) -> None:
    gate(gated.state_dir, "poll-completed").release()  # only the stop once the task started
    first = await gated.stack.start_worker()
    await gated.tasks.start_session(SESSION, "go")
    started = gate(gated.state_dir, "task-started")
    assert await started.wait_until_reached() == first.pid
    first.kill()
    started.release()
    release_file(call_log.path, REPORT_NAME).touch()  # the task completes meanwhile
    second = await gated.stack.start_worker()
    snapshot = await answered(gated, gated.tasks)

    calls = [e for e in invocation_log(gated.state_dir).entries() if e.name.startswith("call")]
    # The retry reads the task's ID from the checkpoint the killed attempt saved.
    assert calls == [
        Invocation(first.pid, "call attempt=1"),
        Invocation(second.pid, "call attempt=2"),
    ]
    assert len(call_log.calls("build_report")) == 1  # tools/call sent once
    events = await session_events(gated.tasks.flow_client, gated.tasks.flow, SESSION)
    assert [e.type for e in events].count("tool_task_started") == 1
    assert await finished(gated.tasks) == [ToolCallStatus.SUCCEEDED]
    assert snapshot.messages[-1].text == f"report {REPORT_NAME} ready"


async def test_a_task_cancellation_killed_once_sent_is_sent_again_and_recorded_once(
    gated: Gated, call_log: CallLog
) -> None:
    log = invocation_log(gated.state_dir)
    gate(gated.state_dir, "task-started").release()  # this test kills no Worker there
    first = await gated.stack.start_worker()
    await gated.tasks.start_session(SESSION, "go")
    call = await waiting_for_task(gated.tasks)
    assert await gated.tasks.cancel_turn(SESSION, call.turn_id)
    sent = gate(gated.state_dir, "cancel-sent")
    assert await sent.wait_until_reached() == first.pid
    first.kill()
    sent.release()
    second = await gated.stack.start_worker()
    snapshot = await answered(gated, gated.tasks)

    cancels = [e for e in log.entries() if e.name.startswith("cancel")]
    assert [e.pid for e in cancels] == [first.pid, second.pid]
    # Idempotent by task ID: sent again after the kill, for the same task.
    assert [row["arguments"] for row in call_log.calls("tasks/cancel")] == [
        {"taskId": call.task_id}
    ] * 2
    assert len(call_log.calls("build_report")) == 1
    assert await finished(gated.tasks) == [ToolCallStatus.OUTCOME_UNKNOWN]
    assert snapshot.state is not None
    assert snapshot.state.cancelled_turn_id == call.turn_id


async def test_a_task_s_question_answered_while_no_worker_runs_is_delivered_once(
    gated: Gated, call_log: CallLog
) -> None:
    gate(gated.state_dir, "answer-sent").release()  # this test kills no Worker there
    first = await gated.stack.start_worker()
    await gated.accounts.start_session(SESSION, "go")
    asked = await wait_for_agent_snapshot(
        gated.accounts,
        SESSION,
        lambda snapshot: next(iter(snapshot.pending_interrupts), None),
        description="the task's question",
    )
    first.kill()
    assert await gated.accounts.answer_question(SESSION, asked.interrupt_id, "savings")
    await gated.stack.start_worker()
    snapshot = await answered(gated, gated.accounts)

    answer = {"action": "accept", "content": {"account": "savings"}}
    assert [row["arguments"]["account"] for row in call_log.calls("tasks/update")] == [answer]
    assert len(call_log.calls("choose_account")) == 1
    assert await finished(gated.accounts) == [ToolCallStatus.SUCCEEDED]
    assert snapshot.messages[-1].text == f"using {answer}"


async def asked(gated: Gated, count: int) -> str:
    """The interrupt ID of the account task's ``count``-th question, once it is pending."""

    def found(snapshot: AgentSnapshot) -> str | None:
        pending = [i.interrupt_id for i in snapshot.pending_interrupts]
        return pending[0] if pending and pending[0].endswith(f"-input-{count}") else None

    try:
        return await wait_for_agent_snapshot(
            gated.accounts, SESSION, found, description=f"question {count}"
        )
    except TimeoutError as error:
        pytest.fail(f"{error}\n{gated.stack.worker_logs()}")


async def test_a_poll_killed_once_it_sent_an_answer_the_task_took_never_sends_it_again(
    gated: Gated, call_log: CallLog
) -> None:
    first = await gated.stack.start_worker()
    await gated.accounts.start_session(SESSION, "go")
    assert await gated.accounts.answer_question(SESSION, await asked(gated, 1), "savings")
    sent = gate(gated.state_dir, "answer-sent")
    assert await sent.wait_until_reached() == first.pid
    first.kill()
    answer_taken_file(call_log.path).touch()  # the task took the answer in before the retry
    sent.release()
    await gated.stack.start_worker()
    snapshot = await answered(gated, gated.accounts)

    # The retry (attempt 2: the killed poll had heartbeated) reads the task completed.
    answer = {"action": "accept", "content": {"account": "savings"}}
    assert [row["arguments"]["account"] for row in call_log.calls("tasks/update")] == [answer]
    assert len(call_log.calls("choose_account")) == 1
    assert await finished(gated.accounts) == [ToolCallStatus.SUCCEEDED]
    assert snapshot.messages[-1].text == f"using {answer}"
    events = await session_events(gated.accounts.flow_client, gated.accounts.flow, SESSION)
    assert [e.type for e in events].count("interrupt_raised") == 1  # never asked again


async def test_a_poll_killed_once_it_sent_an_answer_still_listed_asks_again_and_ends_once(
    gated: Gated, call_log: CallLog
) -> None:
    first = await gated.stack.start_worker()
    await gated.accounts.start_session(SESSION, "go")
    assert await gated.accounts.answer_question(SESSION, await asked(gated, 1), "savings")
    sent = gate(gated.state_dir, "answer-sent")
    assert await sent.wait_until_reached() == first.pid
    answer_held_file(call_log.path).touch()  # the task lists the answered request still
    first.kill()
    sent.release()
    await gated.stack.start_worker()
    # A retry cannot tell whether the killed attempt sent the answer: it asks again.
    assert await gated.accounts.answer_question(SESSION, await asked(gated, 2), "checking")
    await wait_until("the second answer sent", lambda: len(call_log.calls("tasks/update")) == 2)
    answer_held_file(call_log.path).unlink()
    answer_taken_file(call_log.path).touch()
    snapshot = await answered(gated, gated.accounts)

    answers = [row["arguments"]["account"] for row in call_log.calls("tasks/update")]
    first_answer = {"action": "accept", "content": {"account": "savings"}}
    assert answers == [first_answer, {"action": "accept", "content": {"account": "checking"}}]
    assert len(call_log.calls("choose_account")) == 1
    assert await finished(gated.accounts) == [ToolCallStatus.SUCCEEDED]
    # The task took the answer the killed poll sent; the call ends once, with it.
    assert snapshot.messages[-1].text == f"using {first_answer}"
