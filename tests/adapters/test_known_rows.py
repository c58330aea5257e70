"""What a SQLite connection keeps across its transactions (``KnownRows``) is never stale.

Two ``SqliteFlowStore``s on one file are two connections, as two processes
would be: what one commits, the other must see at its next transaction, though
it kept the same rows from before. A transaction that rolls back must leave
nothing it wrote behind in what is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from dex_agents.adapters.local import known_rows
from dex_agents.adapters.local.event_blocks import BLOCK_EVENTS
from dex_agents.adapters.local.sqlite_rows import (
    execution_fields,
    stored_execution_row,
    stored_execution_values,
)
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.ports.flow_rows import ExecutionStatus, FlowStatus, MessageRow
from dex_agents.ports.flow_store import StoreTransaction, StoreWouldWaitError
from dex_agents.ports.store_capabilities import ChangedFlows
from tests.adapters.flow_store_rows import (
    add_executions,
    add_flows,
    at,
    execution,
    flow,
    write_held_open,
)
from tests.adapters.traced_sql import traced_statements

ACTIVE = [ExecutionStatus.READY, ExecutionStatus.RUNNING, ExecutionStatus.WAITING]


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[SqliteFlowStore, SqliteFlowStore]]:
    path = tmp_path / "flows.sqlite3"
    first, second = SqliteFlowStore(path), SqliteFlowStore(path)
    try:
        yield first, second
    finally:
        first.close()
        second.close()


def _everything(tx: StoreTransaction) -> tuple[object, ...]:
    row = tx.get_flow("f1")
    return (
        None if row is None else row.status,
        tx.get_singletons("f1", ["a", "b"]),
        tx.get_value("f1", "a", ""),
        tx.get_values("f1", "m"),
        tx.get_write_once_values("f1", "w"),
        [(row.id, row.status) for row in tx.flow_executions("f1", ACTIVE)],
    )


def _fill(store: SqliteFlowStore) -> list[int]:
    add_flows(store, flow("f1"))

    def work(tx: StoreTransaction) -> None:
        tx.put_value("f1", "a", "", "1")
        tx.put_value("f1", "m", "k1", "x")
        tx.put_value("f1", "w", "k1", "first")

    store.run(work)
    return add_executions(store, execution(), execution(step_type="Other"))


def test_a_commit_of_another_connection_is_seen_at_the_next_transaction(
    two: tuple[SqliteFlowStore, SqliteFlowStore],
) -> None:
    first, second = two
    ids = _fill(first)
    kept = first.read(_everything)  # the first connection keeps all of it now
    assert kept == (
        FlowStatus.RUNNING,
        {"a": "1"},
        "1",
        {"k1": "x"},
        {"k1": "first"},
        [(ids[0], ExecutionStatus.READY), (ids[1], ExecutionStatus.READY)],
    )
    assert first.run(lambda tx: tx.trim_events("Agent", 10)) == 0  # it keeps the size too

    def change(tx: StoreTransaction) -> None:
        row = tx.get_flow("f1")
        assert row is not None
        tx.update_flow(replace(row, status=FlowStatus.STOPPED))
        tx.put_value("f1", "a", "", "2")
        tx.put_value("f1", "b", "", "3")
        tx.delete_value("f1", "m", "k1")
        tx.put_value("f1", "m", "k2", "y")
        tx.put_value("f1", "w", "k2", "second")
        done = tx.get_execution(ids[0])
        assert done is not None
        tx.update_execution(replace(done, status=ExecutionStatus.COMPLETED, finished_at=at(1)))
        tx.insert_execution(execution(step_type="Third", status=ExecutionStatus.WAITING))
        tx.append_event("Agent", "f1", "x" * 30, "test", at(1))

    second.run(change)
    *values, active = first.read(_everything)
    assert values == [
        FlowStatus.STOPPED,
        {"a": "2", "b": "3"},
        "2",
        {"k2": "y"},
        {"k1": "first", "k2": "second"},
    ]
    assert active == [(ids[1], ExecutionStatus.READY), (ids[1] + 1, ExecutionStatus.WAITING)]
    # The event the second wrote is over the capacity, as the second counted its size.
    assert first.run(lambda tx: tx.trim_events("Agent", 10)) == 1


def test_a_write_once_instance_another_connection_deleted_is_not_served_from_kept_text(
    two: tuple[SqliteFlowStore, SqliteFlowStore],
) -> None:
    # A write-once instance is only ever deleted (retention, in any process); the text this
    # connection keeps of it must go with its key, however the instance is asked for.
    first, second = two
    _fill(first)
    first.run(lambda tx: tx.put_value("f1", "w", "k2", "second"))
    assert first.read(lambda tx: tx.get_write_once_values("f1", "w")) == {
        "k1": "first",
        "k2": "second",
    }
    second.run(lambda tx: tx.delete_value("f1", "w", "k1"))

    def reads(tx: StoreTransaction) -> tuple[object, ...]:
        return (
            tx.get_write_once_values("f1", "w", ["k1", "k2"]),
            tx.get_value("f1", "w", "k1"),
            tx.get_write_once_values("f1", "w"),
        )

    assert first.read(reads) == ({"k2": "second"}, None, {"k2": "second"})
    assert first.run(reads) == ({"k2": "second"}, None, {"k2": "second"})


def test_what_a_connection_writes_it_reads_back_from_what_it_keeps(
    two: tuple[SqliteFlowStore, SqliteFlowStore],
) -> None:
    first, second = two
    ids = _fill(first)
    first.read(_everything)

    def change(tx: StoreTransaction) -> None:
        tx.put_value("f1", "b", "", "3")
        tx.put_value("f1", "m", "k0", "z")
        tx.put_value("f1", "w", "k0", "zeroth")
        row = tx.get_execution(ids[1])
        assert row is not None
        tx.update_execution(replace(row, status=ExecutionStatus.RUNNING, lease_owner="me"))

    first.run(change)
    # Read back through what the first keeps, and from the file by the second: the same.
    assert first.read(_everything) == second.read(_everything)
    running = first.read(lambda tx: tx.get_execution(ids[1]))
    assert running is not None
    assert running.lease_owner == "me"


def test_a_rollback_leaves_nothing_it_wrote_in_what_is_kept(
    two: tuple[SqliteFlowStore, SqliteFlowStore],
) -> None:
    first, second = two
    ids = _fill(first)
    before = first.read(_everything)

    def change(tx: StoreTransaction) -> None:
        tx.put_value("f1", "a", "", "lost")
        tx.put_value("f1", "m", "k9", "lost")
        row = tx.get_execution(ids[0])
        assert row is not None
        tx.update_execution(replace(row, status=ExecutionStatus.CANCELLED))
        tx.append_event("Agent", "f1", "x" * 30, "test", at(1))
        tx.trim_events("Agent", 100)

    def undone(tx: StoreTransaction) -> None:
        change(tx)
        raise ValueError("roll it all back")

    with pytest.raises(ValueError, match="roll it all back"):
        first.run(undone)
    assert first.read(_everything) == before
    # And only the work that raised, inside a transaction that commits.
    first.run(lambda tx: tx.run_undoable(lambda: undone(tx)))
    assert first.read(_everything) == before == second.read(_everything)
    assert first.run(lambda tx: tx.trim_events("Agent", 100)) == 0


def test_a_map_a_caller_changes_is_not_changed_in_what_is_kept(
    two: tuple[SqliteFlowStore, SqliteFlowStore],
) -> None:
    first, _ = two
    _fill(first)
    values = first.read(lambda tx: tx.get_values("f1", "m"))
    values["k1"] = "changed by the caller"
    row = first.read(lambda tx: tx.get_flow("f1"))
    assert row is not None
    row.status = FlowStatus.FAILED
    assert first.read(lambda tx: tx.get_values("f1", "m")) == {"k1": "x"}
    kept = first.read(lambda tx: tx.get_flow("f1"))
    assert kept is not None
    assert kept.status is FlowStatus.RUNNING


def test_the_least_recently_used_flows_are_dropped_and_read_again(
    two: tuple[SqliteFlowStore, SqliteFlowStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = two
    store_known = first._known  # the bound is the point of this test
    monkeypatch.setattr(store_known, "_most", 2)
    add_flows(first, *(flow(f"f{n}") for n in range(5)))

    def statuses(tx: StoreTransaction) -> list[object]:
        return [
            (
                row.status if (row := tx.get_flow(f"f{n}")) else None,
                tx.flow_executions(f"f{n}", ACTIVE),
            )
            for n in range(5)
        ]

    first.read(statuses)
    assert len(store_known._flows) == 2
    add_executions(first, execution("f0"), execution("f4"))
    assert first.read(statuses) == second.read(statuses)


def _append(flow_id: str, value: str) -> Callable[[StoreTransaction], int]:
    return lambda tx: tx.append_event("Agent", flow_id, value, "test", at(1))


def test_the_events_a_store_committed_follow_each_other_without_a_read(
    two: tuple[SqliteFlowStore, SqliteFlowStore],
) -> None:
    first, second = two
    add_flows(first, flow("f1"), flow("f2"))
    # The first knows no event before it has read or written one of the session.
    unknown = first.run(_append("f1", '"a"'))
    assert first.event_after("f1", 0) is None
    b = first.run(_append("f1", '"b"'))
    other = first.run(_append("f2", '"x"'))
    c = first.run(_append("f1", '"c"'))
    after_unknown = first.event_after("f1", unknown)
    assert after_unknown is not None
    assert (after_unknown.id, after_unknown.value) == (b, '"b"')
    after_b = first.event_after("f1", b)
    assert after_b is not None
    assert after_b.id == c  # f2's event between them is another session's
    assert first.event_after("f2", other) is None
    # Each is what a read returns.
    read = second.read(lambda tx: tx.events_after("f1", unknown, 10))
    assert [after_unknown, after_b] == list(read)


def test_an_event_of_another_connection_between_breaks_the_link(
    two: tuple[SqliteFlowStore, SqliteFlowStore],
) -> None:
    first, second = two
    add_flows(first, flow("f1"))
    a = first.run(_append("f1", '"a"'))
    second.run(_append("f1", '"from the other"'))
    b = first.run(_append("f1", '"b"'))
    # The first saw the other's commit (data_version moved) and forgot its newest event.
    assert first.event_after("f1", a) is None
    events = first.read(lambda tx: tx.events_after("f1", a, 10))
    assert [event.value for event in events] == ['"from the other"', '"b"']
    assert events[-1].id == b


def test_an_event_whose_work_rolled_back_is_never_offered(
    two: tuple[SqliteFlowStore, SqliteFlowStore],
) -> None:
    first, _ = two
    add_flows(first, flow("f1"))
    a = first.run(_append("f1", '"a"'))

    def undone(tx: StoreTransaction) -> None:
        _append("f1", '"lost"')(tx)
        raise ValueError("undo it")

    first.run(lambda tx: tx.run_undoable(lambda: undone(tx)))
    assert first.event_after("f1", a) is None
    # The rollback forgot what the store knew: the next event is read, the one after linked.
    b = first.run(_append("f1", '"b"'))
    assert first.event_after("f1", a) is None
    c = first.run(_append("f1", '"c"'))
    kept = first.event_after("f1", b)
    assert kept is not None
    assert (kept.id, kept.value) == (c, '"c"')


def test_a_kept_map_that_grows_past_its_bound_is_no_longer_kept(
    two: tuple[SqliteFlowStore, SqliteFlowStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = two
    monkeypatch.setattr(known_rows, "MOST_MAP_CHARS", 10)
    _fill(first)
    assert first.read(lambda tx: tx.get_values("f1", "m")) == {"k1": "x"}
    kept = first._known.peek("f1")  # the bound is the point of this test
    assert kept is not None
    assert "m" in kept.maps
    first.run(lambda tx: tx.put_value("f1", "m", "k2", "y" * 20))
    assert "m" not in kept.maps
    expected = {"k1": "x", "k2": "y" * 20}
    assert first.read(lambda tx: tx.get_values("f1", "m")) == expected
    assert second.read(lambda tx: tx.get_values("f1", "m")) == expected


def test_a_read_that_raises_keeps_what_the_connection_knows(
    two: tuple[SqliteFlowStore, SqliteFlowStore],
) -> None:
    first, _ = two
    _fill(first)
    first.read(_everything)

    def refused(tx: StoreTransaction) -> None:
        tx.get_flow("f1")
        raise LookupError("the caller gives up")

    with pytest.raises(LookupError):
        first.read(refused)
    with traced_statements(first) as statements:
        assert first.read(_everything)[0] is FlowStatus.RUNNING
    # Only the transaction's own statements: every row and value came from what was kept.
    assert [sql for sql in statements if "FROM" in sql.upper()] == []


def _reads(store: SqliteFlowStore, work: Callable[[StoreTransaction], object]) -> list[str]:
    """The tables ``work`` read from in one read transaction of ``store``."""
    with traced_statements(store) as statements:
        store.read(work)
    return sorted({sql.split(" FROM ")[1].split()[0] for sql in statements if " FROM " in sql})


def _session(flow_id: str) -> Callable[[StoreTransaction], object]:
    return lambda tx: (
        tx.get_flow(flow_id),
        tx.get_singletons(flow_id, ["a"]),
        tx.flow_executions(flow_id, ACTIVE),
    )


def _two_sessions(store: SqliteFlowStore) -> None:
    add_flows(store, flow("f1"), flow("f2"))
    add_executions(store, execution("f1"), execution("f2"))

    def work(tx: StoreTransaction) -> None:
        for flow_id in ("f1", "f2"):
            tx.put_value(flow_id, "a", "", '"one"')

    store.run(work)


def test_another_connection_s_commit_forgets_only_the_runs_it_changed(
    two: tuple[SqliteFlowStore, SqliteFlowStore],
) -> None:
    first, second = _f1_kept(two)
    first.read(_session("f2"))
    second.run(lambda tx: tx.put_value("f1", "a", "", '"two"'))
    # The second logged f1 alone: the first reads which runs changed, and f2 from what it kept.
    assert _reads(first, _session("f2")) == ["flow_changes"]
    assert _reads(first, _session("f1")) == ["attribute_values", "flows", "step_executions"]
    assert first.read(lambda tx: tx.get_value("f1", "a", "")) == '"two"'


def test_a_write_that_would_wait_for_another_writer_forgets_nothing(
    two: tuple[SqliteFlowStore, SqliteFlowStore],
) -> None:
    first, second = _f1_kept(two)
    # It never began, so it wrote nothing that a rollback undid: what was kept still holds.
    with write_held_open(second), pytest.raises(StoreWouldWaitError):
        first.try_run_batch([lambda tx: tx.put_value("f1", "a", "", '"two"')])
    assert _reads(first, _session("f1")) == []
    assert first.read(lambda tx: tx.get_value("f1", "a", "")) == '"one"'


def _f1_kept(
    two: tuple[SqliteFlowStore, SqliteFlowStore],
) -> tuple[SqliteFlowStore, SqliteFlowStore]:
    """Both stores, the first keeping session f1 (of ``_two_sessions``) as it read it."""
    first, _ = two
    _two_sessions(first)
    first.read(_session("f1"))
    return two


def _queue_message(flow_id: str, message_id: str) -> Callable[[StoreTransaction], object]:
    return lambda tx: tx.append_message(flow_id, "user", "", message_id, '"hi"', at(1))


def test_another_connection_s_message_or_step_keeps_the_run_s_row_and_values(
    two: tuple[SqliteFlowStore, SqliteFlowStore],
) -> None:
    first, second = _f1_kept(two)
    # A client queues a message and a worker creates a Step: neither writes the state.
    second.run(_queue_message("f1", "m1"))
    add_executions(second, execution("f1", step_execution_id="Step-2"))
    assert _reads(first, _session("f1")) == ["flow_changes", "step_executions"]
    listed = first.read(lambda tx: tx.flow_executions("f1", ACTIVE))
    assert [row.step_execution_id for row in listed] == ["Step-1", "Step-2"]
    assert [row.message_id for row in first.read(_pending("f1"))] == ["m1"]


def test_a_state_write_before_another_change_of_the_run_is_not_taken_for_activity(
    two: tuple[SqliteFlowStore, SqliteFlowStore],
) -> None:
    first, second = _f1_kept(two)
    # The log keeps one row a run: its newest change queued a message, an older one wrote.
    second.run(lambda tx: tx.put_value("f1", "a", "", '"two"'))
    second.run(_queue_message("f1", "m1"))
    assert first.read(lambda tx: tx.get_value("f1", "a", "")) == '"two"'


def _pending(flow_id: str) -> Callable[[StoreTransaction], Sequence[MessageRow]]:
    return lambda tx: tx.pending_messages(flow_id, "user", "")


def _active_row(flow_id: str, execution_id: int) -> tuple[object, ...]:
    row = execution(flow_id, id=execution_id)
    return stored_execution_row(execution_id, stored_execution_values(execution_fields(row)))


def test_a_connection_s_own_commits_are_not_taken_for_another_s(
    two: tuple[SqliteFlowStore, SqliteFlowStore],
) -> None:
    first, second = two
    _two_sessions(first)
    first.read(_session("f2"))
    first.run(lambda tx: tx.put_value("f2", "a", "", '"mine"'))
    second.run(lambda tx: tx.put_value("f1", "a", "", '"theirs"'))
    assert _reads(first, _session("f2")) == ["flow_changes"]
    assert first.read(lambda tx: tx.get_value("f2", "a", "")) == '"mine"'


@pytest.mark.parametrize(
    ("sealed", "capacity"),
    [(False, 10), (True, 10), (True, 42 * 32)],
    ids=["single-events", "a-sealed-block", "part-of-a-block"],
)
def test_a_trim_logs_the_runs_whose_events_it_deleted(
    two: tuple[SqliteFlowStore, SqliteFlowStore], sealed: bool, capacity: int
) -> None:
    first, second = two
    _two_sessions(first)
    # A block is sealed from BLOCK_EVENTS single events; the trim takes part of it.
    for _ in range(BLOCK_EVENTS if sealed else 1):
        first.run(_append("f1", '"' + "x" * 40 + '"'))
    first.read(_session("f1"))
    first.read(_session("f2"))
    assert second.run(lambda tx: tx.trim_events("Agent", capacity)) >= 1
    assert _reads(first, _session("f2")) == ["flow_changes"]
    # A trim changes no run's row or values: those of f1 stay kept, its Stream is read again.
    assert _reads(first, _session("f1")) == ["step_executions"]
    # What the first knows of f1's Stream was read again: its next events follow on.
    first.run(_append("f1", '"after"'))
    events = second.read(lambda tx: tx.events_after("f1", 0, 500))
    assert events[-1].value == '"after"'


def test_a_change_another_connection_logged_in_between_is_never_taken_as_seen() -> None:
    known = known_rows.KnownRows()
    known.begin(1, lambda since: (None, 5))
    assert known.change == 5
    known.committed(6)  # this connection's commit, right after the newest it knew
    assert known.change == 6
    known.committed(8)  # 7 was another connection's, not read yet
    assert known.change == 6
    known.committed(None)
    assert known.change == 6


@pytest.mark.parametrize(
    ("changed", "kept_after", "active_after"),
    [
        ({}, {"f1", "f2"}, {"f1", "f2"}),
        ({"f1": True}, {"f2"}, {"f2"}),
        ({"f1": False}, {"f1", "f2"}, {"f2"}),  # its Steps, Channels or Stream alone
        ({"f1": True, "f2": False, "f3": True}, {"f2"}, set()),
        ({"f1": False, "f2": False}, {"f1", "f2"}, set()),
        (None, set(), set()),  # not known which
    ],
    ids=["none", "one", "one-s-activity", "all-named", "all-activity", "unknown"],
)
def test_a_moved_data_version_forgets_what_was_changed(
    changed: dict[str, bool] | None, kept_after: set[str], active_after: set[str]
) -> None:
    known = known_rows.KnownRows()
    known.begin(1, lambda since: (None, 3))
    for execution_id, flow_id in enumerate(("f1", "f2")):
        known.flow(flow_id).row_known = True
        known.flow(flow_id).singletons["a"] = '"one"'
        known.keep_active(flow_id, [])
        known.put_execution(flow_id, _active_row(flow_id, execution_id))
    known.stream_bytes["Agent"] = 10
    asked: list[int | None] = []

    def changed_since(since: int | None) -> ChangedFlows:
        asked.append(since)
        return changed, 4

    known.begin(1, changed_since)  # the same version: nothing asked, nothing forgotten
    assert asked == []
    assert known.stream_bytes == {"Agent": 10}
    known.begin(2, changed_since)
    assert asked == [3]
    assert {flow_id for flow_id in ("f1", "f2") if known.peek(flow_id)} == kept_after
    for flow_id in kept_after:
        kept = known.peek(flow_id)
        assert kept is not None
        assert kept.row_known
        assert kept.singletons == {"a": '"one"'}
    assert {
        flow_id
        for execution_id, flow_id in enumerate(("f1", "f2"))
        if known.active_execution(execution_id) is not None
    } == active_after
    assert known.stream_bytes == {}
    assert known.change == 4


def test_a_failed_read_of_the_changes_leaves_the_version_unseen() -> None:
    known = known_rows.KnownRows()
    known.begin(1, lambda since: (None, 3))
    known.flow("f1").row_known = True

    def fails(since: int | None) -> ChangedFlows:
        raise OSError("disk I/O error")

    with pytest.raises(OSError, match="disk I/O error"):
        known.begin(2, fails)
    known.begin(2, lambda since: ({"f1": True}, 4))  # asked again, and f1 forgotten then
    assert known.peek("f1") is None
    assert known.change == 4
