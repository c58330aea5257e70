"""Plan mode on the embedded engine: planning turns, ``execute_plan`` and the executing turn."""

from __future__ import annotations

from pathlib import Path

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.app.options import AgentSessionOptions
from dex_agents.domain.builtin_tools import BuiltInTool
from dex_agents.domain.events import PlanExecutionStartedPayload, PlanUpdatedPayload
from dex_agents.domain.plans import AgentTodo, PlanStatus, TodoStatus
from dex_agents.domain.state import InteractionMode
from dex_agents.ports.flow_store import FlowStore
from dex_agents.ports.session_schema import PENDING_PLAN_EXECUTION
from tests.app.harness import echo, session_stack
from tests.app.scripted_runner import ScriptedRunner

PLAN_MODE = AgentSessionOptions(
    plan_mode_enabled=True, built_in_tools=frozenset({BuiltInTool.WRITE_TODOS})
)


def plan_call(*tasks: str) -> str:
    todos = ", ".join(f'{{"content": "{task}", "status": "pending"}}' for task in tasks)
    return f'call write_todos {{"todos": [{todos}]}}'


class PlanRunner(ScriptedRunner):
    """The scripted runner as a ``PlanModeRunner``."""

    @property
    def supports_plan_mode(self) -> bool:
        return True


async def test_an_approved_draft_starts_an_executing_turn(store: FlowStore) -> None:
    runner = PlanRunner()
    async with session_stack(store, runner, PLAN_MODE) as session:
        await session.sessions.start_session("s1", plan_call("back up", "migrate"), plan_mode=True)
        snapshot = await session.idle()
        assert snapshot.plan is not None
        assert (snapshot.plan.revision, snapshot.plan.status) == (1, PlanStatus.DRAFT)
        assert snapshot.plan.todos == (
            AgentTodo(content="back up", status=TodoStatus.PENDING),
            AgentTodo(content="migrate", status=TodoStatus.PENDING),
        )
        assert snapshot.messages[-1].text == (
            'write_todos={"status":"updated","revision":1,"task_count":2}'
        )
        assert runner.model_calls[0].interaction_mode is InteractionMode.PLANNING
        assert await session.sessions.execute_plan("s1", 2) is False
        assert await session.sessions.execute_plan("s1", 1) is True
        snapshot = await session.idle(turns=2)
        user = next(m.text for m in snapshot.messages if m.turn_id == "turn-2")
        assert user == (
            "[Dex] The user approved plan revision 1. Execute it and keep the task statuses "
            "current with write_todos."
        )
        assert snapshot.plan is not None
        assert (snapshot.plan.revision, snapshot.plan.status) == (1, PlanStatus.ACTIVE)
        assert snapshot.state is not None
        assert snapshot.state.interaction_mode is InteractionMode.EXECUTING
        assert runner.model_calls[-1].interaction_mode is InteractionMode.EXECUTING
        assert await session.client.read_attribute("s1", PENDING_PLAN_EXECUTION) is None
        events = [event for event in await session.events() if event.turn_id == "turn-2"]
        assert [event.type for event in events][:3] == [
            "plan_updated",
            "plan_execution_started",
            "turn_started",
        ]
        assert events[0].payload == PlanUpdatedPayload(
            revision=1, status=PlanStatus.ACTIVE, task_count=2
        )
        assert events[1].payload == PlanExecutionStartedPayload(revision=1)


async def test_an_approval_of_a_replaced_revision_is_refused(store: FlowStore) -> None:
    runner = PlanRunner()
    async with session_stack(store, runner, PLAN_MODE) as session:
        await session.sessions.start_session("s1", plan_call("one"), plan_mode=True)
        await session.idle()
        # Any message while a draft exists is feedback: a planning turn that revises it.
        assert await session.sessions.send_user_message("s1", plan_call("one", "two"))
        snapshot = await session.idle(turns=2)
        assert runner.model_calls[-1].interaction_mode is InteractionMode.PLANNING
        assert snapshot.plan is not None
        assert (snapshot.plan.revision, snapshot.plan.status) == (2, PlanStatus.DRAFT)
        assert await session.sessions.execute_plan("s1", 1) is False
        assert await session.sessions.execute_plan("s1", 2) is True
        snapshot = await session.idle(turns=3)
        assert snapshot.messages[-2].text == (
            "[Dex] The user approved plan revision 2. Execute it and keep the task statuses "
            "current with write_todos."
        )


async def test_plan_mode_messages_are_refused_when_plan_mode_is_off(store: FlowStore) -> None:
    runner = ScriptedRunner(tools={"refund": echo})
    async with session_stack(store, runner) as session:
        await session.sessions.start_session("s1", "call refund {}")
        await session.until("a pending approval", lambda s: next(iter(s.pending_interrupts), None))
        assert await session.sessions.send_user_message("s1", "plan", plan_mode=True) is False
        assert not await session.sessions.steer_user_message("s1", text="plan", plan_mode=True)
        assert await session.sessions.execute_plan("s1", 1) is False  # no plan
        snapshot = await session.sessions.get_agent_snapshot("s1")
        assert snapshot.queued_messages == ()
        assert snapshot.steered_messages == ()


async def test_a_steered_plan_mode_message_starts_a_planning_turn(store: FlowStore) -> None:
    runner = PlanRunner(tools={"refund": echo})
    async with session_stack(store, runner, PLAN_MODE) as session:
        await session.sessions.start_session("s1", "call refund {}")
        await session.until("a pending approval", lambda s: next(iter(s.pending_interrupts), None))
        assert runner.model_calls[0].interaction_mode is InteractionMode.CHAT
        assert await session.sessions.steer_user_message(
            "s1", text=plan_call("check"), plan_mode=True
        )
        snapshot = await session.idle(turns=2)
        assert [
            call.interaction_mode for call in runner.model_calls if call.turn_id == "turn-2"
        ] == [
            InteractionMode.PLANNING,
            InteractionMode.PLANNING,
        ]
        assert snapshot.plan is not None
        assert (snapshot.plan.revision, snapshot.plan.status) == (1, PlanStatus.DRAFT)


async def test_a_draft_left_when_plan_mode_is_turned_off_starts_a_chat_turn(
    tmp_path: Path,
) -> None:
    # A planning turn in a Flow without plan mode is offered no tool at all and
    # rejects every call, so each message would be wasted until the user approved.
    database = tmp_path / "sessions.sqlite3"
    async with session_stack(SqliteFlowStore(database), PlanRunner(), PLAN_MODE) as session:
        await session.sessions.start_session("s1", plan_call("one"), plan_mode=True)
        snapshot = await session.idle()
        assert snapshot.plan is not None
        assert snapshot.plan.status is PlanStatus.DRAFT
    runner = ScriptedRunner()
    async with session_stack(SqliteFlowStore(database), runner) as session:
        assert await session.sessions.send_user_message("s1", "hello")
        snapshot = await session.idle(turns=2)
        assert [call.interaction_mode for call in runner.model_calls] == [InteractionMode.CHAT]
        assert snapshot.state is not None
        assert snapshot.state.interaction_mode is InteractionMode.CHAT
