"""Tool sources for the Step-mode framework adapters ("Connector tools", "Tool sources").

The OpenAI Agents, Pydantic AI, LangGraph and Google ADK adapters share
``FrameworkToolSourceRouter``: it lists the sources in each ``RunModel``, refuses
a source tool that repeats a framework tool or another source's tool, builds each
call through its source, and routes the stored call, its tool Step options, its
task polls and its task cancellation back to that source. The adapter only offers
the listed tools as native tools whose bodies never run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from datetime import timedelta

import attrs

from dex_agents.app.builtin_loop.source_references import (
    decode_source_reference,
    encode_source_reference,
    execute_source_call,
    poll_source_task,
    route_source_call,
)
from dex_agents.app.builtin_loop.tool_sources import (
    DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT,
    SOURCE_TOOL_NOT_OFFERED_RESULT,
    SourceToolListing,
    check_tool_sources,
    list_tool_sources,
    source_deferred_tool_call,
)
from dex_agents.domain.runner_outcomes import (
    DeferredToolCall,
    DeferredToolOutcome,
    ToolTaskPollOutcome,
)
from dex_agents.domain.tool_calls import AgentToolCall
from dex_agents.domain.tool_step_options import ToolCallStepOptions
from dex_agents.ports.runner import (
    AgentTurnContext,
    DeferredToolExecution,
    ToolCallStepOptionsProvider,
    ToolTaskCancellation,
    ToolTaskCanceller,
    ToolTaskPoll,
)
from dex_agents.ports.tool_source import ToolSource


class FrameworkToolSourceRouter:
    """A framework adapter's tool sources: listing, building calls, and routing them back.

    ``sources`` are checked as ``AgentDefinition.tool_sources`` are: each must be a
    ``ToolSource`` with a unique ``source_name``, and ``declared_tool_names()`` must
    not clash. Each ``RunModel`` calls ``list_tools`` once and offers
    ``listing.definitions()`` as native tools. For each tool call of the response,
    the adapter asks ``not_offered_result`` first: a new call of a replay-only tool
    is answered inside the framework with the text it returns
    (``SOURCE_TOOL_NOT_OFFERED_RESULT``), never in a tool Step; every other call of
    a source tool becomes ``deferred_tool_call``. The tool Step, ``PollToolTask``
    and ``cancel_turn`` reach the call's source through the stored reference, on
    any Worker and whatever the order of ``sources``.
    """

    def __init__(
        self,
        sources: Sequence[ToolSource],
        *,
        listing_timeout: timedelta = DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT,
    ) -> None:
        if not isinstance(listing_timeout, timedelta) or listing_timeout <= timedelta(0):
            raise ValueError(
                f"listing_timeout must be a positive timedelta, not {listing_timeout!r}"
            )
        sources = tuple(sources)
        check_tool_sources(sources, (), ())
        self._sources = sources
        self._by_name = {source.source_name: source for source in sources}
        self._listing_timeout = listing_timeout

    @property
    def sources(self) -> tuple[ToolSource, ...]:
        """The sources, in the order their tools are offered."""
        return self._sources

    @property
    def listing_timeout(self) -> timedelta:
        """How long each source's listing may take in one ``RunModel``."""
        return self._listing_timeout

    async def list_tools(
        self, turn: AgentTurnContext, framework_tool_names: Collection[str]
    ) -> SourceToolListing:
        """The tools the sources offer in this ``RunModel``, checked for clashes.

        Every source is listed for at most ``listing_timeout``; one whose listing
        raises or takes longer offers nothing, with a warning log. A planning turn
        lists nothing. A source tool that repeats one of ``framework_tool_names``
        raises ``ValueError`` ``tool <name> of a tool source uses the name of a
        function tool``; one that repeats another source's tool, ``two tool sources
        list a tool named <name>``; one that repeats an enabled built-in tool,
        ``tool <name> uses the name of an enabled built-in tool``.
        ``replay_only_tools`` holds the tools the turn already called through a
        source that this listing lacks.
        """
        return await list_tool_sources(
            turn, self._sources, self._listing_timeout, framework_tool_names
        )

    def not_offered_result(
        self, turn: AgentTurnContext, tool_call_id: str, tool_name: str, listing: SourceToolListing
    ) -> str | None:
        """``SOURCE_TOOL_NOT_OFFERED_RESULT`` for a new call of a replay-only tool, else ``None``.

        The adapter answers such a call inside the framework with this text. A call
        the turn already recorded is not new: it resumes through its stored reference.
        """
        if listing.find(tool_name) is not None or tool_name not in listing.replay_only_tools:
            return None
        if tool_call_id in turn.tool_calls:
            return None
        return SOURCE_TOOL_NOT_OFFERED_RESULT

    def deferred_tool_call(
        self,
        turn: AgentTurnContext,
        tool_call_id: str,
        tool_name: str,
        arguments: str,
        listing: SourceToolListing,
    ) -> DeferredToolCall:
        """The call built by the source that listed ``tool_name``, its reference wrapped.

        The source gets the definition ``listing`` offered as ``listed_tool``. A
        recorded call of a replay-only tool is rebuilt by the source named in its
        stored reference, with ``listed_tool=None`` and a turn whose record of the call
        carries the source's own reference. A new call of a replay-only tool
        raises ``ValueError``: answer it with ``not_offered_result`` instead. A name
        no source listed raises ``LookupError``.
        """
        listed = listing.find(tool_name)
        if listed is not None:
            source, listed_tool = listed
            return source_deferred_tool_call(
                turn, source, listed_tool, tool_call_id=tool_call_id, arguments=arguments
            )
        if tool_name in listing.replay_only_tools:
            recorded = turn.tool_calls.get(tool_call_id)
            if recorded is None or recorded.tool_name != tool_name:
                raise ValueError(
                    f"tool {tool_name} is replay-only: its tool source does not list it now, "
                    f"so the new call {tool_call_id} must be answered inside the framework "
                    "with SOURCE_TOOL_NOT_OFFERED_RESULT, not deferred"
                )
            return self._rebuild(turn, recorded)
        raise LookupError(f"no tool source listed a tool named {tool_name} in this call")

    def _rebuild(self, turn: AgentTurnContext, recorded: AgentToolCall) -> DeferredToolCall:
        routed = route_source_call(self._by_name, recorded)
        if routed is None:
            raise ValueError(
                f"tool call {recorded.tool_call_id} of {recorded.tool_name} has no "
                "tool source reference"
            )
        source, own = routed
        # The source finds the record with its own reference, as in execute and poll:
        # a source whose listing lacks the tool rebuilds the call from it.
        own_turn = dataclasses.replace(turn, tool_calls={**turn.tool_calls, own.tool_call_id: own})
        call = source.deferred_tool_call(
            own_turn,
            tool_call_id=recorded.tool_call_id,
            tool_name=recorded.tool_name,
            arguments=recorded.arguments,
            listed_tool=None,
        )
        if not isinstance(call, DeferredToolCall):
            raise TypeError(
                f"tool source {source.source_name} built {type(call).__name__}, "
                "not a DeferredToolCall"
            )
        return attrs.evolve(
            call,
            tool_source_reference=encode_source_reference(
                source.source_name, call.tool_source_reference
            ),
        )

    def is_source_call(self, record: AgentToolCall) -> bool:
        """Whether a stored call was built by a tool source (of this or another Worker)."""
        return decode_source_reference(record.tool_source_reference) is not None

    async def execute_deferred_tool_call(
        self, call: DeferredToolExecution
    ) -> DeferredToolOutcome | None:
        """Run a source's call in its source, with the source's own reference.

        ``None`` when the call is no source's (the adapter runs its own tool);
        ``LookupError`` when this Worker lacks the stored source, so the call's
        effect class decides the outcome.
        """
        return await execute_source_call(self._by_name, call)

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome | None:
        """Poll a source call's task in its source; ``None`` and ``LookupError`` as for execute."""
        return await poll_source_task(self._by_name, poll)

    def tool_call_step_options(self, record: AgentToolCall) -> ToolCallStepOptions | None:
        """The source's tool Step options of its call; ``None`` when the source has none.

        ``None`` also for a call that is no source's; ``LookupError`` when this
        Worker lacks the stored source.
        """
        routed = route_source_call(self._by_name, record)
        if routed is None:
            return None
        source, inner = routed
        if not isinstance(source, ToolCallStepOptionsProvider):
            return None
        return source.tool_call_step_options(inner)

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> bool:
        """Cancel a source call's task in its source, best-effort.

        Returns whether a source took the cancellation: ``False`` for a call that is
        no source's or whose source cannot cancel. ``LookupError`` when this Worker
        lacks the stored source.
        """
        routed = route_source_call(self._by_name, cancellation.tool_call)
        if routed is None:
            return False
        source, inner = routed
        if not isinstance(source, ToolTaskCanceller):
            return False
        await source.cancel_tool_task(dataclasses.replace(cancellation, tool_call=inner))
        return True


__all__ = ["FrameworkToolSourceRouter"]
