"""The runner ports: fakes meet ``AgentFrameworkRunner`` and each optional runner protocol.

The ``x: Protocol = Fake()`` assignments are the static check: mypy --strict fails
the build when a fake, written from the spec's examples, no longer fits its port.
"""

from __future__ import annotations

from typing import Any

import pytest

from dex_agents.domain.messages import FrameworkMessage
from dex_agents.domain.runner_outcomes import (
    DeferredToolOutcome,
    ToolExecutionResult,
    TurnCompleted,
)
from dex_agents.ports.runner import (
    AgentFrameworkRunner,
    ContextCompactionRunner,
    ImageUserMessageBuilder,
    PlanModeRunner,
    ToolCallStepOptionsProvider,
    ToolTaskCanceller,
    ToolTaskPoller,
    UnfinishedTurnMessageBuilder,
    runner_supports_plan_mode,
)
from tests.ports.runner_fakes import EchoRunner, FakeReports, ReportRunner
from tests.ports.turn_fakes import FakeEventWriter, Heartbeats, turn_context


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
