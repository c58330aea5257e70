"""``StateReader.instances`` on the embedded engine: one pass over a map, as ``get_instance`` would read it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dex_agents.adapters.local.registry import register_flows
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.adapters.local.staged_state import (
    StagedState,
)
from dex_agents.adapters.local.state_sources import (
    Snapshot,
    SnapshotSource,
    TransactionSource,
    read_snapshot,
)
from dex_agents.builtin_loop import (
    AgentDefinition,
    ScriptedModelReply,
    builtin_agent_session_flow,
)
from dex_agents.domain.model_io import ModelRequest
from dex_agents.ports.engine import MapLoad
from dex_agents.ports.flow_store import StoreTransaction
from dex_agents.ports.persistence import AttributeMapDef
from dex_agents.testing import ScriptedModelClient

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


def test_equal_text_read_in_another_transaction_is_the_same_tuple() -> None:
    # A chunk map read by every model call of a long session is paired and sorted once.
    first = _state(MapLoad(NOTES)).instances(NOTES)
    assert _state(MapLoad(NOTES)).instances(NOTES) is first
    changed = _state(MapLoad(NOTES))
    changed.set_instance(NOTES, "b", "changed")
    assert changed.instances(NOTES) == (("a", "one"), ("b", "changed"), ("c", "three"))
    assert _state(MapLoad(NOTES)).instances(NOTES) == first


def test_a_map_read_again_with_no_write_between_is_the_same_tuple() -> None:
    state = _state(MapLoad(NOTES), MapLoad(OTHER))
    first = state.instances(NOTES)
    assert state.instances(NOTES) is first
    state.set_instance(OTHER, "y", "elsewhere")  # another map's write leaves it
    assert state.instances(NOTES) is first


@pytest.mark.parametrize(
    ("write", "expected"),
    [
        (lambda state: state.set_instance(NOTES, "b", "changed"), ("one", "changed", "three")),
        (lambda state: state.set_instance(NOTES, "d", "new"), ("one", "two", "three", "new")),
        (lambda state: state.delete_instance(NOTES, "a"), ("two", "three")),
    ],
)
def test_a_write_staged_after_a_read_shows_in_the_next_read(
    write: Callable[[StagedState], None], expected: tuple[str, ...]
) -> None:
    state = _state(MapLoad(NOTES))
    assert state.instances(NOTES) == (("a", "one"), ("b", "two"), ("c", "three"))
    write(state)
    assert tuple(value for _, value in state.instances(NOTES)) == expected
    assert state.instances(NOTES) == _each(state)


def test_values_that_are_not_shared_are_decoded_afresh_for_each_read() -> None:
    # A dict may be changed by whoever holds it: two reads must not share one.
    counts: AttributeMapDef[dict[str, int]] = AttributeMapDef("Counts", dict[str, int])
    snapshot = Snapshot(maps={"Counts": {"a": '{"n":1}'}})
    state = StagedState("s1", SnapshotSource(snapshot), [MapLoad(counts)])
    first, second = state.instances(counts), state.instances(counts)
    assert first == second == (("a", {"n": 1}),)
    assert first[0][1] is not second[0][1]


def test_instances_loaded_one_by_one_are_the_only_ones_read() -> None:
    state = _state(MapLoad(NOTES, "c"), MapLoad(NOTES, "zz"))
    assert state.instances(NOTES) == (("c", "three"),)


def test_a_map_that_was_not_loaded_is_refused() -> None:
    state = _state(MapLoad(NOTES))
    with pytest.raises(LookupError, match="AttributeMap Other was not loaded"):
        state.instances(OTHER)


def test_an_rpc_reads_a_write_once_map_through_what_the_store_keeps(tmp_path: Path) -> None:
    # A Step's load and an RPC's read of the message window must give the same text
    # objects: the decoded-value cache finds those by identity, and equal texts that are
    # other objects cost a compare of every message.
    store = SqliteFlowStore(tmp_path / "s.sqlite3")
    try:

        def write(tx: StoreTransaction) -> None:
            tx.put_value("s1", "Chunks", "00001", '"one"')
            tx.put_value("s1", "Chunks", "00002", '"two"')
            tx.put_value("s1", "Notes", "a", '"note"')

        store.run(write)
        chunks: AttributeMapDef[str] = AttributeMapDef("Chunks", str, write_once=True)
        loaded = store.run(lambda tx: read_snapshot(tx, "s1", [chunks], [MapLoad(chunks)]))
        by_step = loaded.maps["Chunks"]

        def rpc_reads(tx: StoreTransaction) -> tuple[dict[str, str], dict[str, str]]:
            source = TransactionSource(tx, "s1", (), frozenset({"Chunks"}))
            return source.values("Chunks"), source.values("Notes")

        by_rpc, notes = store.run(rpc_reads)
        assert by_rpc == by_step == {"00001": '"one"', "00002": '"two"'}
        assert all(by_rpc[key] is by_step[key] for key in by_step)
        assert notes == {"a": '"note"'}
    finally:
        store.close()


def _never_called(request: ModelRequest) -> ScriptedModelReply:
    raise AssertionError("no model call is made")


def test_the_session_flow_registers_its_write_once_maps() -> None:
    definition = AgentDefinition(
        name="notes", instructions="Take notes.", model=ScriptedModelClient(_never_called)
    )
    session_flow = builtin_agent_session_flow(definition, flow_type="Notes")
    flow = register_flows([session_flow])["Notes"]
    assert flow.write_once_map_names == {"AgentMessages", "AgentMessageChunks"}
