"""``BuiltinLoopAgentRunner``: the runner contract for an ``AgentDefinition`` ("Built-in agent loop").

Each ``RunModel`` makes exactly one model call, with the input rebuilt from
committed state only: the instructions, every stored item, the plan note before
the turn's items, and the results of the previous model response from the final
records. Items are stored as they appear (``ToolCallsRequested.new_messages``), so
the run state holds only the turn's model call count and the count of
consecutive continuations after continued answers.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Sequence

from dex_agents.app.builtin_loop import source_references, tool_sources
from dex_agents.app.builtin_loop.compaction import BuiltinLoopCompaction
from dex_agents.app.builtin_loop.conversation import (
    RunState,
    turn_conversation,
    without_images,
)
from dex_agents.app.builtin_loop.definition import (
    AgentDefinition,
    InstructionContext,
    TurnContinuationContext,
)
from dex_agents.app.builtin_loop.items import (
    model_output_message,
    tool_result_message,
    user_text_message,
)
from dex_agents.app.builtin_loop.request_prefixes import REQUEST_PREFIXES, ItemsPrefix
from dex_agents.app.builtin_loop.tool_calls import BuiltinLoopToolCalls, check_own_images
from dex_agents.domain.builtin_tools import (
    BuiltInTool,
    check_no_reserved_tool_names,
)
from dex_agents.domain.errors import ToolExecutionError
from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.listed_tools import ListedTool
from dex_agents.domain.messages import FrameworkMessage
from dex_agents.domain.model_io import (
    ModelInputItem,
    ModelOutputItem,
    ModelRequest,
    ModelResponse,
    ModelToolChoice,
    ToolResultItem,
    UserTextItem,
)
from dex_agents.domain.plans import PlanStatus
from dex_agents.domain.runner_outcomes import (
    AgentTurnOutcome,
    ToolCallsRequested,
    ToolTaskPollOutcome,
    TurnCompleted,
    TurnContinued,
)
from dex_agents.domain.state import InteractionMode
from dex_agents.domain.turns import (
    TurnContinuationAction,
    TurnContinuationDecision,
    decide_continuation,
    model_call_limit_result,
    model_call_offers_tools,
)
from dex_agents.domain.usage import AgentUsage
from dex_agents.ports.media_store import MediaStore, load_images
from dex_agents.ports.model_client import model_supports_forced_tool_choice
from dex_agents.ports.runner import (
    AgentTurnContext,
    ToolTaskCancellation,
    ToolTaskCanceller,
    ToolTaskPoll,
)


class BuiltinLoopAgentRunner(BuiltinLoopCompaction, BuiltinLoopToolCalls):
    """The runner of an ``AgentDefinition``: one model call per ``RunModel``.

    Function tools run in their own tool Steps through
    ``execute_deferred_tool_call``; enabled built-in tools are offered and routed
    by the session. ``media_store`` reads the bytes of the images the input
    references and reaches function tools through ``ToolCallContext``.
    """

    def __new__(
        cls, definition: AgentDefinition, *, media_store: MediaStore | None = None
    ) -> BuiltinLoopAgentRunner:
        # The session polls tool tasks only of a runner that is a ToolTaskPoller, and only
        # tool sources start tasks: an agent with sources gets the polling runner.
        # Likewise the session shows images only through an ImageUserMessageBuilder, which
        # a runner is only with a media store to read them back from.
        has_sources = isinstance(definition, AgentDefinition) and bool(definition.tool_sources)
        if cls is BuiltinLoopAgentRunner:
            cls = _RUNNER_CLASSES[(has_sources, media_store is not None)]
        return super().__new__(cls)

    def __init__(self, definition: AgentDefinition, *, media_store: MediaStore | None = None):
        if not isinstance(definition, AgentDefinition):
            raise TypeError(
                f"BuiltinLoopAgentRunner needs an AgentDefinition, not {type(definition).__name__}"
            )
        # A directory path given for the store was taken, and every turn with an image
        # then failed as "'str' object has no attribute 'get_image'".
        if media_store is not None and not isinstance(media_store, MediaStore):
            raise TypeError(
                "BuiltinLoopAgentRunner: media_store must be a MediaStore or None "
                f"(such as LocalDirectoryMediaStore), not {type(media_store).__name__}"
            )
        self.definition = definition
        self.media_store = media_store
        self._sources = {source.source_name: source for source in definition.tool_sources}
        # Each source's tools in this runner's last RunModel, for estimate_input_tokens.
        self._last_listings: dict[str, tuple[ListedTool, ...]] = {}

    @property
    def supports_plan_mode(self) -> bool:
        """``True``: a planning turn offers only ``write_todos``."""
        return True

    def build_user_message(self, text: str) -> FrameworkMessage:
        """The turn's first message: a ``user_text`` item."""
        return user_text_message(text)

    def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        """The results of the previous model response that are not stored yet."""
        return [tool_result_message(result) for result in turn_conversation(turn).previous_results]

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Make one model call from committed state; see the module docstring."""
        definition = self.definition
        check_no_reserved_tool_names(
            (tool.name for tool in definition.tools), turn.enabled_built_in_tools
        )
        run_state = RunState.loads(turn.framework_run_state)
        conversation = turn_conversation(turn)
        items = conversation.items
        stored_first: list[FrameworkMessage] = [
            tool_result_message(result) for result in conversation.previous_results
        ]
        consecutive = run_state.consecutive_continuations
        if conversation.previous_results:
            decision = await self._decide(
                turn, True, conversation.previous_output, conversation.previous_results, consecutive
            )
            if decision.action is TurnContinuationAction.END_TURN:
                return TurnCompleted(new_messages=stored_first, usage=AgentUsage())
            if decision.action is TurnContinuationAction.CONTINUE_WITH_MESSAGE:
                assert decision.message is not None
                items.append(UserTextItem(text=decision.message))
                stored_first.append(user_text_message(decision.message))
            consecutive = decision.consecutive_continuations
        offers_tools = model_call_offers_tools(
            run_state.model_calls, definition.max_model_calls_per_turn
        )
        listing = tool_sources.SourceToolListing()
        if offers_tools:
            listing = await tool_sources.list_tool_sources(
                turn,
                definition.tool_sources,
                definition.tool_source_listing_timeout,
                [tool.name for tool in definition.tools],
            )
            for source, tools in listing.listings:
                self._last_listings[source.source_name] = tools
        forced = offers_tools and self._forces_write_todos(turn, run_state.model_calls)
        response = await self._call_model(
            turn,
            items,
            offers_tools,
            listing,
            forced,
            has_images=conversation.has_images,
            prefix=conversation.prefix,
        )
        model_calls = run_state.model_calls + 1
        new_messages = stored_first + [model_output_message(item) for item in response.output]
        metadata = response.model_call_metadata
        if response.tool_calls:
            if not offers_tools:
                limit_text = model_call_limit_result(definition.max_model_calls_per_turn)
                new_messages += [
                    tool_result_message(
                        ToolResultItem(
                            tool_call_id=call.tool_call_id,
                            tool_name=call.tool_name,
                            output=limit_text,
                        )
                    )
                    for call in response.tool_calls
                ]
                return TurnCompleted(new_messages, response.usage, model_call_metadata=metadata)
            return ToolCallsRequested(
                RunState(model_calls, 0).dumps(),
                [self._deferred(turn, call, listing) for call in response.tool_calls],
                response.usage,
                new_messages=new_messages,
                model_call_metadata=metadata,
            )
        stopped = response.stopped_error
        if stopped is not None:
            # No answer the model meant (filtered, or cut empty at the token limit),
            # and the same request ends so again: the turn fails, naming why, keeping
            # only items that hold something (line breaks alone hold nothing).
            kept = [item for item in response.output if (item.text or "").strip() or item.reasoning]
            return TurnCompleted(
                stored_first + [model_output_message(item) for item in kept],
                response.usage,
                model_call_metadata=metadata,
                turn_error=stopped,
            )
        decision = await self._decide(turn, False, list(response.output), [], consecutive)
        if decision.action is TurnContinuationAction.CONTINUE_WITH_MESSAGE:
            assert decision.message is not None
            new_messages.append(user_text_message(decision.message))
            return TurnContinued(
                RunState(model_calls, decision.consecutive_continuations).dumps(),
                new_messages,
                response.usage,
                model_call_metadata=metadata,
            )
        return TurnCompleted(
            new_messages,
            response.usage,
            model_call_metadata=metadata,
            turn_error=decision.turn_error,
        )

    def _forces_write_todos(self, turn: AgentTurnContext, model_calls: int) -> bool:
        """``planning_tool_choice`` ``"required"``: the first call of a planning turn, no draft.

        Not for a model that ``resolve_model`` picked from the session settings and
        that refuses a forced tool choice: ``AgentDefinition`` checked only
        ``model``, and the refusal would fail every attempt of the turn.
        """
        definition = self.definition
        return (
            definition.planning_tool_choice == "required"
            and turn.interaction_mode is InteractionMode.PLANNING
            and model_calls == 0
            and BuiltInTool.WRITE_TODOS in turn.enabled_built_in_tools
            and (turn.plan is None or turn.plan.status is not PlanStatus.DRAFT)
            and model_supports_forced_tool_choice(
                definition.model_for(turn.session_settings), definition.model_settings
            )
        )

    async def _call_model(
        self,
        turn: AgentTurnContext,
        items: list[ModelInputItem],
        offers_tools: bool,
        listing: tool_sources.SourceToolListing,
        forced: bool = False,
        *,
        has_images: bool = True,
        prefix: ItemsPrefix | None = None,
    ) -> ModelResponse:
        definition = self.definition
        settings = turn.session_settings
        instructions = definition.instructions_for(
            InstructionContext(
                flow_id=turn.flow_id,
                turn_id=turn.turn_id,
                session_settings=settings,
                interaction_mode=turn.interaction_mode,
            )
        )
        if self.media_store is None and has_images:
            # Without a store a tool source's references stay stored for display only.
            items = [without_images(item) for item in items]
            prefix = None  # new item objects: no walk kept them
        request = ModelRequest(
            instructions=instructions,
            items=tuple(items),
            tools=tuple(self._tools(turn, offers_tools, listing)),
            tool_choice=ModelToolChoice.REQUIRED if forced else ModelToolChoice.AUTO,
            settings=definition.model_settings,
            max_output_tokens=definition.max_output_tokens,
        )
        if self.media_store is not None and request.image_references:
            # Read right before the call: a failed read fails this attempt, which retries.
            image_bytes = await load_images(self.media_store, request.image_references)
            request = ModelRequest(
                instructions=request.instructions,
                items=request.items,
                tools=request.tools,
                tool_choice=request.tool_choice,
                settings=request.settings,
                image_bytes=image_bytes,
                max_output_tokens=request.max_output_tokens,
            )
        with REQUEST_PREFIXES.noting(request.items, prefix):
            response = await definition.model_for(settings).call_model(request, turn.events)
        if not isinstance(response, ModelResponse):
            raise TypeError(
                f"the model client of agent {definition.name} returned "
                f"{type(response).__name__}, not a ModelResponse"
            )
        return response

    async def _decide(
        self,
        turn: AgentTurnContext,
        called_tools: bool,
        model_output: Sequence[ModelOutputItem],
        tool_results: Sequence[ToolResultItem],
        consecutive: int,
    ) -> TurnContinuationDecision:
        hook = self.definition.decide_turn_continuation
        if hook is None:
            return decide_continuation(called_tools, "default", consecutive)
        decision: object = hook(
            TurnContinuationContext(
                flow_id=turn.flow_id,
                turn_id=turn.turn_id,
                session_settings=turn.session_settings,
                model_output=tuple(model_output),
                tool_results=tuple(tool_results),
            )
        )
        if inspect.isawaitable(decision):
            decision = await decision
        return decide_continuation(called_tools, decision, consecutive)


class _SourcePollingRunner(BuiltinLoopAgentRunner):
    """The runner of an agent with tool sources: it also polls and cancels their tool tasks."""

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Poll the task in the source that built the call; function tools start no tasks."""
        routed = await source_references.poll_source_task(self._sources, poll)
        if routed is None:
            raise ToolExecutionError(
                f"tool {poll.tool_call.tool_name} belongs to no tool source and starts no tasks"
            )
        check_own_images(self.media_store, poll.tool_call.tool_name, routed)
        return routed

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        """Forward ``cancel_turn``'s cancellation to the call's source, if it can cancel."""
        routed = source_references.route_source_call(self._sources, cancellation.tool_call)
        if routed is None:
            return
        source, record = routed
        if isinstance(source, ToolTaskCanceller):
            await source.cancel_tool_task(dataclasses.replace(cancellation, tool_call=record))


class _ImageRunner(BuiltinLoopAgentRunner):
    """The runner of an agent with a media store: an ``ImageUserMessageBuilder``."""

    @property
    def image_store_uri(self) -> str:
        """The ``store_uri`` of the media store the runner reads images from."""
        assert self.media_store is not None  # only built with one
        return self.media_store.store_uri

    def build_user_message_with_images(
        self, text: str, images: Sequence[AgentImageReference]
    ) -> FrameworkMessage:
        """The turn's first message: a ``user_text`` item with its image references."""
        return user_text_message(text, images)


class _SourcePollingImageRunner(_SourcePollingRunner, _ImageRunner):
    """The runner of an agent with tool sources and a media store."""


_RUNNER_CLASSES: dict[tuple[bool, bool], type[BuiltinLoopAgentRunner]] = {
    (False, False): BuiltinLoopAgentRunner,
    (True, False): _SourcePollingRunner,
    (False, True): _ImageRunner,
    (True, True): _SourcePollingImageRunner,
}
"""The runner class of (has tool sources, has a media store)."""

__all__ = ["BuiltinLoopAgentRunner"]
