"""The session's plan: the ``AgentPlan`` Attribute that ``write_todos`` replaces as a whole."""

from __future__ import annotations

from enum import StrEnum

import attrs


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
