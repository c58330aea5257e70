"""Workers with and without tracing serve one Flow type: each activation stays one trace.

The spec ("One trace per activation"): the activation's root stores its
``traceparent`` in ``AgentTraceContext``, ``RunModel`` "copies it onto each tool
call record it creates", and each tool Step parents its spans from its record.
A root on a Worker without tracing deletes the stored value, so the activation's
later spans start traces of their own instead of joining the previous one.

Each test hands the Steps of one session from Worker to Worker over one SQLite
file: a gate in the model call (or in the tool) holds an attempt until the test
closes that runtime, so the next runtime's Worker runs it. A model attempt that
has not started (no heartbeat, no event) is handed back at once; a tool attempt
heartbeats first, so it is left to its lease.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from dex_agents import AgentSessionFlow, AgentTracingOptions
from dex_agents.adapters.local.engine import DEFAULT_LEASE_DURATION
from dex_agents.app.builtin_loop.definition import AgentDefinition
from dex_agents.app.builtin_loop.flow import builtin_agent_session_options
from dex_agents.app.builtin_loop.function_tools import function_tool
from dex_agents.app.builtin_loop.runner import BuiltinLoopAgentRunner
from dex_agents.app.builtin_loop.scripted_model import (
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
)
from dex_agents.domain.model_io import ModelRequest, ToolResultItem, UserTextItem
from dex_agents.domain.tool_effects import ToolEffect
from dex_agents.local import LocalRuntime
from dex_agents.ports.session_schema import AGENT_TRACE_CONTEXT
from tests.support.retry_intervals import RETRY_INTERVAL_SCALE

POLL = timedelta(milliseconds=20)
SHORT_LEASE = timedelta(seconds=1)


@dataclasses.dataclass
class Gate:
    """Holds every call that passes it while closed, after noting it was reached."""

    closed: bool = False
    reached: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)

    async def passed(self) -> None:
        if self.closed:
            self.reached.set()
            await asyncio.Event().wait()  # until its runtime closes and cancels the attempt


class Workers:
    """One session's Flow type, served with tracing or without, one runtime at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.model_gate = Gate()
        self.tool_gate = Gate()

    def flow(self, *, traced: bool) -> AgentSessionFlow:
        model_gate, tool_gate = self.model_gate, self.tool_gate

        async def respond(request: ModelRequest) -> ScriptedModelReply:
            await model_gate.passed()
            if isinstance(request.items[-1], ToolResultItem):
                return ScriptedModelReply(text="Order 7 was delivered.")
            turn = sum(isinstance(item, UserTextItem) for item in request.items)
            call = ScriptedToolCall("lookup_order", {"order_id": "7"}, call_id=f"look-{turn}")
            return ScriptedModelReply(tool_calls=[call])

        @function_tool(effect=ToolEffect.READ)
        async def lookup_order(order_id: str) -> str:
            """Look up an order by its ID."""
            await tool_gate.passed()
            return "delivered"

        definition = AgentDefinition(
            name="support",
            instructions="Help.",
            model=ScriptedModelClient(respond),
            tools=[lookup_order],
        )
        tracing = (
            AgentTracingOptions(tracer_provider=self.provider)
            if traced
            else AgentTracingOptions(is_enabled=False)
        )
        options = dataclasses.replace(builtin_agent_session_options(definition), tracing=tracing)
        return AgentSessionFlow(
            BuiltinLoopAgentRunner(definition), flow_type="SupportAgent", options=options
        )

    def runtime(
        self, flow: AgentSessionFlow, lease: timedelta = DEFAULT_LEASE_DURATION
    ) -> LocalRuntime:
        # A Step taken over from a closed runtime retries at a hundredth of its policy's interval.
        return LocalRuntime(
            self.path,
            [flow],
            poll_interval=POLL,
            lease_duration=lease,
            retry_interval_scale=RETRY_INTERVAL_SCALE,
        )

    def spans(self, step_type: str) -> list[ReadableSpan]:
        """The exported spans of ``step_type``, leaving out attempts cancelled by a closing runtime."""
        return [
            span
            for span in self.exporter.get_finished_spans()
            if (span.attributes or {}).get("dex.step.type") == step_type
            and span.status.status_code is not StatusCode.ERROR
        ]


def root_traceparent(root: ReadableSpan) -> str:
    context = root.context
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def turn_spans(spans: Sequence[ReadableSpan], turn_id: str) -> list[ReadableSpan]:
    return [span for span in spans if (span.attributes or {}).get("dex.agent.turn.id") == turn_id]


async def test_a_model_call_on_a_worker_without_tracing_keeps_the_tool_in_the_activation(
    tmp_path: Path,
) -> None:
    workers = Workers(tmp_path / "sessions.db")
    # The root (AwaitUserMessage) on a traced Worker, which then stops in the model call.
    traced = workers.flow(traced=True)
    workers.model_gate.closed = True
    async with workers.runtime(traced) as runtime:
        sessions = runtime.sessions(traced)
        await sessions.open_session("s1")
        await sessions.send_user_message("s1", "where is order 7?")
        await workers.model_gate.reached.wait()
    # The model call on a Worker without tracing, which then stops in the tool.
    workers.model_gate.closed = False
    workers.tool_gate.closed = True
    untraced = workers.flow(traced=False)
    # A started tool attempt (it heartbeats first) is left to its lease: a short one, so
    # the next runtime (which looks for lapsed leases every half lease) takes it over soon.
    async with workers.runtime(untraced, lease=SHORT_LEASE) as runtime:
        await workers.tool_gate.reached.wait()
        running = await runtime.sessions(untraced).get_agent_snapshot("s1")
    # The tool, and the turn's end, on a traced Worker again.
    workers.tool_gate.closed = False
    traced = workers.flow(traced=True)
    async with workers.runtime(traced, lease=SHORT_LEASE) as runtime:
        snapshot = await runtime.sessions(traced).wait_for_user("s1")
    assert snapshot.messages[-1].text == "Order 7 was delivered."
    (root,) = workers.spans("AwaitUserMessage")
    (tool,) = workers.spans("CallTool")
    # The record carries the root the traced Worker stored, though its creator had no tracer.
    (record,) = running.tool_calls
    assert record.trace_context == root_traceparent(root)
    assert tool.context.trace_id == root.context.trace_id
    assert tool.parent is not None
    assert tool.parent.span_id == root.context.span_id


async def test_a_root_on_a_worker_without_tracing_leaves_no_stale_parent(
    tmp_path: Path,
) -> None:
    workers = Workers(tmp_path / "sessions.db")
    traced = workers.flow(traced=True)
    async with workers.runtime(traced) as runtime:
        sessions = runtime.sessions(traced)
        await sessions.open_session("s1")
        await sessions.send_user_message("s1", "where is order 7?")
        await sessions.wait_for_user("s1")
    # The second turn's root on a Worker without tracing, which then stops in the model call.
    workers.model_gate.closed = True
    untraced = workers.flow(traced=False)
    async with workers.runtime(untraced) as runtime:
        await runtime.sessions(untraced).send_user_message("s1", "and now?")
        await workers.model_gate.reached.wait()
    # Its model call, tool and turn's end on a traced Worker.
    workers.model_gate.closed = False
    traced = workers.flow(traced=True)
    async with workers.runtime(traced) as runtime:
        sessions = runtime.sessions(traced)
        snapshot = await sessions.wait_for_user("s1")
        stored = await runtime.flow_client.read_attribute("s1", AGENT_TRACE_CONTEXT)
    assert snapshot.state is not None
    assert snapshot.state.turn_count == 2
    assert stored is None
    (first_root,) = workers.spans("AwaitUserMessage")
    second = [
        *turn_spans(workers.spans("RunModel"), "turn-2"),
        *turn_spans(workers.spans("CallTool"), "turn-2"),
    ]
    assert len(second) == 3  # two model calls and the tool
    # Traces of their own: none joins (or is parented by) the first activation's root.
    assert all(span.parent is None for span in second)
    assert all(span.context.trace_id != first_root.context.trace_id for span in second)
