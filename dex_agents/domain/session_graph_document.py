"""The session Flow Definition document that Dex Web draws a session and offers its Actions from.

``session_flow_definition_document(flow_type, action_permission)`` is all a
Worker uploads ("Showing sessions in Dex Web"). Its ``generated_at`` is
``SESSION_FLOW_GRAPH_GENERATED_AT``, the time the graph template last changed,
never the time of the call: the document depends only on its two arguments, so a
restart writes nothing and an upgrade that changes the template replaces the graph.
"""

from __future__ import annotations

from datetime import UTC, datetime

import attrs

from dex_agents.domain.session_graph import (
    SESSION_FLOW_EDGES,
    SESSION_FLOW_NODES,
    SESSION_FLOW_START_STEP_TYPE,
    SessionFlowEdge,
    SessionFlowNode,
)
from dex_agents.domain.session_graph_actions import SessionFlowAction, session_flow_actions
from dex_agents.domain.unicode_text import first_lone_surrogate
from dex_agents.domain.wire import to_json

SESSION_FLOW_GRAPH_GENERATED_AT = datetime(2026, 12, 7, 12, 56, tzinfo=UTC)
"""When the session graph template last changed; every document carries it as ``generated_at``.

Change it whenever ``SESSION_FLOW_NODES``, ``SESSION_FLOW_EDGES`` or the Actions change.
"""


@attrs.frozen(kw_only=True)
class SessionFlowDefinitionDocument:
    """The session Flow Definition Graph of one Flow type, with its Actions.

    ``nodes`` are the session's Steps, ``edges`` their movements, and ``actions``
    the RPCs a person operates, each requiring ``action_permission``.
    """

    flow_type: str
    action_permission: str
    generated_at: datetime
    start_step_type: str
    nodes: tuple[SessionFlowNode, ...]
    edges: tuple[SessionFlowEdge, ...]
    actions: tuple[SessionFlowAction, ...]

    def to_json(self) -> str:
        """The document as the project's canonical JSON text (compact, sorted keys)."""
        return to_json(self)


def _require_unicode(name: str, text: str) -> None:
    # A lone surrogate (from a command line that is not UTF-8) has no UTF-8 form:
    # the rendering could never be written to a file or uploaded.
    index = first_lone_surrogate(text)
    if index is not None:
        raise ValueError(
            f"{name} is not valid Unicode text: it has a lone surrogate "
            f"U+{ord(text[index]):04X} at index {index}"
        )


def validate_flow_type(flow_type: str) -> None:
    """Raise unless ``flow_type`` is a non-blank Flow type name without ``/``, valid Unicode text.

    A rendered graph is written to ``<directory>/<flow_type>.json``, so a ``/``
    would put it in another directory.
    """
    if not isinstance(flow_type, str):
        raise TypeError(f"flow_type must be a str, not {type(flow_type).__name__}")
    _require_unicode("flow_type", flow_type)
    if not flow_type.strip():
        raise ValueError("flow_type must not be blank")
    if "/" in flow_type:
        raise ValueError(f"flow_type must not contain '/': {flow_type!r}")


def validate_action_permission(action_permission: str) -> None:
    """Raise unless ``action_permission`` is a non-blank permission name, valid Unicode text."""
    if not isinstance(action_permission, str):
        raise TypeError(f"action_permission must be a str, not {type(action_permission).__name__}")
    _require_unicode("action_permission", action_permission)
    if not action_permission.strip():
        raise ValueError("action_permission must not be blank")


def session_flow_definition_document(
    flow_type: str, action_permission: str
) -> SessionFlowDefinitionDocument:
    """The session Flow Definition Graph of ``flow_type``, whose Actions need ``action_permission``.

    Pass it in ``WorkerOptions(flow_definitions=...)`` where the SDK has that
    option; otherwise render it with ``render_session_flow_graph``. Raises
    ``ValueError`` for a blank ``flow_type``, one that contains ``/``, or a blank
    ``action_permission``, or either with a lone surrogate, and ``TypeError`` for
    one that is not a ``str``.
    """
    validate_flow_type(flow_type)
    validate_action_permission(action_permission)
    return SessionFlowDefinitionDocument(
        flow_type=flow_type,
        action_permission=action_permission,
        generated_at=SESSION_FLOW_GRAPH_GENERATED_AT,
        start_step_type=SESSION_FLOW_START_STEP_TYPE,
        nodes=SESSION_FLOW_NODES,
        edges=SESSION_FLOW_EDGES,
        actions=session_flow_actions(action_permission),
    )
