"""Renderings of the session Flow Definition document: a Dex Web file and a Graphviz drawing.

Dex Web's ``--flow-rendering-dir`` reads every ``.json`` file in the directory
as a Flow Definition Graph, schema version ``"1.0"`` (``schemaVersion``,
``valid``, ``source``, ``flow``, ``nodes``, ``edges``, ``diagnostics``), and
refuses to start on any other JSON. So ``render_session_flow_graph`` writes the
document in that shape: a ``step`` node per Step, a ``decision`` node per way a
Step moves on or ends (``goTo``, ``goToMany``, ``deadEnd``), ``transition`` and
``failure_transition`` edges, and an ``rpc`` node per Action, carrying its
``requiredPermission``. ``cancel_turn``'s decision names the Steps it cancels.
The document's own canonical JSON is ``SessionFlowDefinitionDocument.to_json``.
"""

from __future__ import annotations

import json
from typing import Any

from dex_agents.domain.session_graph import SessionFlowEdge, SessionFlowEdgeKind, SessionFlowNode
from dex_agents.domain.session_graph_document import (
    SessionFlowDefinitionDocument,
    session_flow_definition_document,
)

FLOW_DEFINITION_GRAPH_SCHEMA_VERSION = "1.0"
"""The Flow Definition Graph schema version every Dex Web ``--flow-rendering-dir`` accepts."""

FLOW_DEFINITION_GRAPH_SOURCE_PATH = "dex_agents/session_graph.py"
"""The ``source.path`` of a rendered graph: the module the graph comes from."""


def _step_id(step_type: str) -> str:
    return f"step:{step_type}"


def _rpc_id(name: str) -> str:
    return f"rpc:{name}"


def _decision(
    node_id: str, parent_id: str, decision_type: str, condition: str | None, phase: str
) -> dict[str, Any]:
    decision: dict[str, Any] = {
        "id": node_id,
        "kind": "decision",
        "name": decision_type,
        "parentId": parent_id,
        "phase": phase,
        "decision": {"type": decision_type},
    }
    if condition is not None:
        decision["condition"] = condition
    return decision


def _step_graph(
    node: SessionFlowNode, edges: tuple[SessionFlowEdge, ...], start_step_type: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    step_id = _step_id(node.step_type)
    step: dict[str, Any] = {
        "id": step_id,
        "kind": "step",
        "name": node.step_type,
        "metadata": {"input": node.input, "description": node.description, "next": node.next},
    }
    if node.step_type == start_step_type:
        step["start"] = True
    nodes: list[dict[str, Any]] = [step]
    graph_edges: list[dict[str, Any]] = []
    # One go_to_many decision per condition: its edges fan out from the same diamond.
    fan_outs: dict[str, str] = {}
    for edge in (edge for edge in edges if edge.source == node.step_type):
        if edge.kind is SessionFlowEdgeKind.FAILURE_ROUTE:
            graph_edges.append(
                {
                    "id": f"failure_transition:{edge.source}:{edge.target}",
                    "kind": "failure_transition",
                    "from": step_id,
                    "to": _step_id(edge.target),
                    "label": edge.label,
                }
            )
            continue
        decision_id = (
            fan_outs.get(edge.label) if edge.kind is SessionFlowEdgeKind.GO_TO_MANY else None
        )
        if decision_id is None:
            decision_id = f"decision:{step_id}:{len(nodes)}"
            many = edge.kind is SessionFlowEdgeKind.GO_TO_MANY
            nodes.append(
                _decision(
                    decision_id, step_id, "goToMany" if many else "goTo", edge.label, "execute"
                )
            )
            if many:
                fan_outs[edge.label] = decision_id
        transition: dict[str, Any] = {
            "id": f"transition:{edge.source}:{edge.target}",
            "kind": "transition",
            "from": decision_id,
            "to": _step_id(edge.target),
            "label": edge.per or edge.label,
        }
        if edge.per is not None:
            transition["multiplicity"] = "×N"
        graph_edges.append(transition)
    if node.end_condition is not None:
        nodes.append(
            _decision(
                f"decision:{step_id}:{len(nodes)}",
                step_id,
                "deadEnd",
                node.end_condition,
                "execute",
            )
        )
    return nodes, graph_edges


def session_flow_definition_graph(document: SessionFlowDefinitionDocument) -> dict[str, Any]:
    """The document as a Flow Definition Graph 1.0 JSON value, the form Dex Web renders."""
    nodes: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    for node in document.nodes:
        step_nodes, step_edges = _step_graph(node, document.edges, document.start_step_type)
        nodes.extend(step_nodes)
        edges.extend(step_edges)
    for action in document.actions:
        rpc_id = _rpc_id(action.name)
        nodes.append(
            {
                "id": rpc_id,
                "kind": "rpc",
                "name": action.name,
                "phase": "rpc",
                "metadata": {
                    "description": action.description,
                    "inputType": action.input_type,
                    "requiredPermission": action.required_permission,
                    "stepTypes": list(action.step_types),
                },
            }
        )
        if not action.moves_to:
            continue
        decision = _decision(f"decision:{rpc_id}:1", rpc_id, "goTo", None, "rpc")
        decision["decision"]["cancellations"] = [
            {"stepId": _step_id(step_type), "scope": "all"} for step_type in action.cancels
        ]
        nodes.append(decision)
        edges.extend(
            {
                "id": f"transition:{action.name}:{target}",
                "kind": "transition",
                "from": decision["id"],
                "to": _step_id(target),
                "label": action.name,
            }
            for target in action.moves_to
        )
    return {
        "schemaVersion": FLOW_DEFINITION_GRAPH_SCHEMA_VERSION,
        "valid": True,
        "source": {"language": "python", "path": FLOW_DEFINITION_GRAPH_SOURCE_PATH},
        "flow": {"name": document.flow_type, "startStepId": _step_id(document.start_step_type)},
        "generatedAt": document.generated_at.isoformat(),
        "nodes": nodes,
        "edges": edges,
        "diagnostics": [],
    }


def render_session_flow_graph(flow_type: str, action_permission: str) -> str:
    """The session Flow Definition Graph of ``flow_type`` as a Dex Web JSON file's text.

    Indented by two spaces, keys sorted, ending in a newline; the same arguments
    always give the same text. Write it to ``<dir>/<flow_type>.json`` and start
    Dex Web with ``--flow-rendering-dir <dir>``. Raises like
    ``session_flow_definition_document``.
    """
    graph = session_flow_definition_graph(
        session_flow_definition_document(flow_type, action_permission)
    )
    return json.dumps(graph, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _quote(*lines: str) -> str:
    escaped = (line.replace("\\", "\\\\").replace('"', '\\"') for line in lines)
    return '"' + "\\n".join(escaped) + '"'


_END = "end"
_EDGE_STYLES = {
    SessionFlowEdgeKind.TRANSITION: "",
    SessionFlowEdgeKind.GO_TO_MANY: ", style=bold",
    SessionFlowEdgeKind.FAILURE_ROUTE: ", color=magenta, fontcolor=magenta",
}


def _action_node(action_id: str, name: str, input_type: str, where: str) -> str:
    return (
        f"    {_quote(action_id)} [shape=hexagon, label={_quote(name, f'({input_type})', where)}];"
    )


def render_session_flow_graph_dot(flow_type: str, action_permission: str) -> str:
    """The session Flow Definition Graph of ``flow_type`` as Graphviz DOT text, for people.

    Steps are boxes (the start Step doubled), ``go_to_many`` edges bold, failure
    routes magenta, ends dashed into one ``end`` point, and Actions hexagons.
    Raises like ``session_flow_definition_document``.
    """
    document = session_flow_definition_document(flow_type, action_permission)
    every_step = tuple(node.step_type for node in document.nodes)
    title = (
        f"{document.flow_type}: session Flow Definition Graph",
        f"generated_at {document.generated_at.isoformat()}",
    )
    lines = [
        f"digraph {_quote(document.flow_type)} {{",
        f"  graph [label={_quote(*title)}, labelloc=t, rankdir=TB];",
        '  node [shape=box, style=rounded, fontname="Helvetica"];',
        '  edge [fontname="Helvetica", fontsize=10];',
    ]
    for node in document.nodes:
        extra = ", peripheries=2" if node.step_type == document.start_step_type else ""
        label = _quote(node.step_type, f"({node.input})")
        lines.append(f"  {_quote(node.step_type)} [label={label}{extra}];")
    lines.append(f"  {_quote(_END)} [shape=doublecircle, label={_quote(_END)}, width=0.3];")
    for edge in document.edges:
        label = _quote(edge.label) if edge.per is None else _quote(edge.label, edge.per)
        lines.append(
            f"  {_quote(edge.source)} -> {_quote(edge.target)} "
            f"[label={label}{_EDGE_STYLES[edge.kind]}];"
        )
    for node in document.nodes:
        if node.end_condition is not None:
            lines.append(
                f"  {_quote(node.step_type)} -> {_quote(_END)} "
                f"[label={_quote(node.end_condition)}, style=dashed];"
            )
    lines.append('  subgraph "cluster_actions" {')
    lines.append(f"    label={_quote(f'Actions (permission {document.action_permission})')};")
    for action in document.actions:
        where = (
            "at every Step"
            if action.step_types == every_step
            else "at " + ", ".join(action.step_types)
        )
        lines.append(_action_node(f"action:{action.name}", action.name, action.input_type, where))
    lines.append("  }")
    for action in document.actions:
        for target in action.moves_to:
            cancels = "cancels " + ", ".join(action.cancels)
            lines.append(
                f"  {_quote(f'action:{action.name}')} -> {_quote(target)} "
                f"[label={_quote(action.name, cancels)}, style=dotted];"
            )
    lines.append("}")
    return "\n".join(lines) + "\n"
