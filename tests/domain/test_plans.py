"""Plans and plan mode: write_todos revisions, the planning-turn rules, approvals and the plan note."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.domain.builtin_tools import BuiltInTool
from dex_agents.domain.messages import AgentUserMessage, QueuedUserMessage
from dex_agents.domain.plans import (
    PLANNING_TURN_REJECTION,
    WRITE_TODOS_CALLED_TWICE_ERROR,
    AgentPlan,
    AgentTodo,
    PlanExecutionRequest,
    PlanStatus,
    TodoStatus,
    accepts_plan_execution,
    apply_write_todos,
    awaited_plan_execution_key,
    build_plan_note,
    executing_turn_user_message,
    is_current_plan_approval,
    is_rejected_in_planning_turn,
    mark_plan_approved,
    new_turn_interaction_mode,
    plan_execution_key,
    write_todos_called_more_than_once,
    write_todos_output,
)
from dex_agents.domain.state import AgentState, AgentStatus, InteractionMode

PENDING = AgentTodo(content="Back up the database", status=TodoStatus.PENDING)
WORKING = AgentTodo(content="Migrate the users table", status=TodoStatus.IN_PROGRESS)
DONE = AgentTodo(content="Verify row counts", status=TodoStatus.COMPLETED)

CHAT = InteractionMode.CHAT
PLANNING = InteractionMode.PLANNING
EXECUTING = InteractionMode.EXECUTING


def _plan(
    status: PlanStatus, revision: int = 3, todos: tuple[AgentTodo, ...] = (PENDING,)
) -> AgentPlan:
    return AgentPlan(revision=revision, status=status, todos=todos, turn_id="turn-1")


def test_texts() -> None:
    assert WRITE_TODOS_CALLED_TWICE_ERROR == "write_todos was called more than once in one response"
    assert PLANNING_TURN_REJECTION == (
        "The tool call was not run: a planning turn can only call write_todos."
    )


@pytest.mark.parametrize(
    ("revision", "message"),
    [
        (
            1,
            "[Dex] The user approved plan revision 1. Execute it and keep the task statuses "
            "current with write_todos.",
        ),
        (
            42,
            "[Dex] The user approved plan revision 42. Execute it and keep the task statuses "
            "current with write_todos.",
        ),
    ],
)
def test_executing_turn_user_message(revision: int, message: str) -> None:
    assert executing_turn_user_message(revision) == message


# --- write_todos ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("todos", "mode", "status"),
    [
        ((), CHAT, PlanStatus.CLEARED),
        ((), PLANNING, PlanStatus.CLEARED),
        ((), EXECUTING, PlanStatus.CLEARED),
        ((PENDING,), PLANNING, PlanStatus.DRAFT),
        ((DONE,), PLANNING, PlanStatus.DRAFT),
        ((DONE, DONE), CHAT, PlanStatus.COMPLETED),
        ((DONE,), EXECUTING, PlanStatus.COMPLETED),
        ((PENDING, DONE), EXECUTING, PlanStatus.ACTIVE),
        ((WORKING,), CHAT, PlanStatus.ACTIVE),
        ((PENDING,), CHAT, PlanStatus.ACTIVE),
    ],
)
def test_write_todos_status(
    todos: tuple[AgentTodo, ...], mode: InteractionMode, status: PlanStatus
) -> None:
    plan = apply_write_todos(None, todos, mode, "turn-4")
    assert plan == AgentPlan(revision=1, status=status, todos=todos, turn_id="turn-4")


@pytest.mark.parametrize("current_status", list(PlanStatus))
def test_write_todos_writes_revision_plus_one(current_status: PlanStatus) -> None:
    current = _plan(current_status, revision=7)
    plan = apply_write_todos(current, [WORKING, DONE], EXECUTING, "turn-9")
    assert plan.revision == 8
    assert plan.todos == (WORKING, DONE)
    assert plan.turn_id == "turn-9"


@pytest.mark.parametrize(
    ("plan", "output"),
    [
        (_plan(PlanStatus.CLEARED, revision=4, todos=()), '{"status":"cleared","revision":4}'),
        (_plan(PlanStatus.DRAFT, revision=1), '{"status":"updated","revision":1,"task_count":1}'),
        (
            _plan(PlanStatus.ACTIVE, revision=12, todos=(PENDING, WORKING, DONE)),
            '{"status":"updated","revision":12,"task_count":3}',
        ),
        (
            _plan(PlanStatus.COMPLETED, revision=2, todos=(DONE,)),
            '{"status":"updated","revision":2,"task_count":1}',
        ),
    ],
)
def test_write_todos_output(plan: AgentPlan, output: str) -> None:
    assert write_todos_output(plan) == output


@pytest.mark.parametrize(
    ("names", "enabled", "twice"),
    [
        (["write_todos"], frozenset({BuiltInTool.WRITE_TODOS}), False),
        (["write_todos", "lookup", "ask_user"], frozenset(BuiltInTool), False),
        (["write_todos", "write_todos"], frozenset({BuiltInTool.WRITE_TODOS}), True),
        (["write_todos", "lookup", "write_todos", "write_todos"], frozenset({"write_todos"}), True),
        (["write_todos", "write_todos"], frozenset({BuiltInTool.ASK_USER}), False),
        (["lookup", "lookup"], frozenset(BuiltInTool), False),
        ([], frozenset(BuiltInTool), False),
    ],
)
def test_write_todos_once_per_response(
    names: list[str], enabled: frozenset[str], twice: bool
) -> None:
    assert write_todos_called_more_than_once(names, enabled) is twice


@pytest.mark.parametrize(
    ("name", "mode", "rejected"),
    [
        ("write_todos", PLANNING, False),
        ("lookup_order", PLANNING, True),
        ("ask_user", PLANNING, True),
        ("durable_wait", PLANNING, True),
        ("lookup_order", CHAT, False),
        ("lookup_order", EXECUTING, False),
        ("lookup_order", "planning", True),
    ],
)
def test_a_planning_turn_can_only_call_write_todos(
    name: str, mode: InteractionMode, rejected: bool
) -> None:
    assert is_rejected_in_planning_turn(name, mode) is rejected


# --- interaction mode --------------------------------------------------------------


@pytest.mark.parametrize(
    ("plan_modes", "plan", "approved", "mode"),
    [
        ([False], None, False, CHAT),
        ([True], None, False, PLANNING),
        ([False, True], None, False, PLANNING),
        ([False], _plan(PlanStatus.DRAFT), False, PLANNING),
        ([False], _plan(PlanStatus.ACTIVE), False, CHAT),
        ([False], _plan(PlanStatus.COMPLETED), False, CHAT),
        ([False], _plan(PlanStatus.CLEARED, todos=()), False, CHAT),
        ([True], _plan(PlanStatus.ACTIVE), False, PLANNING),
        ([], _plan(PlanStatus.DRAFT), True, EXECUTING),
        ([], _plan(PlanStatus.ACTIVE), True, EXECUTING),
    ],
)
def test_new_turn_interaction_mode(
    plan_modes: list[bool], plan: AgentPlan | None, approved: bool, mode: InteractionMode
) -> None:
    messages = [AgentUserMessage(text="hi", plan_mode=flag) for flag in plan_modes]
    assert new_turn_interaction_mode(messages, plan, plan_approved=approved) is mode


@pytest.mark.parametrize("plan_modes", [[False], [True]])
def test_a_flow_with_plan_mode_off_never_plans(plan_modes: list[bool]) -> None:
    messages = [AgentUserMessage(text="hi", plan_mode=flag) for flag in plan_modes]
    draft = _plan(PlanStatus.DRAFT)
    assert new_turn_interaction_mode(messages, draft, plan_mode_enabled=False) is CHAT
    approved = new_turn_interaction_mode([], draft, plan_approved=True, plan_mode_enabled=False)
    assert approved is EXECUTING


def test_a_steered_queued_message_keeps_plan_mode() -> None:
    moved = QueuedUserMessage(message_id="m-1", text="Plan it", plan_mode=True)
    assert new_turn_interaction_mode([moved], None) is PLANNING


# --- execute_plan and approval ------------------------------------------------------

WAITING = AgentState(status=AgentStatus.WAITING_FOR_USER_MESSAGE)


@pytest.mark.parametrize(
    ("overrides", "accepted"),
    [
        ({}, True),
        ({"plan": _plan(PlanStatus.ACTIVE)}, True),
        ({"revision": 2}, False),
        ({"revision": 4}, False),
        ({"plan": None}, False),
        ({"plan": _plan(PlanStatus.COMPLETED, todos=(DONE,))}, False),
        ({"plan": _plan(PlanStatus.CLEARED, todos=())}, False),
        ({"state": None}, False),
        ({"state": AgentState(status=AgentStatus.RUNNING_MODEL, active_turn_id="turn-2")}, False),
        ({"state": AgentState(status=AgentStatus.RUNNING_TOOLS, active_turn_id="turn-2")}, False),
        ({"state": AgentState(status=AgentStatus.COMPACTING_CONTEXT)}, False),
        ({"pending_execution": PlanExecutionRequest(revision=3)}, False),
        # "no execution of it is pending": another revision's pending approval is stale.
        ({"pending_execution": PlanExecutionRequest(revision=2)}, True),
        ({"queued_message_count": 1}, False),
        ({"steered_message_count": 1}, False),
        ({"pending_interrupt_count": 1}, False),
    ],
)
def test_execute_plan_acceptance(overrides: dict[str, object], accepted: bool) -> None:
    arguments: dict[str, object] = {
        "revision": 3,
        "state": WAITING,
        "plan": _plan(PlanStatus.DRAFT),
        "pending_execution": None,
        "queued_message_count": 0,
        "steered_message_count": 0,
        "pending_interrupt_count": 0,
    }
    arguments.update(overrides)
    assert accepts_plan_execution(**arguments) is accepted  # type: ignore[arg-type]


@pytest.mark.parametrize(("revision", "key"), [(1, "1"), (9, "9"), (10, "10"), (123456, "123456")])
def test_plan_execution_key_is_decimal(revision: int, key: str) -> None:
    assert plan_execution_key(revision) == key


@pytest.mark.parametrize("revision", [0, -1, True])
def test_plan_execution_key_refuses_a_revision_that_cannot_exist(revision: int) -> None:
    with pytest.raises(ValueError, match="a plan revision is an integer from 1"):
        plan_execution_key(revision)


@pytest.mark.parametrize(
    ("plan", "key"),
    [
        (None, None),
        (_plan(PlanStatus.DRAFT, revision=5), "5"),
        (_plan(PlanStatus.ACTIVE, revision=6), "6"),
        (_plan(PlanStatus.COMPLETED, revision=7, todos=(DONE,)), None),
        (_plan(PlanStatus.CLEARED, revision=8, todos=()), None),
    ],
)
def test_await_user_message_waits_on_the_current_revision_only(
    plan: AgentPlan | None, key: str | None
) -> None:
    assert awaited_plan_execution_key(plan) == key


@pytest.mark.parametrize(
    ("plan", "revision", "current"),
    [
        (_plan(PlanStatus.DRAFT, revision=5), 5, True),
        (_plan(PlanStatus.ACTIVE, revision=5), 5, True),
        (_plan(PlanStatus.DRAFT, revision=6), 5, False),
        (_plan(PlanStatus.COMPLETED, revision=5, todos=(DONE,)), 5, False),
        (None, 5, False),
    ],
)
def test_a_stale_approval_is_not_current(
    plan: AgentPlan | None, revision: int, current: bool
) -> None:
    assert is_current_plan_approval(plan, PlanExecutionRequest(revision=revision)) is current


def test_approval_marks_a_draft_active_at_the_same_revision() -> None:
    draft = _plan(PlanStatus.DRAFT, revision=5, todos=(PENDING, WORKING))
    approved = mark_plan_approved(draft)
    assert approved == AgentPlan(
        revision=5, status=PlanStatus.ACTIVE, todos=(PENDING, WORKING), turn_id="turn-1"
    )
    assert mark_plan_approved(approved) is approved


@pytest.mark.parametrize("status", [PlanStatus.CLEARED, PlanStatus.COMPLETED])
def test_approval_refuses_a_plan_that_cannot_run(status: PlanStatus) -> None:
    with pytest.raises(ValueError, match=f"a {status} plan cannot be approved"):
        mark_plan_approved(_plan(status))


# --- plan note ------------------------------------------------------------------------

LISTING = (
    "Plan revision 3 ({status}):\n"
    "1. [pending] Back up the database\n"
    "2. [in_progress] Migrate the users table\n"
    "3. [completed] Verify row counts"
)


def test_a_planning_turn_without_a_plan_is_told_to_write_one() -> None:
    for plan in (None, _plan(PlanStatus.CLEARED, todos=())):
        note = build_plan_note(plan, PLANNING)
        assert note is not None
        assert note.startswith("[Dex] This is a planning turn")
        assert "Write the plan with write_todos" in note
        assert "Do not call any other tool." in note
        assert "Plan revision" not in note


def test_a_planning_turn_revises_a_draft() -> None:
    note = build_plan_note(_plan(PlanStatus.DRAFT, todos=(PENDING, WORKING, DONE)), PLANNING)
    assert note is not None
    assert "reviewing the draft plan below" in note
    assert "Revise the plan with write_todos" in note
    assert "Do not call any other tool" in note
    assert note.endswith("\n\n" + LISTING.format(status="draft"))


def test_a_planning_turn_replaces_an_active_plan() -> None:
    note = build_plan_note(_plan(PlanStatus.ACTIVE, todos=(PENDING, WORKING, DONE)), PLANNING)
    assert note is not None
    assert "Write the new plan with write_todos" in note
    assert "Do not call any other tool." in note
    assert note.endswith("\n\n" + LISTING.format(status="active"))


def test_an_executing_turn_is_told_to_keep_statuses_current() -> None:
    note = build_plan_note(_plan(PlanStatus.ACTIVE, todos=(PENDING, WORKING, DONE)), EXECUTING)
    assert note is not None
    assert note.startswith("[Dex] You are executing the plan below, which the user approved.")
    assert "keep the task statuses current with write_todos" in note.lower()
    assert "Do not call any other tool" not in note
    assert note.endswith("\n\n" + LISTING.format(status="active"))


@pytest.mark.parametrize("status", [PlanStatus.ACTIVE, PlanStatus.COMPLETED])
def test_a_chat_turn_sees_the_plan(status: PlanStatus) -> None:
    note = build_plan_note(_plan(status, todos=(PENDING, WORKING, DONE)), CHAT)
    assert note is not None
    assert note.startswith("[Dex] The session has the plan below.")
    assert "Do not call any other tool" not in note
    assert note.endswith("\n\n" + LISTING.format(status=status))


@pytest.mark.parametrize("mode", [CHAT, EXECUTING])
@pytest.mark.parametrize("plan", [None, _plan(PlanStatus.CLEARED, todos=())])
def test_no_note_without_a_plan_outside_planning(
    plan: AgentPlan | None, mode: InteractionMode
) -> None:
    assert build_plan_note(plan, mode) is None


def test_the_three_modes_get_different_notes() -> None:
    plan = _plan(PlanStatus.ACTIVE)
    notes = {build_plan_note(plan, mode) for mode in InteractionMode}
    assert len(notes) == 3


_TODOS = st.lists(
    st.builds(
        AgentTodo,
        content=st.text(min_size=1, max_size=20).filter(str.strip),
        status=st.sampled_from(list(TodoStatus)),
    ),
    max_size=6,
)


@settings(max_examples=100, deadline=None)
@given(
    revision=st.integers(min_value=0, max_value=10**6),
    todos=_TODOS,
    mode=st.sampled_from(list(InteractionMode)),
)
def test_write_todos_properties(
    revision: int, todos: list[AgentTodo], mode: InteractionMode
) -> None:
    current = None if revision == 0 else _plan(PlanStatus.ACTIVE, revision=revision)
    plan = apply_write_todos(current, todos, mode, "turn-1")
    assert plan.revision == revision + 1
    assert plan.todos == tuple(todos)
    output = json.loads(write_todos_output(plan))
    assert output["revision"] == plan.revision
    if not todos:
        assert output == {"status": "cleared", "revision": plan.revision}
    else:
        assert output == {"status": "updated", "revision": plan.revision, "task_count": len(todos)}
        assert (plan.status is PlanStatus.DRAFT) is (mode is PLANNING)
    note = build_plan_note(plan, mode)
    for todo in plan.todos:
        assert note is not None
        assert f"[{todo.status}] {todo.content}" in note
