"""``PortableSessionFlow``: one durable agent session Flow type, written against the engine port only.

The public ``dex_agents.AgentSessionFlow`` adds the Dex binding to it
(``dex_agents.composition``); the embedded engine runs either.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from dex_agents.app.options import AgentSessionOptions
from dex_agents.app.rpcs import core_rpcs
from dex_agents.app.session import SessionRuntime
from dex_agents.app.steps import (
    builtin_steps,
    cancel_tool_task,
    compaction_steps,
    run_model,
    start,
    tool_steps,
    tool_tasks,
    turn_control,
    turn_end,
)
from dex_agents.app.turn_control_rpcs import turn_control_rpcs
from dex_agents.domain.events import AgentEvent
from dex_agents.domain.session_graph_document import validate_flow_type
from dex_agents.ports.engine import Rpc, Step
from dex_agents.ports.persistence import StreamDef
from dex_agents.ports.runner import (
    AgentFrameworkRunner,
    ContextCompactionRunner,
    runner_supports_plan_mode,
)
from dex_agents.ports.session_schema import SESSION_SCHEMA, agent_events_stream


def _require_context_compaction_runner(runner: object) -> None:
    if not isinstance(runner, ContextCompactionRunner):
        raise TypeError(
            "a compaction policy needs a runner that implements ContextCompactionRunner"
        )
    # CompactContext awaits the summary. A plain def passed the isinstance check, then
    # made the summary call and failed on the await, on each of the Step's attempts of
    # every turn that compacted: "object ContextSummaryResult can't be used in 'await'".
    if not inspect.iscoroutinefunction(runner.summarize_context):
        raise TypeError(
            "a compaction policy needs a runner that implements ContextCompactionRunner:"
            f" summarize_context of {type(runner).__name__} must be a coroutine function"
            " (async def)"
        )
    # RunModel calls these two without awaiting, before every model call: an async def
    # failed every turn of every session with "must return an int, not coroutine".
    for name in ("estimate_input_tokens", "select_compaction_cutoff"):
        if inspect.iscoroutinefunction(getattr(runner, name)):
            raise TypeError(
                "a compaction policy needs a runner that implements ContextCompactionRunner:"
                f" {name} of {type(runner).__name__} must be a plain function, not a"
                " coroutine function (it runs without I/O)"
            )


_RUNNER_COROUTINES = ("run_model_step", "execute_deferred_tool_call")


def _require_runner(runner: object) -> None:
    # Taken as is, a runner without the contract's methods failed StartAgentSession on
    # each of its attempts, leaving a failed session with no state, which wait_for_user
    # waited on until its timeout.
    name = type(runner).__name__
    methods = ("build_user_message", *_RUNNER_COROUTINES)
    missing = [method for method in methods if not callable(getattr(runner, method, None))]
    if missing:
        raise TypeError(
            f"runner must implement the runner contract (AgentFrameworkRunner): "
            f"{name} has no {', '.join(missing)}"
        )
    for method in _RUNNER_COROUTINES:
        if not inspect.iscoroutinefunction(getattr(runner, method)):
            raise TypeError(
                f"runner must implement the runner contract (AgentFrameworkRunner): "
                f"{method} of {name} must be a coroutine function (async def)"
            )
    if inspect.iscoroutinefunction(runner.build_user_message):  # type: ignore[attr-defined]
        raise TypeError(
            f"runner must implement the runner contract (AgentFrameworkRunner): "
            f"build_user_message of {name} must be a plain function, not a coroutine function"
        )


class PortableSessionFlow:
    """One agent session per Flow run; the Flow ID is the session ID.

    ``runner`` implements the runner contract; ``flow_type`` names the agent
    (one Flow type per agent); ``options`` configure tools, approvals, storage,
    compaction and limits. The session never completes by itself: it waits for
    the next user message after every turn. A runner without the contract's
    methods, ``options`` that are not ``AgentSessionOptions``, or a non-string
    ``flow_type`` raise ``TypeError``; a blank ``flow_type``, or one with ``/``,
    ``ValueError``.
    """

    def __init__(
        self,
        runner: AgentFrameworkRunner[Any],
        *,
        flow_type: str,
        options: AgentSessionOptions | None = None,
    ) -> None:
        if options is None:
            options = AgentSessionOptions()
        elif not isinstance(options, AgentSessionOptions):
            # An empty dict was taken for the defaults, any other value failed as
            # "'dict' object has no attribute 'compaction'".
            raise TypeError(
                f"options must be an AgentSessionOptions or None, not {type(options).__name__}"
            )
        _require_runner(runner)
        # The rule the session graph document applies to the same name: a type the
        # Flow took (5, "  ", a lone surrogate) failed later, as "argument of type 'int'
        # is not iterable", a UnicodeEncodeError when the engine stored it, or a graph
        # that could not be rendered.
        validate_flow_type(flow_type)
        if options.compaction is not None:
            _require_context_compaction_runner(runner)
        if options.plan_mode_enabled and not runner_supports_plan_mode(runner):
            raise TypeError("plan_mode_enabled needs a runner that is a PlanModeRunner")
        self._flow_type = flow_type
        self.runner = runner
        self.options = options
        self._events = agent_events_stream(options.event_stream_capacity_bytes)
        runtime = SessionRuntime(runner, options, self._events, flow_type)
        self.runtime = runtime
        self._start = start.StartAgentSession(runtime)
        self._steps: list[Step[Any]] = [
            self._start,
            start.AwaitUserMessage(runtime),
            run_model.RunModel(runtime),
            compaction_steps.CompactContext(runtime),
            tool_steps.AwaitToolApproval(runtime),
            tool_steps.CallTool(runtime),
            tool_steps.CallSingleAttemptTool(runtime),
            tool_steps.RecordToolFailure(runtime),
            tool_steps.RecordToolOutcomeUnknown(runtime),
            turn_end.ResumeTurn(runtime),
            turn_end.RecordTurnFailure(runtime),
            turn_control.ApplyTurnControl(runtime),
            turn_control.FinishTurnCancellation(runtime),
            cancel_tool_task.CancelToolTask(runtime),
            *builtin_steps.steps(runtime),
            *tool_tasks.steps(runtime),
        ]
        self._rpcs = {rpc.name: rpc for rpc in (*core_rpcs(runtime), *turn_control_rpcs(runtime))}

    @property
    def flow_type(self) -> str:
        """The agent's Flow type."""
        return self._flow_type

    @property
    def start_step(self) -> Step[Any]:
        """``StartAgentSession``."""
        return self._start

    @property
    def steps(self) -> Sequence[Step[Any]]:
        """Every Step of the Flow-shape table this session uses."""
        return self._steps

    @property
    def schema(self) -> Sequence[Any]:
        """The persistence schema shared by every agent Flow type."""
        return SESSION_SCHEMA

    @property
    def stream(self) -> StreamDef[AgentEvent]:
        """The ``AgentEvents`` Stream as the engine port declares it."""
        return self._events

    @property
    def agent_events(self) -> Any:
        """The ``AgentEvents`` Stream (``flow.agent_events``), one per Flow type.

        Here the port's declaration; an engine binding may give its own Stream
        object, as the Dex-bound ``AgentSessionFlow`` does.
        """
        return self._events

    @property
    def rpcs(self) -> Mapping[str, Rpc[Any, Any]]:
        """The session's RPCs by name."""
        return self._rpcs
