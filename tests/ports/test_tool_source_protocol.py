"""The tool source port and its optional methods.

Its typed assignments are also mypy's check that the fakes fit each protocol.
"""

from __future__ import annotations

import pytest

from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from dex_agents.ports.tool_source import CachedToolsSource, DeclaredToolNamesSource, ToolSource
from tests.ports.runner_fakes import EchoRunner
from tests.ports.tool_source_fakes import FakeToolSource, ListingOnlySource
from tests.ports.turn_fakes import turn_context


async def test_a_tool_source_builds_calls_with_the_turn_policies() -> None:
    source: ToolSource = FakeToolSource()
    declared: DeclaredToolNamesSource = FakeToolSource()
    cached: CachedToolsSource = FakeToolSource()
    listed = (await source.list_tools())[0]
    deferred = source.deferred_tool_call(
        turn_context(), tool_call_id="c1", tool_name=listed.name, arguments="{}", listed_tool=listed
    )
    assert deferred.policy == ToolPolicy(ToolEffect.READ)
    assert deferred.tool_source_reference == "files__read"
    assert declared.declared_tool_names() == {"files__read"}
    assert cached.cached_tools() == (listed,)
    assert isinstance(source, ToolSource)


@pytest.mark.parametrize(
    ("source", "is_declared", "is_cached"),
    [(FakeToolSource(), True, True), (ListingOnlySource(), False, False)],
    ids=["with-optional-methods", "listing-only"],
)
def test_the_optional_source_methods_are_found_with_isinstance(
    source: object, is_declared: bool, is_cached: bool
) -> None:
    listing_only: ToolSource = ListingOnlySource()
    assert isinstance(listing_only, ToolSource)
    assert isinstance(source, ToolSource)
    assert isinstance(source, DeclaredToolNamesSource) is is_declared
    assert isinstance(source, CachedToolsSource) is is_cached
    assert not isinstance(EchoRunner(), ToolSource)
