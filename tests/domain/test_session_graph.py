"""The session Flow Definition Graph: the Flow-shape table as data, the document, and its renderings."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.domain.session_graph import (
    SESSION_FLOW_EDGES,
    SESSION_FLOW_NODES,
    SessionFlowEdgeKind,
)
from dex_agents.domain.session_graph_document import (
    SESSION_FLOW_GRAPH_GENERATED_AT,
    SessionFlowDefinitionDocument,
    session_flow_definition_document,
)
from dex_agents.domain.session_graph_rendering import (
    render_session_flow_graph,
    render_session_flow_graph_dot,
    session_flow_definition_graph,
)
from dex_agents.domain.wire import from_json

END = "(ends)"

# The Flow-shape Step table, row by row: (Step, input, the targets its "Next" cell names).
# "Ends" is END and "itself" the Step; failure routes are in FAILURE_ROUTES.
STEP_TABLE: list[tuple[str, str, set[str]]] = [
    ("StartAgentSession", "AgentSessionStartInput", {"RunModel", "AwaitUserMessage"}),
    ("AwaitUserMessage", "none", {"ApplyTurnControl", "RunModel", "AwaitUserMessage"}),
    (
        "RunModel",
        "none",
        {
            "AwaitUserMessage",
            "ApplyTurnControl",
            "CompactContext",
            # go_to_many with one Step per tool call plus ResumeTurn
            "AwaitToolApproval",
            "CallTool",
            "CallSingleAttemptTool",
            "AwaitQuestionAnswer",
            "AwaitTimer",
            "ResumeTurn",
        },
    ),
    ("CompactContext", "CompactContextInput", {"RunModel"}),
    ("AwaitToolApproval", "tool call ID", {"CallTool", "CallSingleAttemptTool", END}),
    (
        "AwaitQuestionAnswer",
        "tool call ID",
        {
            END,
            "CallTool",
            "CallSingleAttemptTool",
            "PollToolTask",
            "FinishTurnCancellation",
            "AwaitQuestionAnswer",
        },
    ),
    ("AwaitTimer", "tool call ID", {END}),
    ("CallTool", "tool call ID", {END, "AwaitQuestionAnswer", "PollToolTask"}),
    ("CallSingleAttemptTool", "tool call ID", {END, "AwaitQuestionAnswer", "PollToolTask"}),
    (
        "PollToolTask",
        "tool call ID",
        {END, "PollToolTask", "AwaitQuestionAnswer", "FinishTurnCancellation"},
    ),
    ("RecordToolFailure", "tool call ID", {END}),
    ("RecordToolOutcomeUnknown", "tool call ID", {END}),
    ("ResumeTurn", "expected result count", {"RunModel", "ApplyTurnControl", "ResumeTurn"}),
    ("ApplyTurnControl", "none", {"RunModel", "AwaitUserMessage"}),
    ("RecordTurnFailure", "the failing Step's input, ignored", {"AwaitUserMessage"}),
    (
        "FinishTurnCancellation",
        "turn ID",
        {END, "ApplyTurnControl", "CancelToolTask", "AwaitToolApproval", "AwaitQuestionAnswer"},
    ),
    ("CancelToolTask", "tool call ID", {END}),
]

# Movements sessions make that the table's "Next" cells leave out and the spec's prose names.
BEYOND_THE_TABLE = {
    # "Ending or continuing a turn": a ContinueTurn "moves to RunModel again".
    ("RunModel", "RunModel"),
    # AwaitToolApproval: "A Timer that fires before the deadline waits again."
    ("AwaitToolApproval", "AwaitToolApproval"),
    # durable_wait records waiting_for_timer, then waits on the Timer in the next execution.
    ("AwaitTimer", "AwaitTimer"),
    # ApplyTurnControl "Consumes every steered message and stale wake", one Channel a wait.
    ("ApplyTurnControl", "ApplyTurnControl"),
    # "Spend limits": a refused summary call ends the turn, as RecordTurnFailure would.
    ("CompactContext", "AwaitUserMessage"),
}

FAILURE_ROUTES = {
    ("RunModel", "RecordTurnFailure"),
    ("CompactContext", "RecordTurnFailure"),
    ("CallTool", "RecordToolFailure"),
    ("CallSingleAttemptTool", "RecordToolOutcomeUnknown"),
    ("PollToolTask", "RecordToolFailure"),
    ("PollToolTask", "RecordToolOutcomeUnknown"),
    ("CancelToolTask", "RecordToolOutcomeUnknown"),
    # Beyond the table: the Steps that wait for a person end their call by its effect,
    # and a durable wait's (a read) records failed (docs/spec-differences.md, "Flow shape").
    ("AwaitToolApproval", "RecordToolFailure"),
    ("AwaitToolApproval", "RecordToolOutcomeUnknown"),
    ("AwaitQuestionAnswer", "RecordToolFailure"),
    ("AwaitQuestionAnswer", "RecordToolOutcomeUnknown"),
    ("AwaitTimer", "RecordToolFailure"),
}

GO_TO_MANY = {
    ("RunModel", "AwaitToolApproval"),
    ("RunModel", "CallTool"),
    ("RunModel", "CallSingleAttemptTool"),
    ("RunModel", "AwaitQuestionAnswer"),
    ("RunModel", "AwaitTimer"),
    ("RunModel", "ResumeTurn"),
    ("FinishTurnCancellation", "CancelToolTask"),
}

# Conditions the arrow diagram names, by edge.
DIAGRAM_LABELS = [
    ("RunModel", "AwaitUserMessage", "TurnCompleted"),
    ("RunModel", "ApplyTurnControl", "steered or cancelled"),
    ("ResumeTurn", "ApplyTurnControl", "steered or cancelled"),
    ("AwaitUserMessage", "ApplyTurnControl", "steer"),
    ("RunModel", "AwaitToolApproval", "ToolCallsRequested"),
    ("RunModel", "ResumeTurn", "ToolCallsRequested"),
    ("CallTool", "AwaitQuestionAnswer", "ToolInputRequested"),
    ("PollToolTask", "AwaitQuestionAnswer", "ToolInputRequested"),
    ("CallTool", "PollToolTask", "ToolTaskStarted"),
    ("RunModel", "RecordTurnFailure", "failure route"),
    ("CallTool", "RecordToolFailure", "failure route"),
]

# The RPC table's operated RPCs: (input type, the Steps where each applies).
TURN_STEPS = {
    "RunModel",
    "CompactContext",
    "AwaitToolApproval",
    "AwaitQuestionAnswer",
    "AwaitTimer",
    "CallTool",
    "CallSingleAttemptTool",
    "PollToolTask",
    "ResumeTurn",
}
EVERY_STEP = {row[0] for row in STEP_TABLE}
ACTIONS: dict[str, tuple[str, set[str]]] = {
    "send_user_message": ("AgentUserMessage", EVERY_STEP),
    "steer_user_message": ("SteerUserMessageRequest", {"AwaitUserMessage"} | TURN_STEPS),
    "delete_queued_message": ("DeleteQueuedMessageRequest", EVERY_STEP),
    "cancel_turn": ("CancelTurnRequest", TURN_STEPS),
    "resolve_interrupt": ("ResolveInterruptRequest", {"AwaitToolApproval", "AwaitQuestionAnswer"}),
    "answer_question": ("AnswerQuestionRequest", {"AwaitQuestionAnswer"}),
    "execute_plan": ("ExecutePlanRequest", {"AwaitUserMessage"}),
}


def _targets(step_type: str, *, failure: bool) -> set[str]:
    return {
        edge.target
        for edge in SESSION_FLOW_EDGES
        if edge.source == step_type and (edge.kind is SessionFlowEdgeKind.FAILURE_ROUTE) == failure
    }


def test_every_step_of_the_table_is_a_node_once_in_table_order() -> None:
    assert [node.step_type for node in SESSION_FLOW_NODES] == [row[0] for row in STEP_TABLE]


@pytest.mark.parametrize(("step_type", "step_input", "next_targets"), STEP_TABLE)
def test_each_row_has_its_input_and_exactly_its_next_steps(
    step_type: str, step_input: str, next_targets: set[str]
) -> None:
    node = next(node for node in SESSION_FLOW_NODES if node.step_type == step_type)
    assert node.input == step_input
    assert node.description
    ends = {END} if node.end_condition is not None else set()
    beyond = {target for source, target in BEYOND_THE_TABLE if source == step_type}
    assert _targets(step_type, failure=False) | ends == next_targets | beyond


def test_failure_routes_are_exactly_the_tables_and_the_waits() -> None:
    failures = {
        (edge.source, edge.target)
        for edge in SESSION_FLOW_EDGES
        if edge.kind is SessionFlowEdgeKind.FAILURE_ROUTE
    }
    assert failures == FAILURE_ROUTES


def test_go_to_many_edges_are_the_fan_outs() -> None:
    fan_outs = {
        (edge.source, edge.target)
        for edge in SESSION_FLOW_EDGES
        if edge.kind is SessionFlowEdgeKind.GO_TO_MANY
    }
    assert fan_outs == GO_TO_MANY


def test_only_resume_turn_starts_once_per_tool_calls_requested() -> None:
    once = [
        edge.target
        for edge in SESSION_FLOW_EDGES
        if edge.kind is SessionFlowEdgeKind.GO_TO_MANY and edge.per is None
    ]
    assert once == ["ResumeTurn"]


@pytest.mark.parametrize(("source", "target", "label"), DIAGRAM_LABELS)
def test_edges_carry_the_diagrams_conditions(source: str, target: str, label: str) -> None:
    (edge,) = [e for e in SESSION_FLOW_EDGES if (e.source, e.target) == (source, target)]
    assert edge.label == label


def test_edges_join_known_steps_and_never_repeat() -> None:
    known = {node.step_type for node in SESSION_FLOW_NODES}
    pairs = Counter((edge.source, edge.target) for edge in SESSION_FLOW_EDGES)
    assert {step for pair in pairs for step in pair} <= known
    assert max(pairs.values()) == 1
    assert all(edge.label for edge in SESSION_FLOW_EDGES)


def test_the_actions_are_the_operated_rpcs_with_their_steps_and_permission() -> None:
    document = session_flow_definition_document("SupportAgent", "support-agent.operate")
    assert [action.name for action in document.actions] == list(ACTIONS)
    for action in document.actions:
        input_type, step_types = ACTIONS[action.name]
        assert action.input_type == input_type
        assert set(action.step_types) == step_types
        assert action.required_permission == "support-agent.operate"


def test_cancel_turn_cancels_the_model_call_compaction_and_waits_then_finishes() -> None:
    document = session_flow_definition_document("SupportAgent", "support-agent.operate")
    moves = {action.name: (action.cancels, action.moves_to) for action in document.actions}
    assert moves.pop("cancel_turn") == (
        (
            "RunModel",
            "CompactContext",
            "RecordTurnFailure",
            "AwaitToolApproval",
            "AwaitQuestionAnswer",
            "AwaitTimer",
            "PollToolTask",
        ),
        ("FinishTurnCancellation",),
    )
    assert set(moves.values()) == {((), ())}


def test_the_document_carries_the_template_time_not_the_call_time() -> None:
    assert datetime(2026, 12, 7, 12, 56, tzinfo=UTC) == SESSION_FLOW_GRAPH_GENERATED_AT
    assert SESSION_FLOW_GRAPH_GENERATED_AT.utcoffset() == timedelta(0)
    document = session_flow_definition_document("SupportAgent", "support-agent.operate")
    assert document.generated_at is SESSION_FLOW_GRAPH_GENERATED_AT
    assert document.flow_type == "SupportAgent"
    assert document.action_permission == "support-agent.operate"
    assert document.start_step_type == "StartAgentSession"
    assert document.nodes == SESSION_FLOW_NODES
    assert document.edges == SESSION_FLOW_EDGES


def test_the_document_is_deterministic_and_round_trips_through_the_wire() -> None:
    first = session_flow_definition_document("SupportAgent", "support-agent.operate")
    second = session_flow_definition_document("SupportAgent", "support-agent.operate")
    assert first == second
    text = first.to_json()
    assert text == second.to_json()
    assert from_json(text, SessionFlowDefinitionDocument) == first
    data = json.loads(text)
    assert data["generated_at"] == "2026-12-07T12:56:00+00:00"
    assert data["edges"][0] == {
        "source": "StartAgentSession",
        "target": "RunModel",
        "kind": "transition",
        "label": "non-blank initial_message",
        "per": None,
    }


@pytest.mark.parametrize(
    ("flow_type", "action_permission", "error", "message"),
    [
        ("", "support-agent.operate", ValueError, "flow_type must not be blank"),
        ("  ", "support-agent.operate", ValueError, "flow_type must not be blank"),
        (
            "agents/SupportAgent",
            "support-agent.operate",
            ValueError,
            "flow_type must not contain '/': 'agents/SupportAgent'",
        ),
        ("SupportAgent", "", ValueError, "action_permission must not be blank"),
        ("SupportAgent", "\t", ValueError, "action_permission must not be blank"),
        (None, "support-agent.operate", TypeError, "flow_type must be a str, not NoneType"),
        ("SupportAgent", 7, TypeError, "action_permission must be a str, not int"),
        # A command line that is not UTF-8 decodes to lone surrogates, which no file can hold.
        (
            "Support\udcffAgent",
            "p",
            ValueError,
            "flow_type is not valid Unicode text: it has a lone surrogate U+DCFF at index 7",
        ),
        (
            "SupportAgent",
            "\ud800",
            ValueError,
            "action_permission is not valid Unicode text: it has a lone surrogate U+D800 at index 0",
        ),
    ],
)
def test_invalid_arguments_are_refused_by_name(
    flow_type: Any, action_permission: Any, error: type[Exception], message: str
) -> None:
    for build in (
        session_flow_definition_document,
        render_session_flow_graph,
        render_session_flow_graph_dot,
    ):
        with pytest.raises(error) as raised:
            build(flow_type, action_permission)
        assert str(raised.value) == message


def _graph() -> dict[str, Any]:
    result: dict[str, Any] = json.loads(
        render_session_flow_graph("SupportAgent", "support-agent.operate")
    )
    return result


def test_the_rendering_passes_dex_webs_flow_definition_checks() -> None:
    graph = _graph()
    # What Dex Web's --flow-rendering-dir requires of every .json file it reads.
    assert graph["schemaVersion"] == "1.0"
    assert graph["valid"] is True
    assert graph["source"] == {"language": "python", "path": "dex_agents/session_graph.py"}
    assert graph["flow"] == {"name": "SupportAgent", "startStepId": "step:StartAgentSession"}
    assert graph["diagnostics"] == []
    assert graph["generatedAt"] == "2026-12-07T12:56:00+00:00"
    ids = [node["id"] for node in graph["nodes"]]
    assert len(ids) == len(set(ids))
    edge_ids = [edge["id"] for edge in graph["edges"]]
    assert len(edge_ids) == len(set(edge_ids))
    for edge in graph["edges"]:
        assert edge["from"] in ids
        assert edge["to"] in ids
    for node in graph["nodes"]:
        assert node.get("parentId", node["id"]) in ids


def test_the_rendering_draws_every_step_movement_end_and_action() -> None:
    graph = _graph()
    nodes = {node["id"]: node for node in graph["nodes"]}
    steps = [node["name"] for node in graph["nodes"] if node["kind"] == "step"]
    assert steps == [row[0] for row in STEP_TABLE]
    assert nodes["step:StartAgentSession"]["start"] is True
    assert sum(1 for node in graph["nodes"] if node.get("start")) == 1

    def owner(node_id: str) -> str:
        return str(nodes[node_id].get("parentId", node_id)).removeprefix("step:")

    moves = {
        (owner(edge["from"]), edge["to"].removeprefix("step:"), edge["kind"])
        for edge in graph["edges"]
        if edge["from"].startswith(("step:", "decision:step:"))
    }
    expected = {
        (
            edge.source,
            edge.target,
            "failure_transition" if edge.kind == "failure_route" else "transition",
        )
        for edge in SESSION_FLOW_EDGES
    }
    assert moves == expected
    ends = {owner(node["id"]) for node in graph["nodes"] if node["name"] == "deadEnd"}
    assert ends == {row[0] for row in STEP_TABLE if END in row[2]}
    (fan_out,) = [
        node for node in graph["nodes"] if node["name"] == "goToMany" and "RunModel" in node["id"]
    ]
    assert fan_out["condition"] == "ToolCallsRequested"
    fanned = [edge for edge in graph["edges"] if edge["from"] == fan_out["id"]]
    assert len(fanned) == 6
    assert {edge.get("multiplicity") for edge in fanned} == {"×N", None}

    rpcs = {node["name"]: node for node in graph["nodes"] if node["kind"] == "rpc"}
    assert list(rpcs) == list(ACTIONS)
    for name, rpc in rpcs.items():
        assert rpc["metadata"]["requiredPermission"] == "support-agent.operate"
        assert set(rpc["metadata"]["stepTypes"]) == ACTIONS[name][1]
    (cancel,) = [n for n in graph["nodes"] if n.get("parentId") == "rpc:cancel_turn"]
    assert [c["stepId"] for c in cancel["decision"]["cancellations"]] == [
        "step:RunModel",
        "step:CompactContext",
        "step:RecordTurnFailure",
        "step:AwaitToolApproval",
        "step:AwaitQuestionAnswer",
        "step:AwaitTimer",
        "step:PollToolTask",
    ]
    (finish,) = [e for e in graph["edges"] if e["from"] == cancel["id"]]
    assert finish["to"] == "step:FinishTurnCancellation"


def test_the_rendering_is_pretty_sorted_json_ending_in_a_newline() -> None:
    text = render_session_flow_graph("SupportAgent", "support-agent.operate")
    assert text.startswith('{\n  "diagnostics": [],\n')
    assert text.endswith("}\n")
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_the_dex_web_graph_is_built_from_the_document() -> None:
    document = session_flow_definition_document("SupportAgent", "support-agent.operate")
    assert session_flow_definition_graph(document) == _graph()


def test_the_dot_drawing_has_every_step_edge_end_and_action() -> None:
    text = render_session_flow_graph_dot("SupportAgent", "support-agent.operate")
    lines = text.splitlines()
    assert lines[0] == 'digraph "SupportAgent" {'
    assert lines[-1] == "}"
    assert text.endswith("}\n")
    assert text.count("{") == text.count("}")
    assert (
        '  "StartAgentSession" [label="StartAgentSession\\n(AgentSessionStartInput)", peripheries=2];'
        in lines
    )
    for edge in SESSION_FLOW_EDGES:
        assert any(line.startswith(f'  "{edge.source}" -> "{edge.target}" [') for line in lines)
    ends = [line for line in lines if line.endswith("style=dashed];") and '-> "end"' in line]
    assert len(ends) == sum(1 for row in STEP_TABLE if END in row[2])
    assert '    label="Actions (permission support-agent.operate)";' in lines
    for name in ACTIONS:
        assert f'"action:{name}" [shape=hexagon' in text
    assert (
        '  "action:cancel_turn" -> "FinishTurnCancellation" [label="cancel_turn\\ncancels RunModel, '
        "CompactContext, RecordTurnFailure, AwaitToolApproval, AwaitQuestionAnswer, AwaitTimer, "
        'PollToolTask", '
        "style=dotted];" in lines
    )


def test_dot_quotes_escape_the_flow_type() -> None:
    text = render_session_flow_graph_dot('Say "hi" \\ agent', "p")
    assert text.startswith('digraph "Say \\"hi\\" \\\\ agent" {\n')


_NAMES = st.text(
    st.characters(exclude_categories=["Cs"], exclude_characters="/"), min_size=1, max_size=20
).filter(str.strip)


@settings(max_examples=60, deadline=None)
@given(flow_type=_NAMES, action_permission=_NAMES)
def test_any_valid_arguments_render_the_same_bytes_every_time(
    flow_type: str, action_permission: str
) -> None:
    text = render_session_flow_graph(flow_type, action_permission)
    assert text == render_session_flow_graph(flow_type, action_permission)
    graph = json.loads(text)
    assert graph["flow"]["name"] == flow_type
    permissions = {
        node["metadata"]["requiredPermission"] for node in graph["nodes"] if node["kind"] == "rpc"
    }
    assert permissions == {action_permission}
    document = session_flow_definition_document(flow_type, action_permission)
    assert from_json(document.to_json(), SessionFlowDefinitionDocument) == document
    assert render_session_flow_graph_dot(flow_type, action_permission).startswith("digraph ")
