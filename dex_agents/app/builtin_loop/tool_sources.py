"""Tool sources on the built-in loop: listing, clash checks, and the calls sources build.

In every ``RunModel`` of a chat or executing turn the runner lists each source for
at most ``tool_source_listing_timeout``; a source whose listing raises, takes
longer, or returns a tool the model cannot be offered (not a ``ListedTool``, a
blank name, a schema that is not a JSON object) offers nothing in that call, with
a warning log ("Tool sources"). A call of
a listed tool is built by its source, and the runner stores the source's reference
as ``{"stepwise_tool_source": <source_name>, "reference": ...}`` so the tool Step
and ``PollToolTask`` reach the same source on any Worker without a listing
(``source_references``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import attrs

from dex_agents.app.builtin_loop.source_references import (
    decode_source_reference,
    encode_source_reference,
)
from dex_agents.domain.listed_tools import ListedTool, check_listed_tool_names
from dex_agents.domain.model_io import ModelToolDefinition
from dex_agents.domain.object_memo import ObjectMemo
from dex_agents.domain.runner_outcomes import DeferredToolCall
from dex_agents.domain.state import InteractionMode
from dex_agents.domain.tool_calls import AgentToolCall
from dex_agents.ports.runner import AgentTurnContext
from dex_agents.ports.tool_source import CachedToolsSource, DeclaredToolNamesSource, ToolSource

logger = logging.getLogger(__name__)

DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT = timedelta(seconds=10)
"""``AgentDefinition.tool_source_listing_timeout``: 10 seconds per source listing."""

SOURCE_TOOL_NOT_OFFERED_RESULT = (
    "The tool call was not run: the tool is not offered now, as its tool source does not list it."
)
"""The result of a new call of a replay-only tool: one the turn already called that the live
listing lacks (``SourceToolListing.replay_only_tools``)."""


def check_tool_sources(
    sources: Sequence[ToolSource],
    function_tool_names: Collection[str],
    enabled_built_in_tools: Collection[str],
) -> None:
    """Refuse a source that is not a ``ToolSource``, a repeated ``source_name``, and clashing
    ``declared_tool_names()``, with the clash texts of ``check_listed_tool_names``."""
    seen: set[str] = set()
    for source in sources:
        if not isinstance(source, ToolSource):
            raise TypeError(
                "AgentDefinition.tool_sources must be ToolSource values, "
                f"not {type(source).__name__}"
            )
        name = source.source_name
        if not isinstance(name, str) or not name:
            raise ValueError(
                f"a tool source's source_name must be a non-empty string, not {name!r}"
            )
        if name in seen:
            raise ValueError(f"two tool sources of AgentDefinition are named {name}")
        seen.add(name)
    check_listed_tool_names(
        function_tool_names,
        enabled_built_in_tools,
        [(source.source_name, _declared_tool_names(source)) for source in sources],
    )


def _declared_tool_names(source: ToolSource) -> tuple[str, ...]:
    if not isinstance(source, DeclaredToolNamesSource):
        return ()
    # A bare name was taken letter by letter ("lists a tool named e twice"), and None
    # failed as "'NoneType' object is not iterable", naming no source.
    names: object = source.declared_tool_names()
    if not isinstance(names, Iterable) or isinstance(names, str | bytes):
        raise TypeError(
            f"declared_tool_names of tool source {source.source_name} must return a "
            f"collection of names, not {type(names).__name__}"
        )
    checked = tuple(names)
    for name in checked:
        if not isinstance(name, str) or not name:
            raise ValueError(
                f"declared_tool_names of tool source {source.source_name} returned {name!r}, "
                "not a non-empty tool name"
            )
    return checked


@dataclass(frozen=True)
class SourceToolListing:
    """The tools the sources offered in one ``RunModel``, in ``tool_sources`` order.

    ``listings`` pairs each source with its tools (none when its listing failed).
    ``replay_only_tools`` are the names the turn already called through a source
    that the live listing lacks: a recorded call of one resumes through its stored
    reference, and a new call is answered with ``SOURCE_TOOL_NOT_OFFERED_RESULT``.
    """

    listings: tuple[tuple[ToolSource, tuple[ListedTool, ...]], ...] = ()
    replay_only_tools: frozenset[str] = field(default_factory=frozenset)

    def find(self, name: str) -> tuple[ToolSource, ListedTool] | None:
        """The source and definition offered under ``name``, or ``None``."""
        for source, tools in self.listings:
            for tool in tools:
                if tool.name == name:
                    return source, tool
        return None

    def check_names(
        self, function_tool_names: Collection[str], enabled_built_in_tools: Collection[str]
    ) -> None:
        """``check_listed_tool_names`` of this listing: ``ValueError`` for the first clash."""
        check_listed_tool_names(
            function_tool_names,
            enabled_built_in_tools,
            [
                (source.source_name, tuple(tool.name for tool in tools))
                for source, tools in self.listings
            ],
        )

    def definitions(self) -> list[ModelToolDefinition]:
        """The model definitions of the listed tools, in order (``model_tool_definition``)."""
        return [model_tool_definition(tool) for _, tools in self.listings for tool in tools]


_DEFINED: ObjectMemo[ListedTool, ModelToolDefinition] = ObjectMemo()


def model_tool_definition(tool: ListedTool) -> ModelToolDefinition:
    """The definition the model is offered for ``tool``, made once per ``ListedTool`` object.

    Its schema is a copy through JSON, so the model client gets plain JSON values that
    the source's own mapping does not share, and a schema that is not JSON raises here.
    A source offers the same objects until it lists again (``McpToolSource`` does), and
    copying every schema in every model call cost about 30 us a tool; a definition is
    kept while its tool object lives, and model calls share it, as they share the
    request's other frozen values.
    """
    return _DEFINED.get(tool, _define)


def _define(tool: ListedTool) -> ModelToolDefinition:
    # ListedTool checks no field types, and a source builds it from a server's data: a bad
    # name, description or schema must fail here, where the listing is checked, not as an
    # unnamed error in the model call.
    if not isinstance(tool.name, str) or not tool.name:
        raise ValueError(f"a listed tool's name must be a non-empty string, not {tool.name!r}")
    if not isinstance(tool.description, str):
        raise TypeError(
            f"tool {tool.name}: description must be a string, not {type(tool.description).__name__}"
        )
    if not isinstance(tool.input_schema, Mapping):
        raise TypeError(
            f"tool {tool.name}: input_schema must be a JSON object, "
            f"not {type(tool.input_schema).__name__}"
        )
    try:
        schema = json.loads(json.dumps(dict(tool.input_schema), allow_nan=False))
    except (TypeError, ValueError) as error:
        raise ValueError(f"tool {tool.name}: input_schema is not JSON: {error}") from error
    return ModelToolDefinition(
        name=tool.name, description=tool.description, parameters_schema=schema
    )


def _checked_tools(tools: Iterable[object]) -> tuple[ListedTool, ...]:
    """``tools`` when each is a ``ListedTool`` the model can be offered; else the first error."""
    checked: list[ListedTool] = []
    for tool in tools:
        if not isinstance(tool, ListedTool):
            raise TypeError(f"list_tools returned {type(tool).__name__}, not a ListedTool")
        model_tool_definition(tool)  # made once per tool object: the model call reuses it
        checked.append(tool)
    return tuple(checked)


async def _list_one(source: ToolSource, listing_timeout: timedelta) -> tuple[ListedTool, ...]:
    try:
        tools = await asyncio.wait_for(source.list_tools(), listing_timeout.total_seconds())
        return _checked_tools(tools)
    except TimeoutError:
        logger.warning(
            "tool source %s did not list its tools within %s; it offers no tools in this call",
            source.source_name,
            listing_timeout,
        )
    except Exception:
        logger.warning(
            "tool source %s failed to list its tools; it offers no tools in this call",
            source.source_name,
            exc_info=True,
        )
    return ()


def cached_tool_listing(
    turn: AgentTurnContext,
    sources: Sequence[ToolSource],
    last_listings: Mapping[str, tuple[ListedTool, ...]],
) -> SourceToolListing:
    """What the sources would offer in the turn's next model call, without I/O.

    A source's ``cached_tools()`` when it has one, else ``last_listings`` (the
    runner's last listing of each source, by name); nothing in a planning turn,
    which lists nothing. A ``cached_tools()`` that raises, or returns a tool the
    model cannot be offered, counts the runner's last listing instead, with a
    warning log, so an estimate never fails on a source.
    """
    if turn.interaction_mode is InteractionMode.PLANNING:
        return SourceToolListing()
    listings: list[tuple[ToolSource, tuple[ListedTool, ...]]] = []
    for source in sources:
        tools = last_listings.get(source.source_name, ())
        if isinstance(source, CachedToolsSource):
            try:
                cached = tuple(source.cached_tools())
            except Exception:
                logger.warning(
                    "cached_tools of tool source %s failed; the estimate counts its last listing",
                    source.source_name,
                    exc_info=True,
                )
                cached = None
            try:
                tools = tools if cached is None else _checked_tools(cached)
            except (TypeError, ValueError) as error:
                logger.warning(
                    "cached_tools of tool source %s returned a tool the model cannot be "
                    "offered (%s); the estimate counts its last listing",
                    source.source_name,
                    error,
                )
        listings.append((source, tools))
    return SourceToolListing(tuple(listings))


def _called_source_tools(records: Iterable[AgentToolCall]) -> set[str]:
    return {
        record.tool_name
        for record in records
        if decode_source_reference(record.tool_source_reference) is not None
    }


async def list_tool_sources(
    turn: AgentTurnContext,
    sources: Sequence[ToolSource],
    listing_timeout: timedelta,
    function_tool_names: Collection[str],
) -> SourceToolListing:
    """The tools the sources offer in one ``RunModel``, checked for clashes.

    Only a chat or executing turn lists; a planning turn lists nothing. Every
    source is listed concurrently, each for at most ``listing_timeout``; a listing
    that raises, times out, or returns a tool the model cannot be offered offers
    nothing. A clash raises ``ValueError`` with the
    texts of ``check_listed_tool_names``, before any model request.
    """
    if not sources or turn.interaction_mode is InteractionMode.PLANNING:
        return SourceToolListing()
    tool_lists = await asyncio.gather(*(_list_one(source, listing_timeout) for source in sources))
    listing = SourceToolListing(tuple(zip(sources, tool_lists, strict=True)))
    listing.check_names(function_tool_names, turn.enabled_built_in_tools)
    offered = {tool.name for tools in tool_lists for tool in tools}
    called = _called_source_tools(turn.tool_calls.values())
    return dataclasses.replace(listing, replay_only_tools=frozenset(called - offered))


def source_deferred_tool_call(
    turn: AgentTurnContext,
    source: ToolSource,
    listed_tool: ListedTool,
    *,
    tool_call_id: str,
    arguments: str,
) -> DeferredToolCall:
    """The source's deferred call, with its reference wrapped in the source's name."""
    call = source.deferred_tool_call(
        turn,
        tool_call_id=tool_call_id,
        tool_name=listed_tool.name,
        arguments=arguments,
        listed_tool=listed_tool,
    )
    if not isinstance(call, DeferredToolCall):
        raise TypeError(
            f"tool source {source.source_name} built {type(call).__name__}, not a DeferredToolCall"
        )
    # The model's output pairs its call with a result by ID: a call built under another ID
    # ran, and the model was told its own call's outcome is unknown.
    if (call.tool_call_id, call.tool_name) != (tool_call_id, listed_tool.name):
        raise ValueError(
            f"tool source {source.source_name} built a call of {call.tool_name!r} with ID "
            f"{call.tool_call_id!r} for the model's call of {listed_tool.name!r} with ID "
            f"{tool_call_id!r}"
        )
    return attrs.evolve(
        call,
        tool_source_reference=encode_source_reference(
            source.source_name, call.tool_source_reference
        ),
    )


__all__ = [
    "DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT",
    "SOURCE_TOOL_NOT_OFFERED_RESULT",
    "SourceToolListing",
    "cached_tool_listing",
    "check_tool_sources",
    "list_tool_sources",
    "source_deferred_tool_call",
]
