"""A bare ``AgentFrameworkRunner`` is ``AgentFrameworkRunner[ToolExecutionResult]``.

The annotations here are the test: ``mypy --strict`` (run over ``tests`` by ci.sh)
refuses a bare generic without a type parameter default ("Missing type
parameters"), and the ``type: ignore[assignment]`` below becomes an unused ignore,
also an error, unless the default is exactly ``ToolExecutionResult``.
"""

from __future__ import annotations

import typing

from dex_agents.domain.messages import FrameworkMessage, MessageRole
from dex_agents.domain.runner_outcomes import (
    AgentTurnOutcome,
    DeferredToolOutcome,
    ToolExecutionResult,
    ToolInputRequested,
    TurnCompleted,
)
from dex_agents.domain.usage import AgentUsage
from dex_agents.ports import runner as runner_port
from dex_agents.ports.runner import AgentFrameworkRunner, AgentTurnContext, DeferredToolExecution


class _Chat:
    def build_user_message(self, text: str) -> FrameworkMessage:
        return FrameworkMessage(role=MessageRole.USER, framework_item=text, text=text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        return TurnCompleted([], AgentUsage())


class PlainRunner(_Chat):
    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        return ToolExecutionResult(output="ran")


class AskingRunner(_Chat):
    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        return ToolInputRequested(question="Which account?")


def test_a_bare_runner_annotation_means_tool_execution_result() -> None:
    bare: AgentFrameworkRunner = PlainRunner()
    spelled_out: AgentFrameworkRunner[ToolExecutionResult] = bare
    back: AgentFrameworkRunner = spelled_out
    # A runner whose tools may ask is wider than the default, so it is not a bare runner.
    asking: AgentFrameworkRunner = AskingRunner()  # type: ignore[assignment]
    wide: AgentFrameworkRunner[DeferredToolOutcome] = bare
    assert all(isinstance(r, AgentFrameworkRunner) for r in (bare, spelled_out, back, asking, wide))


def test_the_runtime_type_variable_is_the_standard_one() -> None:
    # typing_extensions is imported only while type checking.
    assert type(runner_port.ToolOutcomeT_co) is typing.TypeVar
    assert runner_port.ToolOutcomeT_co.__covariant__
    assert typing.get_args(AgentFrameworkRunner[ToolExecutionResult]) == (ToolExecutionResult,)
    assert "typing_extensions" not in vars(runner_port)
