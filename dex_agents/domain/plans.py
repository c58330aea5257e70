"""The session's plan: the ``AgentPlan`` Attribute that ``write_todos`` replaces as a whole.

Also the pure rules of plan mode ("Plans and plan mode"): the plan a ``write_todos``
call writes and the result the model sees, which calls a planning turn rejects,
the interaction mode of a new turn, when ``execute_plan`` accepts an approval, the
user message an approval starts its turn with and how a transcript recognizes it,
and the plan note that shows the model the plan.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from enum import StrEnum
from typing import Protocol

import attrs

from dex_agents.domain.state import AgentState, AgentStatus, InteractionMode


class PlanStatus(StrEnum):
    """The status of a plan revision."""

    CLEARED = "cleared"
    DRAFT = "draft"
    ACTIVE = "active"
    COMPLETED = "completed"


class TodoStatus(StrEnum):
    """The status of one task of a plan."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"


@attrs.frozen(kw_only=True)
class AgentTodo:
    """One task of a plan, as ``write_todos`` takes it: ``{content, status}``."""

    content: str
    status: TodoStatus = attrs.field(converter=TodoStatus)


@attrs.frozen(kw_only=True)
class AgentPlan:
    """The session's plan; each successful ``write_todos`` writes revision + 1."""

    revision: int
    status: PlanStatus = attrs.field(converter=PlanStatus)
    todos: tuple[AgentTodo, ...] = ()
    turn_id: str | None = None


@attrs.frozen(kw_only=True)
class PlanExecutionRequest:
    """An approval to execute a plan revision (``PlanExecutions``, ``PendingPlanExecution``)."""

    revision: int


WRITE_TODOS_CALLED_TWICE_ERROR = "write_todos was called more than once in one response"
"""The error of every ``write_todos`` call of a response that makes more than one."""

PLANNING_TURN_REJECTION = "The tool call was not run: a planning turn can only call write_todos."
"""What the model sees for any call but ``write_todos`` in a ``planning`` turn."""

_WRITE_TODOS = "write_todos"
_EXECUTABLE_STATUSES = frozenset({PlanStatus.DRAFT, PlanStatus.ACTIVE})


class _UserMessage(Protocol):
    @property
    def plan_mode(self) -> bool: ...


def write_todos_called_more_than_once(
    tool_names: Iterable[str], enabled_built_in_tools: Collection[str]
) -> bool:
    """Whether one model response calls the enabled ``write_todos`` more than once.

    When it does, each of those calls fails with ``WRITE_TODOS_CALLED_TWICE_ERROR``.
    A disabled ``write_todos`` is an ordinary tool name, so the rule does not apply.
    """
    if _WRITE_TODOS not in enabled_built_in_tools:
        return False
    return sum(1 for name in tool_names if name == _WRITE_TODOS) > 1


def is_rejected_in_planning_turn(tool_name: str, interaction_mode: InteractionMode) -> bool:
    """Whether ``RunModel`` rejects a call with ``PLANNING_TURN_REJECTION``.

    A ``planning`` turn can only call ``write_todos``; other turns reject nothing here.
    """
    return InteractionMode(interaction_mode) is InteractionMode.PLANNING and (
        tool_name != _WRITE_TODOS
    )


def apply_write_todos(
    current_plan: AgentPlan | None,
    todos: Sequence[AgentTodo],
    interaction_mode: InteractionMode,
    turn_id: str,
) -> AgentPlan:
    """The plan that a successful ``write_todos`` call writes, replacing the plan as a whole.

    The revision is the current one + 1 (1 for the first plan). No tasks is
    ``cleared``, a planning turn writes a ``draft``, every task completed is
    ``completed``, and anything else is ``active``, in that order.
    """
    revision = (current_plan.revision if current_plan is not None else 0) + 1
    if not todos:
        status = PlanStatus.CLEARED
    elif InteractionMode(interaction_mode) is InteractionMode.PLANNING:
        status = PlanStatus.DRAFT
    elif all(todo.status is TodoStatus.COMPLETED for todo in todos):
        status = PlanStatus.COMPLETED
    else:
        status = PlanStatus.ACTIVE
    return AgentPlan(revision=revision, status=status, todos=tuple(todos), turn_id=turn_id)


def write_todos_output(plan: AgentPlan) -> str:
    """The tool result the model sees for a ``write_todos`` call that wrote ``plan``.

    ``{"status":"cleared","revision":<n>}`` for a cleared plan, else
    ``{"status":"updated","revision":<n>,"task_count":<k>}``.
    """
    if plan.status is PlanStatus.CLEARED:
        return f'{{"status":"cleared","revision":{plan.revision}}}'
    return f'{{"status":"updated","revision":{plan.revision},"task_count":{len(plan.todos)}}}'


def plan_execution_key(revision: int) -> str:
    """The ``PlanExecutions`` ChannelMap key of a plan revision: its decimal text."""
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 1:
        raise ValueError(f"a plan revision is an integer from 1, not {revision!r}")
    return str(revision)


def awaited_plan_execution_key(plan: AgentPlan | None) -> str | None:
    """The ``PlanExecutions`` key ``AwaitUserMessage`` waits on, or ``None``.

    It waits on the current revision only, and only while the plan is ``draft`` or
    ``active``, so an approval of a revision that a later turn replaced never runs.
    """
    if plan is None or plan.status not in _EXECUTABLE_STATUSES:
        return None
    return plan_execution_key(plan.revision)


def accepts_plan_execution(
    *,
    revision: int,
    state: AgentState | None,
    plan: AgentPlan | None,
    pending_execution: PlanExecutionRequest | None,
    queued_message_count: int,
    steered_message_count: int,
    pending_interrupt_count: int = 0,
) -> bool:
    """Whether ``execute_plan(ExecutePlanRequest(revision))`` returns ``True``.

    Only while the session waits for a user message, the plan has that revision
    and is ``draft`` or ``active``, no execution of it is pending, and nothing
    is queued, steered, or pending. A pending approval of another revision does
    not refuse it: ``AwaitUserMessage`` waits only on the current revision's
    approval, so a stale one never runs.
    """
    return (
        state is not None
        and state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
        and plan is not None
        and plan.revision == revision
        and plan.status in _EXECUTABLE_STATUSES
        and (pending_execution is None or pending_execution.revision != revision)
        and queued_message_count == 0
        and steered_message_count == 0
        and pending_interrupt_count == 0
    )


def is_current_plan_approval(plan: AgentPlan | None, request: PlanExecutionRequest) -> bool:
    """Whether an approval still applies: the plan has its revision and is ``draft`` or ``active``.

    ``AwaitUserMessage`` drops a stale approval and waits again.
    """
    return (
        plan is not None
        and plan.revision == request.revision
        and plan.status in _EXECUTABLE_STATUSES
    )


def mark_plan_approved(plan: AgentPlan) -> AgentPlan:
    """The plan after its approval: a ``draft`` becomes ``active`` at the same revision.

    An ``active`` plan is returned unchanged; the session writes ``plan_updated``
    only when the status changed. Raises ``ValueError`` for a ``cleared`` or
    ``completed`` plan, which no approval applies to.
    """
    if plan.status is PlanStatus.ACTIVE:
        return plan
    if plan.status is not PlanStatus.DRAFT:
        raise ValueError(f"a {plan.status} plan cannot be approved for execution")
    return attrs.evolve(plan, status=PlanStatus.ACTIVE)


def executing_turn_user_message(revision: int) -> str:
    """The user message of the ``executing`` turn that an approval of ``revision`` starts."""
    return (
        f"[Dex] The user approved plan revision {revision}. Execute it and keep the task "
        "statuses current with write_todos."
    )


_PLAN_APPROVAL = re.compile(r"\[Dex\] The user approved plan revision ([0-9]+)\. ")


def executed_plan_revision(text: str) -> int | None:
    """The plan revision whose approval ``text`` is the executing turn's user message of
    (``executing_turn_user_message``), or ``None`` for any other text.

    Only the exact text counts: a person who typed the same opening words and more is
    still a person. Every view of a transcript (the CLI, the console) asks this one rule.
    """
    match = _PLAN_APPROVAL.match(text)
    if match is None:
        return None
    revision = int(match.group(1))
    return revision if text == executing_turn_user_message(revision) else None


def new_turn_interaction_mode(
    messages: Iterable[_UserMessage],
    plan: AgentPlan | None,
    *,
    plan_approved: bool = False,
    plan_mode_enabled: bool = True,
) -> InteractionMode:
    """The ``interaction_mode`` of a new turn.

    ``executing`` for a turn that an approved plan starts; else ``planning`` when
    any of the turn's user messages has ``plan_mode`` or a ``draft`` plan exists;
    else ``chat``. A Flow with plan mode off never plans: its runner offers no
    ``write_todos`` for a planning turn, which could then call no tool at all, so a
    draft left from when plan mode was on, or a ``plan_mode`` message queued then,
    starts a ``chat`` turn.
    """
    if plan_approved:
        return InteractionMode.EXECUTING
    if not plan_mode_enabled:
        return InteractionMode.CHAT
    if any(message.plan_mode for message in messages):
        return InteractionMode.PLANNING
    if plan is not None and plan.status is PlanStatus.DRAFT:
        return InteractionMode.PLANNING
    return InteractionMode.CHAT


def _plan_listing(plan: AgentPlan) -> str:
    lines = [f"Plan revision {plan.revision} ({plan.status}):"]
    lines.extend(
        f"{number}. [{todo.status}] {todo.content}"
        for number, todo in enumerate(plan.todos, start=1)
    )
    return "\n".join(lines)


_PLANNING_NEW = (
    "[Dex] This is a planning turn: plan the work the user asked for, but do not do it "
    "yet. Write the plan with write_todos, one task per step, each with status pending. "
    "Do not call any other tool. The user reviews the plan and approves it before it "
    "runs. If you need more information to plan, ask in text instead of writing a plan."
)
_PLANNING_REVISE = (
    "[Dex] This is a planning turn. The user is reviewing the draft plan below, and "
    "their message is feedback on it. Revise the plan with write_todos, sending the "
    "whole list, since it replaces the plan. Do not call any other tool, and do not do "
    "the work yet. If you need more information, ask in text instead."
)
_PLANNING_REPLACE = (
    "[Dex] This is a planning turn: plan the work the user asked for, but do not do it "
    "yet. The session's current plan is below. Write the new plan with write_todos, "
    "sending the whole list, since it replaces the current one. Do not call any other "
    "tool. The user reviews the plan and approves it before it runs. If you need more "
    "information to plan, ask in text instead of writing a plan."
)
_EXECUTING = (
    "[Dex] You are executing the plan below, which the user approved. Work through the "
    "tasks in order. Keep the task statuses current with write_todos, sending the whole "
    "list each time: mark a task in_progress when you start it and completed when it is "
    "done."
)
_CHAT = (
    "[Dex] The session has the plan below. When your work changes a task, keep its "
    "status current with write_todos, sending the whole list."
)


def build_plan_note(plan: AgentPlan | None, interaction_mode: InteractionMode) -> str | None:
    """The note that shows the model the plan, or ``None`` when there is nothing to show.

    A planning turn always gets a note: it tells the model to write or revise the
    plan with ``write_todos`` and to call no other tool. Executing and chat turns
    get one while a plan with tasks exists. The note lists every task with its
    status; the built-in loop adds it as user text before the turn's items.
    """
    mode = InteractionMode(interaction_mode)
    has_tasks = plan is not None and plan.status is not PlanStatus.CLEARED and bool(plan.todos)
    if mode is InteractionMode.PLANNING:
        if plan is None or not has_tasks:
            return _PLANNING_NEW
        intro = _PLANNING_REVISE if plan.status is PlanStatus.DRAFT else _PLANNING_REPLACE
        return f"{intro}\n\n{_plan_listing(plan)}"
    if plan is None or not has_tasks:
        return None
    intro = _EXECUTING if mode is InteractionMode.EXECUTING else _CHAT
    return f"{intro}\n\n{_plan_listing(plan)}"
