"""Runner fakes written from the spec's examples: an echo runner and the "Tool tasks" one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from dex_agents.domain.context_summary import ContextSummaryRequest
from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.interrupts import QuestionResolution
from dex_agents.domain.messages import FrameworkMessage, MessageRole
from dex_agents.domain.runner_outcomes import (
    AgentTurnOutcome,
    ContextSummaryResult,
    DeferredToolOutcome,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskPending,
    ToolTaskPollOutcome,
    ToolTaskStarted,
    TurnCompleted,
)
from dex_agents.domain.tool_calls import AgentToolCall
from dex_agents.domain.tool_step_options import ToolCallStepOptions
from dex_agents.ports.runner import (
    AgentTurnContext,
    DeferredToolExecution,
    ToolTaskCancellation,
    ToolTaskPoll,
)
from tests.ports.turn_fakes import USAGE


class ChatMethods:
    """``build_user_message`` and ``run_model_step`` of a runner that echoes the user."""

    def build_user_message(self, text: str) -> FrameworkMessage:
        return FrameworkMessage(role=MessageRole.USER, framework_item=text, text=text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        turn.events.write_text_delta("echo")
        await turn.heartbeat()
        answer = FrameworkMessage(
            role=MessageRole.ASSISTANT, framework_item="{}", text=turn.messages[-1].text
        )
        return TurnCompleted([answer], USAGE)


class EchoRunner(ChatMethods):
    """The smallest runner: a bare ``AgentFrameworkRunner[ToolExecutionResult]``."""

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        return ToolExecutionResult(f"ran {call.tool_call.tool_name}")


@dataclass
class Job:
    id: str
    done: bool = False
    summary: str = ""
    question_id: str | None = None
    question: str = ""
    choices: tuple[str, ...] = ()


@dataclass
class FakeReports:
    jobs: dict[str, Job] = field(default_factory=dict)
    started_with: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)

    async def start(self, key: str) -> str:
        self.started_with.append(key)
        job = Job(id=f"job-{len(self.jobs) + 1}")
        self.jobs[job.id] = job
        return job.id

    async def get(self, job_id: str) -> Job:
        return self.jobs[job_id]

    async def answer(self, job_id: str, question_id: str, answer: str | None) -> Job:
        job = self.jobs[job_id]
        job.question_id = None
        job.done = True
        job.summary = f"report for {answer}"
        return job

    async def skip(self, job_id: str, question_id: str) -> Job:
        job = self.jobs[job_id]
        job.question_id = None
        return job

    async def cancel(self, job_id: str) -> None:
        self.cancelled.append(job_id)


class ReportRunner(ChatMethods):
    """The spec's "Tool tasks" example runner, with every optional protocol."""

    supports_plan_mode = True

    def __init__(self, reports: FakeReports) -> None:
        self.reports = reports

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        saved = call.heartbeat_checkpoint
        if saved is not None:
            return ToolTaskStarted(task_id=saved, poll_interval_seconds=5)
        job_id = await self.reports.start(call.idempotency_key)
        await call.save_heartbeat_checkpoint(job_id)
        return ToolTaskStarted(task_id=job_id, poll_interval_seconds=5)

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        assert poll.tool_call.task_id is not None
        job = await self.reports.get(poll.tool_call.task_id)
        answered = poll.tool_call.input_continuation
        resolved = poll.pending_answer
        if resolved is not None and answered is not None and job.question_id == answered:
            if resolved.resolution is QuestionResolution.ANSWERED:
                job = await self.reports.answer(job.id, answered, resolved.answer)
            else:
                job = await self.reports.skip(job.id, answered)
        if job.question_id is not None and job.question_id != answered:
            return ToolInputRequested(
                question=job.question, choices=job.choices, continuation=job.question_id
            )
        if not job.done:
            kept = answered if job.question_id == answered else None
            return ToolTaskPending(poll_interval_seconds=10, continuation=kept)
        return ToolExecutionResult(output=job.summary)

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        assert cancellation.tool_call.task_id is not None
        await self.reports.cancel(cancellation.tool_call.task_id)

    def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        return [
            FrameworkMessage(
                role=MessageRole.TOOL, framework_item="{}", tool_call_id=call.tool_call_id
            )
            for call in turn.tool_calls.values()
        ]

    def build_user_message_with_images(
        self, text: str, images: Sequence[AgentImageReference]
    ) -> FrameworkMessage:
        return FrameworkMessage(
            role=MessageRole.USER, framework_item=text, text=text, images=tuple(images)
        )

    def tool_call_step_options(self, call: AgentToolCall) -> ToolCallStepOptions | None:
        return None

    def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        return sum(len(message.framework_item) for message in turn.messages)

    def select_compaction_cutoff(
        self, turn: AgentTurnContext, retained_token_budget: int
    ) -> int | None:
        return None

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        return ContextSummaryResult(text=f"{len(request.messages)} messages", usage=USAGE)
