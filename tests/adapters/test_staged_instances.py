"""``StateReader.instances`` on the embedded engine: one pass over a map, as ``get_instance`` would read it."""

from __future__ import annotations

import pytest

from dex_agents.adapters.local.staged_state import Snapshot, SnapshotSource, StagedState
from dex_agents.ports.engine import MapLoad
from dex_agents.ports.persistence import AttributeMapDef

NOTES: AttributeMapDef[str] = AttributeMapDef("Notes", str)
OTHER: AttributeMapDef[str] = AttributeMapDef("Other", str)


def _state(*loads: MapLoad) -> StagedState:
    snapshot = Snapshot(
        maps={"Notes": {"b": '"two"', "a": '"one"', "c": '"three"'}, "Other": {"x": '"ex"'}}
    )
    return StagedState("s1", SnapshotSource(snapshot), loads)


def _each(state: StagedState) -> tuple[tuple[str, str | None], ...]:
    return tuple((key, state.get_instance(NOTES, key)) for key in state.instance_keys(NOTES))


def test_a_whole_map_reads_in_key_order() -> None:
    state = _state(MapLoad(NOTES))
    assert state.instances(NOTES) == (("a", "one"), ("b", "two"), ("c", "three"))
    assert state.instances(NOTES) == _each(state)


def test_staged_writes_and_deletes_show_as_get_instance_shows_them() -> None:
    state = _state(MapLoad(NOTES))
    state.set_instance(NOTES, "b", "changed")
    state.set_instance(NOTES, "d", "new")
    state.delete_instance(NOTES, "a")
    state.set_instance(OTHER, "y", "elsewhere")
    assert state.instances(NOTES) == (("b", "changed"), ("c", "three"), ("d", "new"))
    assert state.instances(NOTES) == _each(state)


def test_staged_writes_never_reach_the_snapshot_they_are_read_over() -> None:
    snapshot = Snapshot(maps={"Notes": {"a": '"one"'}})
    state = StagedState("s1", SnapshotSource(snapshot), [MapLoad(NOTES)])
    state.set_instance(NOTES, "b", "two")
    state.delete_instance(NOTES, "a")
    assert state.instances(NOTES) == (("b", "two"),)
    assert snapshot.maps == {"Notes": {"a": '"one"'}}


def test_instances_loaded_one_by_one_are_the_only_ones_read() -> None:
    state = _state(MapLoad(NOTES, "c"), MapLoad(NOTES, "zz"))
    assert state.instances(NOTES) == (("c", "three"),)


def test_a_map_that_was_not_loaded_is_refused() -> None:
    state = _state(MapLoad(NOTES))
    with pytest.raises(LookupError, match="AttributeMap Other was not loaded"):
        state.instances(OTHER)
