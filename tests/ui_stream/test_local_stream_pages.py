"""The embedded engine's Stream listed newest first, page by page, on both stores.

Event IDs are shared by every session of a store, so one session's IDs are
sparse when others write too; the pages must still hold every retained event
once, newest first, whatever the page size.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.adapters.local.stream_pages import newest_events_before, read_event_page
from dex_agents.ports.errors import FlowNotFoundError, InvalidResumeTokenError
from dex_agents.ports.flow_rows import EventRow
from dex_agents.ports.flow_store import FlowStore, StoreTransaction
from tests.adapters.flow_store_rows import at, flow


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FlowStore]:
    opened: FlowStore = (
        SqliteFlowStore(tmp_path / "flows.sqlite3")
        if request.param == "sqlite"
        else MemoryFlowStore()
    )
    yield opened
    opened.close()


Page = tuple[list[EventRow], str]


def write(store: FlowStore, owners: list[str]) -> dict[str, list[int]]:
    """One event per owner in order; each session's event IDs, oldest first."""

    def append(tx: StoreTransaction) -> dict[str, list[int]]:
        ids: dict[str, list[int]] = {}
        for owner in sorted(set(owners)):
            tx.insert_flow(flow(owner))
        for n, owner in enumerate(owners):
            ids.setdefault(owner, []).append(
                tx.append_event("Agent", owner, f'"{n}"', f"Step-{n}", at(n))
            )
        return ids

    return store.run(append)


def all_pages(store: FlowStore, flow_id: str, page_size: int) -> list[list[int]]:
    pages: list[list[int]] = []
    token = ""
    while True:
        rows, token = store.read(functools.partial(page_of, flow_id, page_size, token))
        pages.append([row.id for row in rows])
        if not token:
            return pages


def page_of(flow_id: str, size: int, token: str, tx: StoreTransaction) -> Page:
    return read_event_page(tx, flow_id, size, token)


# s-1 owns few, far apart IDs among many of s-2's: each probe window must grow.
SPARSE = ["s-1"] + ["s-2"] * 150 + ["s-1", "s-1"] + ["s-2"] * 250 + ["s-1"]


@pytest.mark.parametrize("page_size", [1, 2, 3, 100])
def test_pages_hold_every_event_once_newest_first(store: FlowStore, page_size: int) -> None:
    ids = write(store, SPARSE)
    for flow_id, own in ids.items():
        pages = all_pages(store, flow_id, page_size)
        assert [event for page in pages for event in page] == own[::-1]
        assert all(0 < len(page) <= page_size for page in pages)


def test_a_session_without_events_has_one_empty_page(store: FlowStore) -> None:
    write(store, ["s-2"])
    store.run(lambda tx: tx.insert_flow(flow("s-1")))
    assert all_pages(store, "s-1", 10) == [[]]


def test_a_page_token_of_another_session_or_none_at_all_is_refused(store: FlowStore) -> None:
    write(store, ["s-1", "s-2", "s-1", "s-2"])
    _, token = store.read(lambda tx: read_event_page(tx, "s-1", 1, ""))
    assert token
    with pytest.raises(InvalidResumeTokenError):
        store.read(lambda tx: read_event_page(tx, "s-2", 1, token))
    for bad in ("garbage", token.removeprefix("page."), "page.!!"):
        with pytest.raises(InvalidResumeTokenError):
            store.read(functools.partial(page_of, "s-1", 1, bad))


def test_an_unknown_session_or_a_bad_page_size_is_refused(store: FlowStore) -> None:
    write(store, ["s-1"])
    with pytest.raises(FlowNotFoundError):
        store.read(lambda tx: read_event_page(tx, "nobody", 1, ""))
    for size in (0, -1, True):
        with pytest.raises(ValueError, match="page_size"):
            store.read(functools.partial(page_of, "s-1", size, ""))


@settings(max_examples=100, deadline=None)
@given(
    owners=st.lists(st.sampled_from(["s-1", "s-2", "s-3"]), max_size=80),
    before=st.integers(min_value=0, max_value=90),
    count=st.integers(min_value=1, max_value=9),
)
def test_the_newest_events_below_an_id_are_found_for_any_interleaving(
    owners: list[str], before: int, count: int
) -> None:
    store = MemoryFlowStore()
    ids = write(store, owners) if owners else {}
    own = ids.get("s-1", [])
    below = [event for event in own if event < before][::-1]
    rows, older = store.read(lambda tx: newest_events_before(tx, "s-1", before, count))
    assert [row.id for row in rows] == below[:count]
    assert older == (len(below) > count)
