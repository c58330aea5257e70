"""A damaged stored text's bytes stay out of the errors that report it.

Python's sqlite3 says of a TEXT value that is not UTF-8 "Could not decode to
UTF-8 column 'c' with text '...'", quoting the value, which may be a user's
message, a tool's output or a key. The store's errors, and the exceptions they
chain (a traceback prints them), name the column and leave the text out.
"""

from __future__ import annotations

import contextlib
import sqlite3
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore, StoreCorruptError
from dex_agents.ports.flow_rows import FlowRow, FlowStatus
from dex_agents.ports.flow_store import StoreTransaction

SECRET = "sk-live-4f1c"
DAMAGED = f"CAST(x'{SECRET.encode().hex()}ff' AS TEXT)"  # the secret, then a byte no UTF-8 has


def _damaged_file(tmp_path: Path, update: str) -> Path:
    path = tmp_path / "flows.sqlite3"
    store = SqliteFlowStore(path)
    now = datetime.now(UTC)

    def fill(tx: StoreTransaction) -> None:
        tx.insert_flow(FlowRow("f1", "T", "r1", FlowStatus.RUNNING, '"input"', now))
        tx.put_value("f1", "M", "k1", '"one"')

    store.run(fill)
    store.close()
    with contextlib.closing(sqlite3.connect(path)) as raw, raw:
        raw.execute(update.format(damaged=DAMAGED))
    return path


DAMAGES: dict[str, tuple[str, Callable[[StoreTransaction], object]]] = {
    # Read with no Attribute to name: the store's translation of SQLite's error.
    "flow input": ("UPDATE flows SET input = {damaged}", lambda tx: tx.get_flow("f1")),
    # An Attribute read, whose damaged key the named error cannot name.
    "map key": ("UPDATE attribute_values SET key = {damaged}", lambda tx: tx.get_values("f1", "M")),
    # An Attribute read that names the value, chaining SQLite's error.
    "map value": (
        "UPDATE attribute_values SET value = {damaged}",
        lambda tx: tx.get_values("f1", "M"),
    ),
}


@pytest.mark.parametrize("damage", DAMAGES.values(), ids=DAMAGES.keys())
def test_an_error_of_a_damaged_text_and_its_chain_leave_the_text_out(
    tmp_path: Path, damage: tuple[str, Callable[[StoreTransaction], object]]
) -> None:
    update, read = damage
    store = SqliteFlowStore(_damaged_file(tmp_path, update))
    try:
        with pytest.raises(StoreCorruptError) as raised:
            store.read(read)
    finally:
        store.close()
    printed = "".join(traceback.format_exception(raised.value))
    assert "is damaged" in str(raised.value)
    assert "UTF-8" in printed
    assert SECRET not in printed
