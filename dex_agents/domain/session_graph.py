"""The session Flow Definition Graph: every Step, every movement, and the Actions a person operates.

This is the "Flow shape" section as data, for Dex Web ("Showing sessions in Dex
Web"). ``SESSION_FLOW_NODES`` holds one node per row of the Step table, with the
row's input, a one-line summary of what it does, and its "Next" cell.
``SESSION_FLOW_EDGES`` holds every movement that table and the arrow diagram
name, and the ones a session makes that only the spec's prose names (a
continued turn, a Timer that waits again, a refused summary call) and the
failure routes this build gives the Steps that wait for a person or a Timer
(docs/spec-differences.md, "Flow shape"), so Dex Web has an edge for every
movement a session makes. Each is labelled with its
condition; a failure route is an edge of kind ``failure_route``, and the Steps
of one ``go_to_many`` are edges of kind ``go_to_many``. A Step that may end its
path carries an ``end_condition`` instead of an edge, because an ended path
moves nowhere. The Actions a person operates are in ``session_graph_actions``.
"""

from __future__ import annotations

from enum import StrEnum

import attrs


class SessionFlowEdgeKind(StrEnum):
    """How a Step moves to the next one, as the graph's wire carries it."""

    TRANSITION = "transition"
    """A ``go_to`` decided in Execute."""
    GO_TO_MANY = "go_to_many"
    """One of the Steps a ``go_to_many`` starts, often one per tool call."""
    FAILURE_ROUTE = "failure_route"
    """The Step that runs when a Step's attempts are used up."""


@attrs.frozen(kw_only=True)
class SessionFlowNode:
    """One Step of the session Flow: a row of the Flow-shape Step table.

    ``input`` is the row's input as the table names it (``"none"`` for a Step
    without one), ``description`` a one-line summary of what it does, ``next`` the
    row's "Next" cell, and ``end_condition`` when the Step may end its path
    (``None`` when it always moves on).
    """

    step_type: str
    input: str
    description: str
    next: str
    end_condition: str | None = None


@attrs.frozen(kw_only=True)
class SessionFlowEdge:
    """One movement from ``source`` to ``target``, two Step types, under the condition ``label``.

    ``per`` says how many movements a ``go_to_many`` edge stands for, such as
    ``"per call needing approval"``; ``None`` means one.
    """

    source: str
    target: str
    kind: SessionFlowEdgeKind
    label: str
    per: str | None = None


SESSION_FLOW_START_STEP_TYPE = "StartAgentSession"
"""The start Step of every session Flow."""

_TOOL_CALL_ID = "tool call ID"


def _node(
    step_type: str, input: str, description: str, next: str, end: str | None = None
) -> SessionFlowNode:
    return SessionFlowNode(
        step_type=step_type, input=input, description=description, next=next, end_condition=end
    )


SESSION_FLOW_NODES: tuple[SessionFlowNode, ...] = (
    _node(
        "StartAgentSession",
        "AgentSessionStartInput",
        "Start Step. Initializes state, usage, interrupts, and SessionSettings.",
        "RunModel with a non-blank initial_message, else AwaitUserMessage",
    ),
    _node(
        "AwaitUserMessage",
        "none",
        "Waits for TurnControlRequests, QueuedUserMessages, or a plan approval, "
        "then steers, starts a chat or planning turn, or starts an executing turn.",
        "ApplyTurnControl, RunModel, or itself for a stale approval",
    ),
    _node(
        "RunModel",
        "none",
        "Calls run_model_step unless the turn is steered or cancelled or a compaction "
        "policy's threshold is crossed. 15 min timeout, 2 min heartbeat timeout, "
        "3 attempts in 30 min.",
        "AwaitUserMessage, ApplyTurnControl, CompactContext, or go_to_many with one Step "
        "per tool call plus ResumeTurn",
    ),
    _node(
        "CompactContext",
        "CompactContextInput",
        "Calls summarize_context once and stores ContextSummary. RunModel's timeouts, "
        "attempts, and failure route.",
        "RunModel",
    ),
    _node(
        "AwaitToolApproval",
        _TOOL_CALL_ID,
        "Waits for ToolCallCancellations or InterruptResolutions, plus a Timer at the "
        "deadline. Approved: marks the record approved; rejected, expired, or cancelled: "
        "records rejected.",
        "CallTool or CallSingleAttemptTool, or ends",
        end="rejected, expired, or cancelled",
    ),
    _node(
        "AwaitQuestionAnswer",
        _TOOL_CALL_ID,
        "Waits for ToolCallCancellations or InterruptResolutions, plus a deadline Timer. "
        "Records the answer, decline, or deadline, or returns a tool's question to its Step.",
        "Ends, the tool Step, PollToolTask, FinishTurnCancellation, or itself",
        end="answered, declined, past its deadline, or cancelled",
    ),
    _node(
        "AwaitTimer",
        _TOOL_CALL_ID,
        "Waits on a Timer until wait_until, or ToolCallCancellations. Records succeeded, "
        "or rejected when cancelled.",
        "Ends",
        end="timer fired or cancelled",
    ),
    _node(
        "CallTool",
        _TOOL_CALL_ID,
        "Runs one read or idempotent_write call. 3 attempts, failure route RecordToolFailure.",
        "Ends, AwaitQuestionAnswer, or PollToolTask",
        end="result recorded",
    ),
    _node(
        "CallSingleAttemptTool",
        _TOOL_CALL_ID,
        "Runs one non_idempotent_write or unclassified call. 1 attempt, failure route "
        "RecordToolOutcomeUnknown.",
        "Ends, AwaitQuestionAnswer, or PollToolTask",
        end="result recorded",
    ),
    _node(
        "PollToolTask",
        _TOOL_CALL_ID,
        "Waits on a Timer for task_poll_interval_seconds, then calls poll_tool_task. 3 attempts.",
        "Ends, itself, AwaitQuestionAnswer, or FinishTurnCancellation",
        end="task result recorded",
    ),
    _node(
        "RecordToolFailure",
        _TOOL_CALL_ID,
        "Records failed for a read and outcome_unknown for a write, with the recovery "
        "detail in error.",
        "Ends",
        end="recorded",
    ),
    _node(
        "RecordToolOutcomeUnknown",
        _TOOL_CALL_ID,
        "Records outcome_unknown with the recovery detail in error.",
        "Ends",
        end="recorded",
    ),
    _node(
        "ResumeTurn",
        "expected result count",
        "Waits for ToolCallResults.for_n(count) or TurnControlRequests.",
        "RunModel, ApplyTurnControl when steered or cancelled, or itself",
    ),
    _node(
        "ApplyTurnControl",
        "none",
        "Consumes every steered message and stale wake, and ends an active steered or "
        "cancelled turn with turn_steered or turn_cancelled.",
        "RunModel with the steered messages, else AwaitUserMessage",
    ),
    _node(
        "RecordTurnFailure",
        "the failing Step's input, ignored",
        "Records last_turn_error and clears the turn's records and run state.",
        "AwaitUserMessage",
    ),
    _node(
        "FinishTurnCancellation",
        "turn ID",
        "Ends a turn whose model call or compaction was cancelled, or records each call "
        "whose wait was cancelled and hands each started task to CancelToolTask.",
        "Ends, ApplyTurnControl, CancelToolTask, or a waiting Step whose answer committed first",
        end="tool calls still run; ResumeTurn ends the turn",
    ),
    _node(
        "CancelToolTask",
        _TOOL_CALL_ID,
        "Calls cancel_tool_task when the runner implements ToolTaskCanceller, then records "
        "outcome_unknown. 3 attempts in 2 min, 30 s timeout.",
        "Ends",
        end="recorded",
    ),
)
"""Every Step of the session Flow, in the order of the Flow-shape table."""

_MOVE = SessionFlowEdgeKind.TRANSITION
_MANY = SessionFlowEdgeKind.GO_TO_MANY
_FAIL = SessionFlowEdgeKind.FAILURE_ROUTE
_TOOL_CALLS = "ToolCallsRequested"
_FAILURE = "failure route"
_STEERED = "steered or cancelled"
_FAILURE_OF_A_READ = "failure route: read or idempotent_write"
_FAILURE_OF_A_WRITE = "failure route: non_idempotent_write or unclassified"


def _edge(
    source: str, target: str, label: str, kind: SessionFlowEdgeKind = _MOVE, per: str | None = None
) -> SessionFlowEdge:
    return SessionFlowEdge(source=source, target=target, kind=kind, label=label, per=per)


SESSION_FLOW_EDGES: tuple[SessionFlowEdge, ...] = (
    _edge("StartAgentSession", "RunModel", "non-blank initial_message"),
    _edge("StartAgentSession", "AwaitUserMessage", "blank or no initial_message"),
    _edge("AwaitUserMessage", "ApplyTurnControl", "steer"),
    _edge("AwaitUserMessage", "RunModel", "user message or plan approval"),
    _edge("AwaitUserMessage", "AwaitUserMessage", "stale approval"),
    _edge("RunModel", "AwaitUserMessage", "TurnCompleted"),
    _edge("RunModel", "ApplyTurnControl", _STEERED),
    _edge("RunModel", "CompactContext", "compaction threshold crossed"),
    # "Ending or continuing a turn": a ContinueTurn moves to RunModel again.
    _edge("RunModel", "RunModel", "TurnContinued"),
    _edge("RunModel", "AwaitToolApproval", _TOOL_CALLS, _MANY, "per call needing approval"),
    _edge("RunModel", "CallTool", _TOOL_CALLS, _MANY, "per other read or idempotent_write call"),
    _edge(
        "RunModel",
        "CallSingleAttemptTool",
        _TOOL_CALLS,
        _MANY,
        "per other non_idempotent_write or unclassified call",
    ),
    _edge("RunModel", "AwaitQuestionAnswer", _TOOL_CALLS, _MANY, "per ask_user call"),
    _edge("RunModel", "AwaitTimer", _TOOL_CALLS, _MANY, "per durable_wait call"),
    _edge("RunModel", "ResumeTurn", _TOOL_CALLS, _MANY),
    _edge("RunModel", "RecordTurnFailure", _FAILURE, _FAIL),
    _edge("CompactContext", "RunModel", "ContextSummary stored"),
    # "Spend limits": the session asks before each model call; a refusal ends the turn.
    _edge("CompactContext", "AwaitUserMessage", "spend limit refused the summary call"),
    _edge("CompactContext", "RecordTurnFailure", _FAILURE, _FAIL),
    _edge("AwaitToolApproval", "CallTool", "approved read or idempotent_write call"),
    _edge(
        "AwaitToolApproval",
        "CallSingleAttemptTool",
        "approved non_idempotent_write or unclassified call",
    ),
    _edge(
        "AwaitToolApproval", "AwaitToolApproval", "Timer fired before the deadline, or a stale wake"
    ),
    # Beyond the table, as for the tool Steps: a failure ends the call, not the session.
    _edge("AwaitToolApproval", "RecordToolFailure", _FAILURE_OF_A_READ, _FAIL),
    _edge("AwaitToolApproval", "RecordToolOutcomeUnknown", _FAILURE_OF_A_WRITE, _FAIL),
    _edge("AwaitQuestionAnswer", "CallTool", "tool's question answered"),
    _edge("AwaitQuestionAnswer", "CallSingleAttemptTool", "tool's question answered"),
    _edge("AwaitQuestionAnswer", "PollToolTask", "task's question answered"),
    _edge("AwaitQuestionAnswer", "FinishTurnCancellation", "turn cancelled during a task"),
    _edge("AwaitQuestionAnswer", "AwaitQuestionAnswer", "tool's question raised"),
    _edge("AwaitQuestionAnswer", "RecordToolFailure", _FAILURE_OF_A_READ, _FAIL),
    _edge("AwaitQuestionAnswer", "RecordToolOutcomeUnknown", _FAILURE_OF_A_WRITE, _FAIL),
    # The first AwaitTimer records waiting_for_timer; the next one waits on the Timer.
    _edge("AwaitTimer", "AwaitTimer", "wait started, or woken before wait_until"),
    _edge("AwaitTimer", "RecordToolFailure", _FAILURE, _FAIL),
    _edge("CallTool", "AwaitQuestionAnswer", "ToolInputRequested"),
    _edge("CallTool", "PollToolTask", "ToolTaskStarted"),
    _edge("CallTool", "RecordToolFailure", _FAILURE, _FAIL),
    _edge("CallSingleAttemptTool", "AwaitQuestionAnswer", "ToolInputRequested"),
    _edge("CallSingleAttemptTool", "PollToolTask", "ToolTaskStarted"),
    _edge("CallSingleAttemptTool", "RecordToolOutcomeUnknown", _FAILURE, _FAIL),
    _edge("PollToolTask", "PollToolTask", "task still running"),
    _edge("PollToolTask", "AwaitQuestionAnswer", "ToolInputRequested"),
    _edge("PollToolTask", "FinishTurnCancellation", "turn cancelled"),
    _edge("PollToolTask", "RecordToolFailure", _FAILURE_OF_A_READ, _FAIL),
    _edge("PollToolTask", "RecordToolOutcomeUnknown", _FAILURE_OF_A_WRITE, _FAIL),
    _edge("ResumeTurn", "RunModel", "every result in"),
    _edge("ResumeTurn", "ApplyTurnControl", _STEERED),
    _edge("ResumeTurn", "ResumeTurn", "a record of the turn unfinished, or a steer wake"),
    _edge("ApplyTurnControl", "RunModel", "steered messages"),
    _edge("ApplyTurnControl", "AwaitUserMessage", "no steered messages"),
    _edge("ApplyTurnControl", "ApplyTurnControl", "wakes consumed, steered messages next"),
    _edge("RecordTurnFailure", "AwaitUserMessage", "turn failed"),
    _edge("FinishTurnCancellation", "ApplyTurnControl", "model call or compaction cancelled"),
    _edge("FinishTurnCancellation", "CancelToolTask", "started tasks", _MANY, "per abandoned task"),
    _edge("FinishTurnCancellation", "AwaitToolApproval", "answer committed first"),
    _edge("FinishTurnCancellation", "AwaitQuestionAnswer", "answer committed first"),
    _edge("CancelToolTask", "RecordToolOutcomeUnknown", _FAILURE, _FAIL),
)
"""Every movement a session makes, grouped by source Step: the Flow-shape table's and more."""
