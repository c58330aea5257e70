"""Both ``FlowStore`` implementations give the same results for any sequence of transactions."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.ports.flow_rows import ExecutionStatus, FlowStatus
from dex_agents.ports.flow_store import FlowStore, StoreTransaction
from tests.adapters.flow_store_rows import at, execution, flow

FLOW_IDS = ("f1", "f2")
STATUSES = tuple(ExecutionStatus)
times = st.integers(min_value=0, max_value=6).map(at)
optional_times = st.none() | times

operations = st.one_of(
    st.tuples(st.just("insert_flow"), st.sampled_from(FLOW_IDS), st.sampled_from(FlowStatus)),
    st.tuples(st.just("update_flow"), st.sampled_from(FLOW_IDS), st.sampled_from(FlowStatus)),
    st.tuples(st.just("put_value"), st.sampled_from(FLOW_IDS), st.sampled_from(("", "k1", "k2"))),
    st.tuples(
        st.just("delete_value"), st.sampled_from(FLOW_IDS), st.sampled_from(("", "k1", "k2"))
    ),
    st.tuples(
        st.just("write_values"),
        st.sampled_from(FLOW_IDS),
        st.dictionaries(
            st.tuples(st.sampled_from(("attr", "other")), st.sampled_from(("", "k1", "k2"))),
            st.none() | st.sampled_from(('"a"', '"b"')),
        ),
    ),
    st.tuples(
        st.just("append_message"),
        st.sampled_from(FLOW_IDS),
        st.sampled_from(("", "k1", "k2")),
        st.sampled_from(("m1", "m2", "m3", "m4")),
        times,
    ),
    st.tuples(
        st.just("consume"),
        st.sampled_from(FLOW_IDS),
        st.sampled_from(("", "k1", "k2")),
        st.integers(min_value=1, max_value=2),
    ),
    st.tuples(st.just("delete_message"), st.sampled_from(FLOW_IDS), st.sampled_from(("m1", "m2"))),
    st.tuples(
        st.just("insert_execution"),
        st.sampled_from(FLOW_IDS),
        st.sampled_from(STATUSES),
        optional_times,
        optional_times,
        st.sampled_from((None, "w1", "w2")),
        st.booleans(),
    ),
    st.tuples(
        st.just("update_execution"),
        st.integers(min_value=1, max_value=6),
        st.sampled_from(STATUSES),
        optional_times,
        optional_times,
    ),
    st.tuples(st.just("next_step_number"), st.sampled_from(FLOW_IDS), st.sampled_from("AB")),
    st.tuples(
        st.just("acquire_lock"),
        st.sampled_from(FLOW_IDS),
        st.sampled_from(("n1", "n2")),
        st.integers(min_value=1, max_value=3),
    ),
    st.tuples(st.just("release_locks"), st.integers(min_value=1, max_value=3)),
    st.tuples(
        st.just("append_event"),
        st.sampled_from(("T1", "T2")),
        st.sampled_from(FLOW_IDS),
        st.text(alphabet="aé", max_size=4),
    ),
    st.tuples(
        st.just("trim_events"), st.sampled_from(("T1", "T2")), st.integers(min_value=0, max_value=8)
    ),
)


def apply(tx: StoreTransaction, operation: tuple[Any, ...]) -> object:
    name, *args = operation
    if name in ("insert_flow", "update_flow"):
        return getattr(tx, name)(flow(args[0], args[1]))
    if name == "put_value":
        tx.put_value(args[0], "attr", args[1], f'"{args[1]}"')
        return None
    if name == "delete_value":
        tx.delete_value(args[0], "attr", args[1])
        return None
    if name == "write_values":
        tx.write_values(args[0], args[1])
        return None
    if name == "append_message":
        return tx.append_message(args[0], "ch", args[1], args[2], "1", args[3])
    if name == "consume":
        seqs = [row.seq for row in tx.pending_messages(args[0], "ch", args[1])[: args[2]]]
        tx.consume_messages(seqs)
        return seqs
    if name == "insert_execution":
        flow_id, status, not_before, timer_at, owner, cancel = args
        row = execution(flow_id, status=status, not_before=not_before, timer_at=timer_at)
        return tx.insert_execution(
            replace(row, lease_owner=owner, lease_expires_at=timer_at, cancel_requested=cancel)
        )
    if name == "update_execution":
        execution_id, status, not_before, timer_at = args
        old = tx.get_execution(execution_id) or replace(execution(), id=execution_id)
        tx.update_execution(replace(old, status=status, not_before=not_before, timer_at=timer_at))
        return None
    if name == "append_event":
        flow_type, flow_id, value = args
        return tx.append_event(flow_type, flow_id, value, "source", at(len(value)))
    return getattr(tx, name)(*args)


def everything(tx: StoreTransaction) -> dict[str, object]:
    keys = ("", "k1", "k2")
    return {
        "flows": tx.list_flows(),
        "values": [tx.get_values(f, name) for f in FLOW_IDS for name in ("attr", "other")],
        "value": [tx.get_value(f, "attr", "") for f in FLOW_IDS],
        "pending": [tx.pending_messages(f, "ch", k) for f in FLOW_IDS for k in keys],
        "keys": [tx.pending_channel_keys(f, "ch") for f in FLOW_IDS],
        "executions": [tx.flow_executions(f) for f in FLOW_IDS],
        "claimable": [tx.claimable_executions(at(n), 3) for n in (0, 3, 6)],
        "timers": [tx.due_timer_executions(at(n)) for n in (0, 3, 6)],
        "leases": [tx.expired_lease_executions(at(n)) for n in (0, 3, 6)],
        "leased": [tx.leased_executions(owner) for owner in ("w1", "w2")],
        "cancel_requested": [tx.cancel_requested_executions(owner) for owner in ("w1", "w2")],
        "next_timer_at": tx.next_timer_at(),
        "locks": [tx.lock_holder(f, n) for f in FLOW_IDS for n in ("n1", "n2")],
        "events": [tx.events_after(f, 0, 100) for f in FLOW_IDS],
        "event": [tx.get_event(n) for n in range(1, 8)],
    }


def outcome_in(tx: StoreTransaction, operation: tuple[Any, ...]) -> object:
    try:
        return apply(tx, operation)
    except (ValueError, LookupError) as error:
        return (type(error), str(error))


def outcome(store: FlowStore, work: Callable[[StoreTransaction], object]) -> object:
    try:
        return store.run(work)
    except (ValueError, LookupError, RuntimeError) as error:
        return (type(error), str(error))


@settings(max_examples=60, deadline=None)
@given(
    transactions=st.lists(
        st.tuples(st.lists(operations, min_size=1, max_size=5), st.booleans()), max_size=6
    )
)
def test_both_stores_give_the_same_results(
    transactions: list[tuple[list[tuple[Any, ...]], bool]],
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        stores = (SqliteFlowStore(Path(directory) / "flows.sqlite3"), MemoryFlowStore())
        try:
            for ops, fails in transactions:

                def work(
                    tx: StoreTransaction, ops: list[tuple[Any, ...]] = ops, fails: bool = fails
                ) -> object:
                    results = [outcome_in(tx, op) for op in ops]
                    if fails:
                        raise RuntimeError("rolled back")
                    return results

                sqlite_result, memory_result = (outcome(s, work) for s in stores)
                assert sqlite_result == memory_result
                assert stores[0].run(everything) == stores[1].run(everything)
        finally:
            for store in stores:
                store.close()
