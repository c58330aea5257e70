"""The tool task values: the spec's "Tool tasks" example runs on the contract values."""

from __future__ import annotations

import attrs

from dex_agents.domain.interrupts import QuestionAnswer, QuestionResolution
from dex_agents.domain.runner_outcomes import (
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskPending,
    ToolTaskStarted,
)
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.ports.runner import ToolTaskCancellation, ToolTaskPoll
from tests.ports.runner_fakes import FakeReports, ReportRunner
from tests.ports.turn_fakes import FakeEventWriter, Heartbeats, execution, record


async def test_the_spec_tool_task_example_runs_on_the_contract_values() -> None:
    reports = FakeReports()
    runner = ReportRunner(reports)
    beats = Heartbeats()
    first = await runner.execute_deferred_tool_call(execution(record(), beats))
    assert first == ToolTaskStarted(task_id="job-1", poll_interval_seconds=5)
    assert beats.checkpoints == ["job-1"]
    assert reports.started_with == ["session-42/turn-1/call-1"]

    # A retried attempt reads the checkpoint and starts nothing.
    retried = await runner.execute_deferred_tool_call(
        execution(record(), beats, attempt=2, heartbeat_checkpoint="job-1")
    )
    assert retried == first
    assert reports.started_with == ["session-42/turn-1/call-1"]

    waiting = record(status=ToolCallStatus.WAITING_FOR_TASK, task_id="job-1", output=None)
    job = reports.jobs["job-1"]
    job.question_id, job.question, job.choices = "q-1", "Which account?", ("ops", "billing")

    def poll(tool_call: AgentToolCall, answer: QuestionAnswer | None = None) -> ToolTaskPoll:
        return ToolTaskPoll(
            flow_id="session-42",
            tool_call=tool_call,
            idempotency_key="session-42/turn-1/call-1",
            attempt=1,
            events=FakeEventWriter(),
            heartbeat=beats.heartbeat,
            pending_answer=answer,
        )

    asked = await runner.poll_tool_task(poll(waiting))
    assert asked == ToolInputRequested(
        question="Which account?", choices=("ops", "billing"), continuation="q-1"
    )
    answered = attrs.evolve(waiting, input_continuation="q-1")
    done = await runner.poll_tool_task(
        poll(answered, QuestionAnswer(resolution=QuestionResolution.ANSWERED, answer="ops"))
    )
    assert done == ToolExecutionResult("report for ops")

    await runner.cancel_tool_task(
        ToolTaskCancellation(flow_id="session-42", tool_call=waiting, attempt=1)
    )
    assert reports.cancelled == ["job-1"]


async def test_a_declined_task_question_keeps_polling_without_the_continuation() -> None:
    reports = FakeReports()
    runner = ReportRunner(reports)
    job_id = await reports.start("key")
    reports.jobs[job_id].question_id = "q-1"
    waiting = record(
        status=ToolCallStatus.WAITING_FOR_TASK, task_id=job_id, input_continuation="q-1"
    )
    outcome = await runner.poll_tool_task(
        ToolTaskPoll(
            flow_id="session-42",
            tool_call=waiting,
            idempotency_key="session-42/turn-1/call-1",
            attempt=1,
            events=FakeEventWriter(),
            heartbeat=Heartbeats().heartbeat,
            pending_answer=QuestionAnswer(resolution=QuestionResolution.DECLINED),
        )
    )
    assert outcome == ToolTaskPending(poll_interval_seconds=10, continuation=None)
