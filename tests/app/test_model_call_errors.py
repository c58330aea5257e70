"""``ModelCallError.retryable``: a model call no retry can fix fails the turn at once.

``RunModel`` lets its retry policy repeat a retryable failure (a 429, a dropped
stream); a non-retryable one (a bad request, a refused key) ends the turn with
the error's text in ``last_turn_error`` after one call, spending no attempts.
A retryable one whose provider asked for a wait (``retry_after``) is retried
after that wait instead of the policy's interval, or fails the turn at once
when the wait would end past the policy's total duration. The messages the
failed turn stored (its tool calls and results, the failure note) are numbered
before the next turn's.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from dex_agents import AgentSessionFlow
from dex_agents.builtin_loop import (
    AgentDefinition,
    ModelOutputWriter,
    ModelRequest,
    ModelResponse,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    builtin_agent_session_flow,
    function_tool,
)
from dex_agents.domain.attention import last_turn_cancelled
from dex_agents.domain.model_io import ModelOutputItem
from dex_agents.domain.tool_effects import ToolEffect
from dex_agents.domain.usage import AgentUsage
from dex_agents.local import LocalRuntime
from dex_agents.ports.errors import ModelCallError
from dex_agents.ports.flow_rows import ExecutionRow, ExecutionStatus
from dex_agents.ports.flow_store import StoreTransaction
from tests.support.retry_intervals import retrying_runtime

TURN = timedelta(seconds=20)


class FailingModel:
    """Fails its first ``failures`` calls with ``ModelCallError(retryable=...)``, then answers."""

    def __init__(
        self, *, retryable: bool, failures: int, retry_after: timedelta | None = None
    ) -> None:
        self.retryable = retryable
        self.failures = failures
        self.retry_after = retry_after
        self.calls = 0

    async def call_model(self, request: ModelRequest, output: ModelOutputWriter) -> ModelResponse:
        self.calls += 1
        if self.calls <= self.failures:
            error = ModelCallError("provider said: the context is too long")
            error.retryable = self.retryable
            error.retry_after = self.retry_after
            raise error
        item = ModelOutputItem(item="{}", provider="test", api="test", text="answered")
        return ModelResponse(output=[item], usage=AgentUsage(model_calls=1))

    def estimate_input_tokens(self, request: ModelRequest) -> int:
        return 0


def model_flow(model: FailingModel) -> AgentSessionFlow:
    agent = AgentDefinition(name="errors", instructions="Answer.", model=model)
    return builtin_agent_session_flow(agent, flow_type="ModelErrorAgent")


async def run_turn(model: FailingModel) -> str | None:
    flow = model_flow(model)
    async with retrying_runtime(None, [flow]) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("s-1")
        assert await sessions.send_user_message("s-1", "hello")
        done = await sessions.wait_for_user("s-1", timeout=TURN)
        assert done.state is not None
        return done.state.last_turn_error


async def test_a_call_no_retry_can_fix_fails_the_turn_after_one_call() -> None:
    model = FailingModel(retryable=False, failures=99)
    assert await run_turn(model) == "provider said: the context is too long"
    assert model.calls == 1


@function_tool(effect=ToolEffect.READ)
async def lookup_order(order_id: str) -> str:
    """Look up an order by its ID."""
    return f"order {order_id} delivered"


def fail_after_the_lookup(request: ModelRequest) -> ScriptedModelReply:
    """Turn "first" looks an order up, then fails no retry can fix; other turns answer."""
    text = ScriptedModelClient.user_texts(request)[-1]
    if text != "first":
        return ScriptedModelReply(text=f"answer to {text}")
    if request.tool_results:
        error = ModelCallError("provider said: no")
        error.retryable = False
        raise error
    call = ScriptedToolCall("lookup_order", {"order_id": "7"}, call_id="c1")
    return ScriptedModelReply(tool_calls=[call])


async def test_a_failed_turn_s_stored_messages_are_numbered_before_the_next_turn_s() -> None:
    # RecordTurnFailure stores the turn's unfinished messages and the failure note in
    # the commit that ends the turn; the next turn's message is numbered after them.
    model = ScriptedModelClient(fail_after_the_lookup)
    agent = AgentDefinition(
        name="errors", instructions="Answer.", model=model, tools=[lookup_order]
    )
    flow = builtin_agent_session_flow(agent, flow_type="ModelErrorAgent")
    async with retrying_runtime(None, [flow]) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("s-1")
        assert await sessions.send_user_message("s-1", "first")
        failed = await sessions.wait_for_user("s-1", timeout=TURN)
        assert failed.state is not None
        assert failed.state.last_turn_error == "provider said: no"
        assert await sessions.send_user_message("s-1", "second")
        done = await sessions.wait_for_user("s-1", timeout=TURN)
    assert done.state is not None
    assert done.state.last_turn_error is None
    assert [(m.sequence, m.role.value) for m in done.messages] == [
        (1, "user"),
        (2, "assistant"),
        (3, "tool"),
        (4, "user"),  # the failure note
        (5, "user"),
        (6, "assistant"),
    ]
    assert done.messages[3].text is not None
    assert done.messages[3].text.startswith("[Dex] The previous turn failed")
    assert [m.text for m in done.messages[4:]] == ["second", "answer to second"]
    assert done.state.last_sequence == 6


async def test_a_retryable_failure_is_retried_by_run_models_policy() -> None:
    model = FailingModel(retryable=True, failures=1)
    assert await run_turn(model) is None
    assert model.calls == 2


async def test_a_wait_past_the_retry_budget_fails_the_turn_after_one_call() -> None:
    # RunModel's policy allows 30 minutes; retrying at once would be refused again.
    model = FailingModel(retryable=True, failures=99, retry_after=timedelta(hours=1))
    assert await run_turn(model) == "provider said: the context is too long"
    assert model.calls == 1


async def test_a_wait_longer_than_any_date_fails_the_turn_after_one_call() -> None:
    # A broken Retry-After (some 300 billion seconds) fits a timedelta, not a datetime.
    model = FailingModel(retryable=True, failures=99, retry_after=timedelta(days=999_999_000))
    assert await run_turn(model) == "provider said: the context is too long"
    assert model.calls == 1


async def test_a_wait_the_provider_asked_for_replaces_the_retry_interval() -> None:
    model = FailingModel(retryable=True, failures=99, retry_after=timedelta(minutes=10))
    flow = model_flow(model)
    async with LocalRuntime(None, [flow], poll_interval=timedelta(milliseconds=20)) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("s-1")
        assert await sessions.send_user_message("s-1", "hello")
        engine = runtime.flow_client.engine

        def run_model(tx: StoreTransaction) -> list[ExecutionRow]:
            return [r for r in tx.flow_executions("s-1") if r.step_type == "RunModel"]

        async with asyncio.timeout(TURN.total_seconds()):
            while not any(r.attempt == 2 for r in await engine.run(run_model)):  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        (retry,) = await engine.run(run_model)
        assert retry.status is ExecutionStatus.READY
        assert retry.not_before is not None
        # The policy's own interval before attempt 2 is 1 second.
        assert retry.not_before - engine.now() > timedelta(minutes=9)
        assert model.calls == 1
        # The user need not sit out the wait: cancelling the turn ends it now.
        snapshot = await sessions.get_agent_snapshot("s-1")
        assert snapshot.state is not None
        assert snapshot.state.active_turn_id is not None
        assert await sessions.cancel_turn("s-1", snapshot.state.active_turn_id)
        done = await sessions.wait_for_user("s-1", timeout=TURN)
        assert done.state is not None
        assert last_turn_cancelled(done.state)
        assert model.calls == 1


class SecondsModel(FailingModel):
    """Sets ``retry_after`` to a number of seconds, as a client's author might."""

    async def call_model(self, request: ModelRequest, output: ModelOutputWriter) -> ModelResponse:
        self.calls += 1
        error = ModelCallError("provider said: slow down")
        error.retry_after = 30  # type: ignore[assignment]
        raise error


class RateLimitedError(ModelCallError):
    retry_after = 30  # type: ignore[assignment]


class ClassAttributeModel(FailingModel):
    """Raises an error whose class gives ``retry_after`` as a number of seconds."""

    async def call_model(self, request: ModelRequest, output: ModelOutputWriter) -> ModelResponse:
        self.calls += 1
        raise RateLimitedError("provider said: slow down")


async def test_a_wait_that_is_no_timedelta_is_refused_by_name() -> None:
    # Read as it was, the turn failed with "'>' not supported between instances
    # of 'int' and 'datetime.timedelta'", without the provider's error.
    for model, kind in (
        (SecondsModel(retryable=True, failures=0), "ModelCallError"),
        (ClassAttributeModel(retryable=True, failures=0), "RateLimitedError"),
    ):
        assert await run_turn(model) == (
            f"{kind}.retry_after must be a datetime.timedelta or None, not int; "
            "the model call failed with: provider said: slow down"
        )
