"""Show sessions in Dex Web: the session Flow Definition Graph and its renderings.

Dex Web draws a session and offers its Actions from the session Flow Definition
Graph ("Showing sessions in Dex Web"). The spec's SDK 1.45.0 uploads it from the
Worker with ``WorkerOptions(flow_definitions=[session_flow_definition_document(
flow_type, action_permission)])``. Dex SDK 1.23.0, the SDK this release runs on,
has no ``WorkerOptions.flow_definitions``, so nothing is uploaded: render the graph
to a file instead, with ``render_session_flow_graph`` or the
``dex-agents-session-graph`` command, and start Dex Web with
``--flow-rendering-dir`` naming its directory::

    dex-agents-session-graph SupportAgent support-agent.operate --output-dir build/flows
    # then start Dex Web with: --flow-rendering-dir build/flows

The file is a Flow Definition Graph of schema version ``"1.0"``, the form that
directory takes. ``render_session_flow_graph_dot`` draws the same graph in Graphviz
DOT for people. Every document carries ``SESSION_FLOW_GRAPH_GENERATED_AT``, the
time the graph template last changed, so the same arguments always render the
same bytes and only an upgrade changes them.
"""

from __future__ import annotations

from dex_agents.domain.session_graph import (
    SESSION_FLOW_EDGES,
    SESSION_FLOW_NODES,
    SESSION_FLOW_START_STEP_TYPE,
    SessionFlowEdge,
    SessionFlowEdgeKind,
    SessionFlowNode,
)
from dex_agents.domain.session_graph_actions import SessionFlowAction, session_flow_actions
from dex_agents.domain.session_graph_document import (
    SESSION_FLOW_GRAPH_GENERATED_AT,
    SessionFlowDefinitionDocument,
    session_flow_definition_document,
)
from dex_agents.domain.session_graph_rendering import (
    FLOW_DEFINITION_GRAPH_SCHEMA_VERSION,
    render_session_flow_graph,
    render_session_flow_graph_dot,
    session_flow_definition_graph,
)

__all__ = [
    "FLOW_DEFINITION_GRAPH_SCHEMA_VERSION",
    "SESSION_FLOW_EDGES",
    "SESSION_FLOW_GRAPH_GENERATED_AT",
    "SESSION_FLOW_NODES",
    "SESSION_FLOW_START_STEP_TYPE",
    "SessionFlowAction",
    "SessionFlowDefinitionDocument",
    "SessionFlowEdge",
    "SessionFlowEdgeKind",
    "SessionFlowNode",
    "render_session_flow_graph",
    "render_session_flow_graph_dot",
    "session_flow_actions",
    "session_flow_definition_document",
    "session_flow_definition_graph",
]
