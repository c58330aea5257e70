"""The Actions of the session Flow Definition Graph: the RPCs a person operates from Dex Web.

Each is a row of the "Flow shape" RPC table that changes a session, with the
Steps where it applies and the permission it needs. The read-only RPCs
(``get_agent_snapshot``, ``list_agent_messages``) are views, not Actions.
"""

from __future__ import annotations

import attrs

from dex_agents.domain.session_graph import SESSION_FLOW_NODES


@attrs.frozen(kw_only=True)
class SessionFlowAction:
    """An RPC a person operates from Dex Web, with the Steps where it applies.

    ``step_types`` are the Steps during which the Action means something;
    ``required_permission`` is the ``action_permission`` a person needs.
    ``cancels`` and ``moves_to`` are the Steps the RPC itself cancels and starts
    (only ``cancel_turn`` has any).
    """

    name: str
    input_type: str
    description: str
    step_types: tuple[str, ...]
    required_permission: str
    cancels: tuple[str, ...] = ()
    moves_to: tuple[str, ...] = ()


_TURN_STEPS = (
    "RunModel",
    "CompactContext",
    "AwaitToolApproval",
    "AwaitQuestionAnswer",
    "AwaitTimer",
    "CallTool",
    "CallSingleAttemptTool",
    "PollToolTask",
    "ResumeTurn",
)
# A message can be queued, and a queued message deleted, at any time.
_EVERY_STEP = tuple(node.step_type for node in SESSION_FLOW_NODES)

CANCEL_TURN_STEP_TYPES = (
    "RunModel",
    "CompactContext",
    "RecordTurnFailure",
    "AwaitToolApproval",
    "AwaitQuestionAnswer",
    "AwaitTimer",
    "PollToolTask",
)
"""The Step types ``cancel_turn`` cancels: the model call, compaction (and their failure
route, which would otherwise end the turn a second time), and every wait of a tool call.

The RPC cancels these (``turn_control_rpcs.CANCELLED_STEP_TYPES``) and the graph's
``cancel_turn`` Action lists them, from this one tuple."""

# name, input type, description, Steps where it applies, cancels, moves to
_ACTIONS: tuple[tuple[str, str, str, tuple[str, ...], tuple[str, ...], tuple[str, ...]], ...] = (
    (
        "send_user_message",
        "AgentUserMessage",
        "Queues a user message; AwaitUserMessage starts a turn with it.",
        _EVERY_STEP,
        (),
        (),
    ),
    (
        "steer_user_message",
        "SteerUserMessageRequest",
        "Steers the active turn with a queued message or new text; while no turn is "
        "active, queues the text.",
        ("AwaitUserMessage", *_TURN_STEPS),
        (),
        (),
    ),
    (
        "delete_queued_message",
        "DeleteQueuedMessageRequest",
        "Deletes a message that is still queued.",
        _EVERY_STEP,
        (),
        (),
    ),
    (
        "cancel_turn",
        "CancelTurnRequest",
        "Cancels the turn's model call, compaction, and waiting Steps, and moves to "
        "FinishTurnCancellation.",
        _TURN_STEPS,
        CANCEL_TURN_STEP_TYPES,
        ("FinishTurnCancellation",),
    ),
    (
        "resolve_interrupt",
        "ResolveInterruptRequest",
        "Approves or rejects a pending tool call, or declines a question.",
        ("AwaitToolApproval", "AwaitQuestionAnswer"),
        (),
        (),
    ),
    (
        "answer_question",
        "AnswerQuestionRequest",
        "Answers a pending question.",
        ("AwaitQuestionAnswer",),
        (),
        (),
    ),
    (
        "execute_plan",
        "ExecutePlanRequest",
        "Approves a plan revision; AwaitUserMessage starts an executing turn.",
        ("AwaitUserMessage",),
        (),
        (),
    ),
)


def session_flow_actions(action_permission: str) -> tuple[SessionFlowAction, ...]:
    """The Actions a person operates on a session, each requiring ``action_permission``.

    The read-only RPCs (``get_agent_snapshot``, ``list_agent_messages``) are views,
    not Actions, so they are not listed.
    """
    return tuple(
        SessionFlowAction(
            name=name,
            input_type=input_type,
            description=description,
            step_types=step_types,
            required_permission=action_permission,
            cancels=cancels,
            moves_to=moves_to,
        )
        for name, input_type, description, step_types, cancels, moves_to in _ACTIONS
    )
