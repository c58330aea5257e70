"""The ports: small fakes meet every protocol, statically (mypy) and with ``isinstance``.

Each ``x: Protocol = Fake()`` assignment is the static check: mypy --strict fails
the build when a fake, written from the spec's examples, no longer fits its port.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import FrozenInstanceError, dataclass, field, replace
from typing import Any

import attrs
import pytest

from dex_agents.domain.builtin_tools import BuiltInTool
from dex_agents.domain.context_summary import ContextSummaryRequest
from dex_agents.domain.errors import DexAgentsError
from dex_agents.domain.events import EventPayload
from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.interrupts import QuestionAnswer, QuestionResolution
from dex_agents.domain.listed_tools import ListedTool
from dex_agents.domain.messages import AgentMessage, FrameworkMessage, MessageRole
from dex_agents.domain.model_io import (
    ModelOutputItem,
    ModelRequest,
    ModelResponse,
    UserTextItem,
)
from dex_agents.domain.runner_outcomes import (
    AgentTurnOutcome,
    ContextSummaryResult,
    DeferredToolCall,
    DeferredToolOutcome,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskPending,
    ToolTaskPollOutcome,
    ToolTaskStarted,
    TurnCompleted,
)
from dex_agents.domain.state import InteractionMode
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from dex_agents.domain.tool_step_options import ToolCallStepOptions
from dex_agents.domain.usage import AgentUsage
from dex_agents.ports.errors import ModelSpendLimitExceededError
from dex_agents.ports.event_writer import AgentEventWriter
from dex_agents.ports.media_store import MediaStore
from dex_agents.ports.model_client import (
    ForcedToolChoiceSupport,
    ModelClient,
    ModelOutputWriter,
    model_supports_forced_tool_choice,
)
from dex_agents.ports.runner import (
    AgentFrameworkRunner,
    AgentTurnContext,
    ContextCompactionRunner,
    DeferredToolExecution,
    ImageUserMessageBuilder,
    PlanModeRunner,
    ToolCallStepOptionsProvider,
    ToolTaskCancellation,
    ToolTaskCanceller,
    ToolTaskPoll,
    ToolTaskPoller,
    UnfinishedTurnMessageBuilder,
    runner_supports_plan_mode,
)
from dex_agents.ports.spend_limit import ModelSpendCheck, ModelSpendLimit
from dex_agents.ports.tool_source import CachedToolsSource, DeclaredToolNamesSource, ToolSource

USAGE = AgentUsage(model_calls=1, input_tokens=3, output_tokens=1)


class FakeEventWriter:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def write_text_delta(self, text: str) -> None:
        self.events.append(("text_delta", text))

    def write_reasoning_delta(self, text: str) -> None:
        self.events.append(("reasoning_delta", text))

    def write_tool_call_started(self, tool_call_id: str, tool_name: str) -> None:
        self.events.append(("tool_call_started", (tool_call_id, tool_name)))

    def write_tool_call_finished(
        self, tool_call_id: str, tool_name: str, status: ToolCallStatus
    ) -> None:
        self.events.append(("tool_call_finished", (tool_call_id, tool_name, status)))

    def write_event(self, event_type: str, payload: Mapping[str, Any] | EventPayload) -> None:
        self.events.append((event_type, payload))


class Heartbeats:
    def __init__(self) -> None:
        self.count = 0
        self.checkpoints: list[str] = []

    async def heartbeat(self) -> None:
        self.count += 1

    async def save(self, text: str) -> None:
        self.checkpoints.append(text)


def record(tool_call_id: str = "call-1", **changes: Any) -> AgentToolCall:
    fields: dict[str, Any] = {
        "tool_call_id": tool_call_id,
        "tool_name": "build_report",
        "arguments": "{}",
        "turn_id": "turn-1",
        "effect": ToolEffect.IDEMPOTENT_WRITE,
        "requires_approval": False,
        "status": ToolCallStatus.SUCCEEDED,
        "deferral_order": 0,
        "output": "ok",
    }
    fields.update(changes)
    return AgentToolCall(**fields)


def turn_context(**changes: Any) -> AgentTurnContext:
    heartbeats = Heartbeats()
    fields: dict[str, Any] = {
        "flow_id": "session-42",
        "turn_id": "turn-1",
        "attempt": 1,
        "messages": (
            AgentMessage(
                sequence=1, turn_id="turn-1", role=MessageRole.USER, framework_item="{}", text="Hi"
            ),
        ),
        "events": FakeEventWriter(),
        "heartbeat": heartbeats.heartbeat,
    }
    fields.update(changes)
    return AgentTurnContext(**fields)


def execution(
    tool_call: AgentToolCall, heartbeats: Heartbeats, **changes: Any
) -> DeferredToolExecution:
    fields: dict[str, Any] = {
        "flow_id": "session-42",
        "tool_call": tool_call,
        "idempotency_key": f"session-42/{tool_call.turn_id}/{tool_call.tool_call_id}",
        "attempt": 1,
        "events": FakeEventWriter(),
        "heartbeat": heartbeats.heartbeat,
        "save_heartbeat_checkpoint": heartbeats.save,
    }
    fields.update(changes)
    return DeferredToolExecution(**fields)


# --- Runners -----------------------------------------------------------------------------


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


def test_runners_fit_the_contract_statically() -> None:
    echo: AgentFrameworkRunner[ToolExecutionResult] = EchoRunner()
    # Covariant in the tool outcome: a narrower runner is a DeferredToolOutcome runner.
    wider: AgentFrameworkRunner[DeferredToolOutcome] = echo
    full: AgentFrameworkRunner[DeferredToolOutcome] = ReportRunner(FakeReports())
    unfinished: UnfinishedTurnMessageBuilder = ReportRunner(FakeReports())
    images: ImageUserMessageBuilder = ReportRunner(FakeReports())
    options: ToolCallStepOptionsProvider = ReportRunner(FakeReports())
    poller: ToolTaskPoller = ReportRunner(FakeReports())
    canceller: ToolTaskCanceller = ReportRunner(FakeReports())
    compaction: ContextCompactionRunner = ReportRunner(FakeReports())
    plan_mode: PlanModeRunner = ReportRunner(FakeReports())
    assert all(isinstance(runner, AgentFrameworkRunner) for runner in (echo, wider, full))
    assert all(
        isinstance(runner, ReportRunner)
        for runner in (unfinished, images, options, poller, canceller, compaction, plan_mode)
    )
    assert plan_mode.supports_plan_mode is True


OPTIONAL_RUNNER_PROTOCOLS = [
    UnfinishedTurnMessageBuilder,
    ImageUserMessageBuilder,
    ToolCallStepOptionsProvider,
    ToolTaskPoller,
    ToolTaskCanceller,
    ContextCompactionRunner,
    PlanModeRunner,
]


@pytest.mark.parametrize("protocol", OPTIONAL_RUNNER_PROTOCOLS, ids=lambda p: p.__name__)
def test_the_session_can_test_for_each_optional_protocol(protocol: type[Any]) -> None:
    assert isinstance(ReportRunner(FakeReports()), protocol)
    assert not isinstance(EchoRunner(), protocol)


def test_a_runner_without_the_three_methods_is_not_a_runner() -> None:
    class NotARunner:
        def build_user_message(self, text: str) -> FrameworkMessage:
            raise NotImplementedError

    assert isinstance(EchoRunner(), AgentFrameworkRunner)
    assert not isinstance(NotARunner(), AgentFrameworkRunner)


class PlanModeOff:
    supports_plan_mode = False


@pytest.mark.parametrize(
    ("runner", "supported"),
    [(ReportRunner(FakeReports()), True), (PlanModeOff(), False), (EchoRunner(), False)],
    ids=["supports", "says-no", "no-attribute"],
)
def test_plan_mode_needs_supports_plan_mode_true(runner: object, supported: bool) -> None:
    assert runner_supports_plan_mode(runner) is supported


async def test_the_echo_runner_uses_its_turn_context() -> None:
    events = FakeEventWriter()
    beats = Heartbeats()
    turn = turn_context(events=events, heartbeat=beats.heartbeat)
    outcome = await EchoRunner().run_model_step(turn)
    assert isinstance(outcome, TurnCompleted)
    assert outcome.new_messages[0].text == "Hi"
    assert events.events == [("text_delta", "echo")]
    assert beats.count == 1


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


# --- The turn context ------------------------------------------------------------------------


POLICIES = {
    "search_tickets": ToolPolicy(ToolEffect.READ),
    "refund_order": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True),
}


@pytest.mark.parametrize(
    ("name", "framework_effect", "default", "expected"),
    [
        ("search_tickets", None, ToolEffect.UNCLASSIFIED, ToolPolicy(ToolEffect.READ)),
        (
            "search_tickets",
            ToolEffect.NON_IDEMPOTENT_WRITE,
            ToolEffect.UNCLASSIFIED,
            ToolPolicy(ToolEffect.READ),
        ),
        (
            "refund_order",
            ToolEffect.READ,
            ToolEffect.UNCLASSIFIED,
            ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True),
        ),
        ("mcp__files__read", ToolEffect.READ, ToolEffect.UNCLASSIFIED, ToolPolicy(ToolEffect.READ)),
        (
            "mcp__files__put",
            ToolEffect.IDEMPOTENT_WRITE,
            ToolEffect.READ,
            ToolPolicy(ToolEffect.IDEMPOTENT_WRITE),
        ),
        ("send_email", None, ToolEffect.UNCLASSIFIED, ToolPolicy(ToolEffect.UNCLASSIFIED)),
        ("send_email", None, ToolEffect.READ, ToolPolicy(ToolEffect.READ)),
    ],
    ids=[
        "explicit",
        "explicit-beats-framework",
        "explicit-keeps-approval",
        "framework-read",
        "framework-beats-default",
        "default-unclassified",
        "default-read",
    ],
)
def test_resolve_tool_policy_prefers_explicit_then_framework_then_default(
    name: str, framework_effect: ToolEffect | None, default: ToolEffect, expected: ToolPolicy
) -> None:
    turn = turn_context(tool_policies=POLICIES, default_tool_effect=default)
    assert turn.resolve_tool_policy(name, framework_effect) == expected
    assert turn.resolve_tool_policy(name, framework_effect=framework_effect) == expected


def test_a_turn_context_has_the_spec_defaults() -> None:
    turn = turn_context()
    assert turn.framework_run_state is None
    assert turn.is_resuming is False
    assert turn.tool_calls == {}
    assert turn.default_tool_effect is ToolEffect.UNCLASSIFIED
    assert turn.enabled_built_in_tools == frozenset()
    assert turn.interaction_mode is InteractionMode.CHAT
    assert turn.session_settings == {}
    assert turn.context_summary is None
    assert turn.plan is None


def test_a_turn_resumes_from_its_run_state_and_reads_its_records() -> None:
    finished = record("call-7")
    turn = turn_context(
        framework_run_state='{"model_calls":1}',
        tool_calls={"call-7": finished},
        enabled_built_in_tools=frozenset({BuiltInTool.ASK_USER}),
    )
    assert turn.is_resuming is True
    assert turn.recorded_tool_call("call-7") is finished
    assert "ask_user" in turn.enabled_built_in_tools
    with pytest.raises(KeyError, match="turn turn-1 has no tool call record 'call-8'"):
        turn.recorded_tool_call("call-8")


def test_the_turn_context_is_frozen() -> None:
    turn = turn_context()
    with pytest.raises(FrozenInstanceError):
        turn.attempt = 2  # type: ignore[misc]
    assert replace(turn, attempt=2).attempt == 2


def test_a_deferred_execution_reads_its_turn_and_effect_from_the_record() -> None:
    call = execution(record(effect=ToolEffect.READ, turn_id="turn-3"), Heartbeats())
    assert call.turn_id == "turn-3"
    assert call.effect is ToolEffect.READ
    assert call.heartbeat_checkpoint is None
    assert call.input_answers == ()
    assert call.context is None
    assert call.supports_tool_tasks is False


# --- Event writer and model client ---------------------------------------------------------


class EchoModelClient:
    async def call_model(self, request: ModelRequest, output: ModelOutputWriter) -> ModelResponse:
        text = f"Demo reply: {request.user_texts[-1]}"
        output.write_reasoning_delta("thinking")
        output.write_text_delta(text)
        return ModelResponse(
            output=[ModelOutputItem(item="{}", provider="demo", api="demo", text=text)],
            usage=USAGE,
        )

    def estimate_input_tokens(self, request: ModelRequest) -> int:
        return len(request.instructions) // 3


class ThinkingModelClient(EchoModelClient):
    def supports_forced_tool_choice(self, settings: Mapping[str, Any]) -> bool:
        return "thinking" not in settings


async def test_a_model_client_streams_to_the_turn_event_writer() -> None:
    client: ModelClient = EchoModelClient()
    writer: AgentEventWriter = FakeEventWriter()
    output: ModelOutputWriter = writer  # every event writer is a model output writer
    request = ModelRequest(instructions="Help.", items=(UserTextItem(text="Hi"),))
    response = await client.call_model(request, output)
    assert response.text == "Demo reply: Hi"
    assert isinstance(writer, FakeEventWriter)
    assert writer.events == [("reasoning_delta", "thinking"), ("text_delta", "Demo reply: Hi")]
    assert isinstance(client, ModelClient)
    assert isinstance(writer, AgentEventWriter)
    assert not isinstance(object(), ModelClient)


@pytest.mark.parametrize(
    ("client", "settings", "supported"),
    [
        (EchoModelClient(), {"thinking": {"type": "enabled"}}, True),
        (ThinkingModelClient(), {}, True),
        (ThinkingModelClient(), {"thinking": {"type": "enabled"}}, False),
    ],
    ids=["no-method-assumes-yes", "asks-yes", "asks-no"],
)
def test_forced_tool_choice_is_asked_only_of_clients_that_answer(
    client: object, settings: Mapping[str, Any], supported: bool
) -> None:
    assert model_supports_forced_tool_choice(client, settings) is supported
    assert isinstance(client, ForcedToolChoiceSupport) is isinstance(client, ThinkingModelClient)


# --- Tool sources, media stores, spend limits --------------------------------------------------


class FakeToolSource:
    source_name = "files"

    def __init__(self) -> None:
        self.listed = (
            ListedTool(name="files__read", description="Read a file.", effect=ToolEffect.READ),
        )

    async def list_tools(self) -> Sequence[ListedTool]:
        return self.listed

    def deferred_tool_call(
        self,
        turn: AgentTurnContext,
        *,
        tool_call_id: str,
        tool_name: str,
        arguments: str,
        listed_tool: ListedTool | None = None,
    ) -> DeferredToolCall:
        effect = listed_tool.effect if listed_tool is not None else None
        return DeferredToolCall(
            tool_call_id,
            tool_name,
            arguments,
            turn.resolve_tool_policy(tool_name, effect),
            tool_source_reference=tool_name,
        )

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        return ToolExecutionResult(f"read {call.tool_call.tool_source_reference}")

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        return ToolTaskPending(poll_interval_seconds=5)

    def declared_tool_names(self) -> Collection[str]:
        return frozenset({"files__read"})

    def cached_tools(self) -> Sequence[ListedTool]:
        return self.listed


class ListingOnlySource:
    """A source with only the five required members."""

    source_name = "tickets"

    async def list_tools(self) -> Sequence[ListedTool]:
        return ()

    def deferred_tool_call(
        self,
        turn: AgentTurnContext,
        *,
        tool_call_id: str,
        tool_name: str,
        arguments: str,
        listed_tool: ListedTool | None = None,
    ) -> DeferredToolCall:
        return DeferredToolCall(
            tool_call_id, tool_name, arguments, turn.resolve_tool_policy(tool_name)
        )

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        return ToolExecutionResult("ok")

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        return ToolExecutionResult("ok")


async def test_a_tool_source_builds_calls_with_the_turn_policies() -> None:
    source: ToolSource = FakeToolSource()
    declared: DeclaredToolNamesSource = FakeToolSource()
    cached: CachedToolsSource = FakeToolSource()
    listed = (await source.list_tools())[0]
    deferred = source.deferred_tool_call(
        turn_context(), tool_call_id="c1", tool_name=listed.name, arguments="{}", listed_tool=listed
    )
    assert deferred.policy == ToolPolicy(ToolEffect.READ)
    assert deferred.tool_source_reference == "files__read"
    assert declared.declared_tool_names() == {"files__read"}
    assert cached.cached_tools() == (listed,)
    assert isinstance(source, ToolSource)


@pytest.mark.parametrize(
    ("source", "is_declared", "is_cached"),
    [(FakeToolSource(), True, True), (ListingOnlySource(), False, False)],
    ids=["with-optional-methods", "listing-only"],
)
def test_the_optional_source_methods_are_found_with_isinstance(
    source: object, is_declared: bool, is_cached: bool
) -> None:
    listing_only: ToolSource = ListingOnlySource()
    assert isinstance(listing_only, ToolSource)
    assert isinstance(source, ToolSource)
    assert isinstance(source, DeclaredToolNamesSource) is is_declared
    assert isinstance(source, CachedToolsSource) is is_cached
    assert not isinstance(EchoRunner(), ToolSource)


class InMemoryStore:
    store_uri = "memory://tests"

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    async def put_image(self, data: bytes) -> AgentImageReference:
        digest = hashlib.sha256(data).hexdigest()
        self.objects.setdefault(digest, data)
        return AgentImageReference(
            uri=f"{self.store_uri}/sha256/{digest}",
            mime_type="image/png",
            sha256=digest,
            size_bytes=len(data),
        )

    async def get_image(self, reference: AgentImageReference) -> bytes:
        return self.objects[reference.sha256]


async def test_a_media_store_fits_its_port() -> None:
    store: MediaStore = InMemoryStore()
    reference = await store.put_image(b"\x89PNG")
    assert reference.uri.startswith(store.store_uri)
    assert await store.get_image(reference) == b"\x89PNG"
    assert isinstance(store, MediaStore)
    assert not isinstance(FakeToolSource(), MediaStore)


class BudgetSpendLimit:
    def __init__(self, budget_tokens: int) -> None:
        self.budget_tokens = budget_tokens
        self.used: dict[str, int] = {}

    async def check_model_call(self, call: ModelSpendCheck) -> None:
        account = str(call.session_settings.get("account", "default"))
        if self.used.get(account, 0) >= self.budget_tokens:
            raise ModelSpendLimitExceededError(f"account {account} reached its token budget")

    async def record_model_usage(self, call: ModelSpendCheck, usage: AgentUsage) -> None:
        account = str(call.session_settings.get("account", "default"))
        self.used[account] = self.used.get(account, 0) + usage.total_tokens


async def test_a_spend_limit_refuses_with_its_own_error() -> None:
    limit: ModelSpendLimit = BudgetSpendLimit(budget_tokens=4)
    check = ModelSpendCheck(
        flow_id="session-42",
        turn_id="turn-1",
        step_type="RunModel",
        step_execution_id="RunModel-3",
        attempt=1,
        session_settings={"account": "acme"},
    )
    await limit.check_model_call(check)
    await limit.record_model_usage(check, USAGE)
    with pytest.raises(
        ModelSpendLimitExceededError, match=r"^account acme reached its token budget$"
    ):
        await limit.check_model_call(check)
    assert isinstance(limit, ModelSpendLimit)
    assert issubclass(ModelSpendLimitExceededError, DexAgentsError)
    assert (
        ModelSpendCheck(
            flow_id="f", turn_id="t", step_type="CompactContext", step_execution_id="s", attempt=1
        ).session_settings
        == {}
    )
