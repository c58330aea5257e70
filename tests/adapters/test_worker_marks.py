"""Worker marks: a mark held by a live process says so; one whose process was killed is free.

Each mark here is held by a real child process, killed with SIGKILL, because
the point is what the kernel does when a process ends without cleaning up.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.adapters.local.worker_marks import WorkerMarkFiles, marks_directory
from dex_agents.ports.store_capabilities import WorkerMarks

REPO_ROOT = Path(__file__).resolve().parents[2]

_HOLDER = """
import sys, time
from pathlib import Path
from dex_agents.adapters.local.store_errors import WorkerIdInUseError
from dex_agents.adapters.local.worker_marks import WorkerMarkFiles
try:
    mark = WorkerMarkFiles(Path(sys.argv[1])).hold_worker_mark(sys.argv[2])
except WorkerIdInUseError as error:
    print("in use:", error, flush=True)
    sys.exit(0)
if mark is None:
    print("refused", flush=True)
else:
    print("took over" if mark.took_over else "held", flush=True)
time.sleep(600)
"""


class Holder:
    """A child process that holds ``owner``'s mark in ``directory`` until it is killed."""

    def __init__(self, directory: Path, owner: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, str(directory), owner],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.answer = self.process.stdout.readline().strip()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    started: list[Holder] = []
    yield started
    for holder in started:
        holder.kill()


def _hold(holders: list[Holder], directory: Path, owner: str) -> Holder:
    holder = Holder(directory, owner)
    holders.append(holder)
    return holder


def test_a_killed_workers_mark_is_free_and_a_live_ones_is_held(
    tmp_path: Path, holders: list[Holder]
) -> None:
    marks = WorkerMarkFiles(tmp_path / "db-workers")
    live = _hold(holders, tmp_path / "db-workers", "worker-live")
    doomed = _hold(holders, tmp_path / "db-workers", "worker/with:any text")
    assert (live.answer, doomed.answer) == ("held", "held")
    assert not marks.worker_gone("worker-live")
    assert not marks.worker_gone("worker/with:any text")
    doomed.kill()
    assert marks.worker_gone("worker/with:any text")
    assert not marks.worker_gone("worker-live")
    # A look leaves the mark as it found it: still free, still held.
    assert marks.worker_gone("worker/with:any text")
    assert not marks.worker_gone("worker-live")


def test_no_mark_says_nothing(tmp_path: Path) -> None:
    marks = WorkerMarkFiles(tmp_path / "db-workers")
    assert not marks.worker_gone("never-marked")  # not even the directory exists
    (tmp_path / "db-workers").mkdir()
    assert not marks.worker_gone("never-marked")


def test_a_released_mark_leaves_nothing_that_looks_gone(tmp_path: Path) -> None:
    marks = WorkerMarkFiles(tmp_path / "db-workers")
    mark = marks.hold_worker_mark("worker-1")
    assert mark is not None
    assert mark.path.exists()
    # Held by this process through another open file: a look from here sees it held.
    assert not marks.worker_gone("worker-1")
    mark.release()
    mark.release()
    assert not marks.worker_gone("worker-1")
    # The last mark's release leaves nothing beside the database; the next mark makes the
    # directory again.
    assert not (tmp_path / "db-workers").exists()
    again = marks.hold_worker_mark("worker-2")
    assert again is not None
    other = marks.hold_worker_mark("worker-3")
    assert other is not None
    again.release()
    assert [p.name for p in (tmp_path / "db-workers").iterdir()] == [other.path.name]
    other.release()


def test_a_second_live_worker_with_the_same_id_is_refused_with_the_first_s_process(
    tmp_path: Path, holders: list[Holder]
) -> None:
    # Running on without a mark, it would recover the first's running attempts as its own
    # once another process of that ID ended, and release or renew them as its own.
    first = _hold(holders, tmp_path / "db-workers", "worker-1")
    second = _hold(holders, tmp_path / "db-workers", "worker-1")
    assert first.answer == "held"
    assert second.answer == (
        f"in use: worker ID 'worker-1' is held by a running worker of another process "
        f"(pid {first.process.pid}) on {tmp_path / 'db-workers'}: two workers with one ID "
        "would take over each other's leases; give each process its own worker_id_prefix, "
        "or none"
    )
    marks = WorkerMarkFiles(tmp_path / "db-workers")
    # The refused one left the first's mark alone, and no temporary file.
    assert not marks.worker_gone("worker-1")
    assert [p.name.endswith(".lock") for p in (tmp_path / "db-workers").iterdir()] == [True]


def test_a_new_process_with_a_dead_workers_id_takes_its_mark_over(
    tmp_path: Path, holders: list[Holder]
) -> None:
    marks = WorkerMarkFiles(tmp_path / "db-workers")
    _hold(holders, tmp_path / "db-workers", "pid-42").kill()
    assert marks.worker_gone("pid-42")
    again = _hold(holders, tmp_path / "db-workers", "pid-42")
    assert again.answer == "took over"  # the dead one's leases are its to recover
    assert not marks.worker_gone("pid-42")


def test_forgetting_removes_a_free_mark_only(tmp_path: Path, holders: list[Holder]) -> None:
    marks = WorkerMarkFiles(tmp_path / "db-workers")
    _hold(holders, tmp_path / "db-workers", "dead").kill()
    _hold(holders, tmp_path / "db-workers", "live")
    marks.forget_worker_mark("dead")
    marks.forget_worker_mark("live")
    marks.forget_worker_mark("never-marked")
    assert not marks.worker_gone("dead")  # no mark: nothing to say any more
    assert len(list((tmp_path / "db-workers").iterdir())) == 1
    assert not marks.worker_gone("live")


def test_the_owners_of_free_marks_are_gone_ones_only(tmp_path: Path, holders: list[Holder]) -> None:
    marks = WorkerMarkFiles(tmp_path / "db-workers")
    assert marks.gone_owners() == frozenset()  # not even the directory exists
    for owner in ("dead", "dead\nwith a newline", "live"):
        _hold(holders, tmp_path / "db-workers", owner)
    for holder in holders[:2]:
        holder.kill()
    (tmp_path / "db-workers" / ".left-by-a-kill.tmp").write_text("half made")
    assert marks.gone_owners() == {"dead", "dead\nwith a newline"}
    marks.forget_worker_mark("dead")
    assert marks.gone_owners() == {"dead\nwith a newline"}


def test_a_sqlite_store_keeps_its_workers_marks_beside_its_file(tmp_path: Path) -> None:
    store = SqliteFlowStore(tmp_path / "s.sqlite3")
    try:
        assert isinstance(store, WorkerMarks)
        mark = store.hold_worker_mark("worker-1")
        assert mark is not None
        assert mark.path.parent == marks_directory(tmp_path / "s.sqlite3")
        assert mark.path.parent.name == "s.sqlite3-workers"
        assert os.stat(mark.path.parent).st_mode & 0o777 == 0o700
        mark.release()
    finally:
        store.close()


def test_a_directory_that_cannot_be_made_gives_no_mark(tmp_path: Path) -> None:
    (tmp_path / "db-workers").write_text("a file where the directory would be")
    assert WorkerMarkFiles(tmp_path / "db-workers").hold_worker_mark("worker-1") is None


def test_a_file_system_whose_locks_lock_nothing_gives_no_mark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Such a file system would show a live worker's mark free, as if it had died.
    monkeypatch.setattr(fcntl, "flock", lambda descriptor, operation: None)
    marks = WorkerMarkFiles(tmp_path / "db-workers")
    assert marks.hold_worker_mark("worker-1") is None
    assert list((tmp_path / "db-workers").iterdir()) == []
    assert not marks.worker_gone("worker-1")
