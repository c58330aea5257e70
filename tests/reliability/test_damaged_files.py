"""Storage faults on a closed file: garbage over its pages, bytes rotted inside a value, truncation.

A session database is built once (``damaged_files``), closed, and damaged
while no process has it open; then it is opened as a restarted program would
open it and every session is read through the public client. What may happen:
the open, or a read, raises a clear error that says the file is damaged
(``StoreCorruptError``, or ``DatabaseFileError`` for a file that is no longer
SQLite); what must never happen is another kind of exception, a read that
returns data that differ from what was stored, or a truncated file that opens
as a silent empty store. A Worker opened on a damaged file keeps serving the
sessions the damage did not touch. The strict ``xfail`` test is the gap still
open: no check when a file opens.

Not covered, and not detectable by design: damage that leaves a value valid,
such as one digit of a message changed into another. SQLite keeps no page
checksums, so such a file reads back "fine" (``docs/reliability.md``).
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from dex_agents import DexAgentsError
from dex_agents.adapters.local.sqlite_store import StoreCorruptError
from dex_agents.local import DatabaseFileError, LocalRuntime
from tests.reliability.conftest import reliability_flow
from tests.reliability.damaged_files import (
    DAMAGED_SESSION,
    PAGE_SIZE,
    SESSIONS,
    TURN,
    Reads,
    build_database,
    overwrite_pages,
    read_everything,
    stored_pieces,
)
from tests.reliability.harness import record_figures, soak, wait_idle

CLEAR = (StoreCorruptError, DatabaseFileError)
SEEDS = list(range(soak(8, 60)))
ROT_BYTES = [b"\xff", b"\x00"]
TRUNCATIONS = [0.25, 0.5, 0.75, 0.9, 4096, 100, 50, 10]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, Reads]:
    """The undamaged database's bytes, and everything read from it."""
    path = tmp_path_factory.mktemp("pristine") / "db.sqlite3"
    data = build_database(path)
    reads = asyncio.run(read_everything(path, SESSIONS))
    assert reads.opened is None
    assert not reads.errors, reads.errors
    return data, reads


@pytest.fixture(scope="module")
def middle_damage(
    pristine: tuple[bytes, Reads], tmp_path_factory: pytest.TempPathFactory
) -> dict[int, Reads]:
    """What reading gave, for each seed's four pages of garbage in the middle of the file."""
    data, _ = pristine
    directory = tmp_path_factory.mktemp("middle")
    return {
        seed: asyncio.run(
            read_damaged(
                directory,
                f"seed-{seed}",
                overwrite_pages(data, middle_pages(data, seed), "random", seed),
            )
        )
        for seed in SEEDS
    }


@pytest.fixture(scope="module")
def rotted(
    pristine: tuple[bytes, Reads], tmp_path_factory: pytest.TempPathFactory
) -> dict[bytes, Reads]:
    """What reading gave, for ``DAMAGED_SESSION``'s long message rotted with each byte."""
    data, _ = pristine
    directory = tmp_path_factory.mktemp("rotted")
    return {
        byte: asyncio.run(
            read_damaged(
                directory, f"rotted-{byte.hex()}", rot_in_place(data, DAMAGED_SESSION, byte)
            )
        )
        for byte in ROT_BYTES
    }


def rot_in_place(data: bytes, session: str, byte: bytes) -> bytes:
    """``data`` with every stored copy of the middle of ``session``'s long message rotted by ``byte``s.

    The pages keep their structure: only bytes inside the values are damaged.
    """
    damaged = bytearray(data)
    for target in stored_pieces(data, session):
        start = data.find(target)
        while start != -1:
            damaged[start : start + len(target)] = byte * len(target)
            start = data.find(target, start + 1)
    return bytes(damaged)


def middle_pages(data: bytes, seed: int) -> list[int]:
    """Four consecutive pages at a seeded place in the middle half of the file."""
    pages = len(data) // PAGE_SIZE
    start = random.Random(seed).randrange(pages // 4, 3 * pages // 4)
    return list(range(start, start + 4))


async def read_damaged(tmp_path: Path, name: str, damaged: bytes) -> Reads:
    path = tmp_path / f"{name}.sqlite3"
    path.write_bytes(damaged)
    return await read_everything(path, SESSIONS)


def never_served_wrong(reads: Reads, pristine_reads: Reads, case: str) -> None:
    """The invariant of every damaged file: never a strange exception, never wrong data."""
    if reads.opened is not None:
        assert isinstance(reads.opened, CLEAR), f"{case}: opening raised {reads.opened!r}"
        return
    for name, error in reads.errors.items():
        assert isinstance(error, DexAgentsError), f"{case}: {name} raised {error!r}"
    for name, value in reads.values.items():
        assert value == pristine_reads.values[name], f"{case}: {name} read back changed"


def noticed(reads: Reads) -> bool:
    return reads.opened is not None or bool(reads.errors)


def unclear_errors(reads: Reads) -> dict[str, str]:
    errors = dict(reads.errors)
    if reads.opened is not None:
        errors["open"] = reads.opened
    return {name: repr(e)[:160] for name, e in errors.items() if not isinstance(e, CLEAR)}


def test_garbage_over_pages_in_the_middle_is_never_read_as_data(
    pristine: tuple[bytes, Reads], middle_damage: dict[int, Reads]
) -> None:
    _, pristine_reads = pristine
    for seed, reads in middle_damage.items():
        never_served_wrong(reads, pristine_reads, f"seed {seed}")
    record_figures(
        "damaged_pages",
        files=len(middle_damage),
        noticed=sum(noticed(reads) for reads in middle_damage.values()),
        noticed_at_open=sum(reads.opened is not None for reads in middle_damage.values()),
        reported_as_corruption=sum(
            noticed(reads) and not unclear_errors(reads) for reads in middle_damage.values()
        ),
        silently_wrong=0,
    )


def test_garbage_over_pages_in_the_middle_is_reported_as_corruption(
    middle_damage: dict[int, Reads],
) -> None:
    unclear = {seed: unclear_errors(reads) for seed, reads in middle_damage.items()}
    assert not any(unclear.values()), unclear


@pytest.mark.xfail(
    strict=True,
    reason=(
        "a damaged file opens as if it were whole: SqliteFlowStore checks nothing when it "
        "opens (no PRAGMA quick_check), so damage is found only by the read that touches it, "
        "and damage to pages no read touches (consumed Channel messages, the Step history) "
        "is not found at all until a write lands there"
    ),
)
def test_garbage_over_pages_in_the_middle_is_noticed_when_the_file_opens(
    middle_damage: dict[int, Reads],
) -> None:
    opened = {seed: reads.opened is not None for seed, reads in middle_damage.items()}
    assert all(opened.values()), opened


@pytest.mark.parametrize("byte", ROT_BYTES, ids=["invalid-utf8", "zeros"])
def test_bytes_rotted_inside_a_value_are_noticed_and_never_read_as_data(
    pristine: tuple[bytes, Reads], rotted: dict[bytes, Reads], byte: bytes
) -> None:
    _, pristine_reads = pristine
    reads = rotted[byte]
    never_served_wrong(reads, pristine_reads, f"{byte!r} in {DAMAGED_SESSION}")
    assert noticed(reads)
    damaged = {name.split()[0] for name in reads.errors}
    assert damaged == {DAMAGED_SESSION}, "only the damaged session fails"


@pytest.mark.parametrize("byte", ROT_BYTES, ids=["invalid-utf8", "zeros"])
def test_bytes_rotted_inside_a_value_are_reported_as_corruption(
    rotted: dict[bytes, Reads], byte: bytes
) -> None:
    assert not unclear_errors(rotted[byte])


async def test_a_worker_on_a_damaged_file_serves_the_sessions_the_damage_missed(
    tmp_path: Path, pristine: tuple[bytes, Reads]
) -> None:
    data, _ = pristine
    path = tmp_path / "rotted.sqlite3"
    path.write_bytes(rot_in_place(data, DAMAGED_SESSION, b"\xff"))
    flow = reliability_flow()
    async with LocalRuntime(path, [flow]) as runtime:
        sessions = runtime.sessions(flow)
        # The damaged session takes the message (its queue is not damaged) but cannot run it.
        assert await sessions.send_user_message(DAMAGED_SESSION, "look it up again")
        for session in ("s-5", "s-6"):
            assert await sessions.send_user_message(session, "look it up again")
            done = await wait_idle(sessions, session, within=TURN.total_seconds())
            assert done.messages[-1].text == "done: order 7 shipped"
        with pytest.raises(DexAgentsError):
            await sessions.get_agent_snapshot(DAMAGED_SESSION)


@pytest.mark.parametrize("size", TRUNCATIONS, ids=str)
async def test_a_truncated_file_is_refused_clearly(
    tmp_path: Path, pristine: tuple[bytes, Reads], size: float
) -> None:
    data, pristine_reads = pristine
    keep = int(len(data) * size) if size < 1 else int(size)
    reads = await read_damaged(tmp_path, "truncated", data[:keep])
    never_served_wrong(reads, pristine_reads, f"truncated to {keep} bytes")
    assert noticed(reads)
    assert not unclear_errors(reads)


async def test_a_file_truncated_to_nothing_is_not_opened_as_an_empty_store(
    tmp_path: Path,
) -> None:
    path = tmp_path / "emptied.sqlite3"
    path.write_bytes(b"")
    with pytest.raises(CLEAR):
        async with LocalRuntime(path, [reliability_flow()], workers=0, create=False) as runtime:
            assert await runtime.flow_client.list_flows() == []
    assert path.stat().st_size == 0, "the emptied file was made into a new database"
