"""``AgentSessionFlow``: the session Flow type, runnable on the embedded engine and on Dex."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dex

from dex_agents.adapters.dex.flow import DexFlow
from dex_agents.app.options import AgentSessionOptions
from dex_agents.app.session_flow import PortableSessionFlow
from dex_agents.composition.tracing import build_session_tracer
from dex_agents.ports.runner import AgentFrameworkRunner


class AgentSessionFlow(PortableSessionFlow, DexFlow):
    """One agent session per Flow run; the Flow ID is the session ID.

    ``runner`` implements the runner contract; ``flow_type`` names the agent
    (one Flow type per agent); ``options`` configure tools, approvals, storage,
    compaction and limits. The session never completes by itself: it waits for
    the next user message after every turn.

    It is a ``dex.Flow``: ``Registry([flow], allow_async_handlers=True)`` accepts
    it and an ``AsyncWorker`` serves it; its RPCs are methods named as in the
    spec's RPC table (``flow.send_user_message``, ...). The embedded engine runs
    the same instance.
    """

    def __init__(
        self,
        runner: AgentFrameworkRunner[Any],
        *,
        flow_type: str,
        options: AgentSessionOptions | None = None,
    ) -> None:
        super().__init__(runner, flow_type=flow_type, options=options)
        self.runtime.tracing.install(build_session_tracer(self.options.tracing))

    @property
    def agent_events(self) -> dex.Stream[Any]:
        """The ``AgentEvents`` Stream (``flow.agent_events``) registered with Dex.

        It is what ``AsyncClient.read_stream(session_id, flow.agent_events)`` takes;
        its values are each event's JSON text (``dex_agents.domain.wire``).
        ``flow.stream`` is the engine port's declaration of the same Stream.
        """
        stream = self.dex_schema.stream
        assert stream is not None  # every session Flow declares AgentEvents
        return stream

    # The RPC methods Dex registers, bound on first use of the Dex binding; declared
    # here so a type checker knows ``client.invoke_rpc(flow.send_user_message, ...)``.
    send_user_message: Callable[..., Any]
    execute_plan: Callable[..., Any]
    steer_user_message: Callable[..., Any]
    delete_queued_message: Callable[..., Any]
    cancel_turn: Callable[..., Any]
    resolve_interrupt: Callable[..., Any]
    answer_question: Callable[..., Any]
    update_session_settings: Callable[..., Any]
    get_agent_snapshot: Callable[..., Any]
    list_agent_messages: Callable[..., Any]
