"""Waking a Stream reader only for its own session, and telling a wait whether its session
changed (``FlowChanges``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from dex_agents.adapters.local.flow_change_waits import FlowChanges
from dex_agents.ports.store_capabilities import LoggedRuns

Answer = tuple[dict[str, int] | None, int] | LoggedRuns


class ScriptedLog:
    """A ``FlowChangeLog`` that answers from a list, one per read: (runs with events, newest),
    those runs being all that changed, or (runs with events, runs changed, newest)."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.asked: list[int | None] = []

    def runs_logged_since(self, change: int | None) -> LoggedRuns:
        self.asked.append(change)
        answer = self.answers.pop(0)
        if len(answer) == 3:
            return answer
        with_events, newest = answer
        return with_events, None if with_events is None else frozenset(with_events), newest


def test_only_the_runs_the_log_names_wake_their_readers() -> None:
    log = ScriptedLog((None, 10), ({"s1": 11}, 11), ({"s2": 12, "s3": 13}, 13))
    changes = FlowChanges(log)
    mark = changes.look(100)  # the first look learns the newest number only
    assert log.asked == [None]
    assert not changes.changed_after("s1", mark)
    assert changes.look(100) == mark  # the counter did not move: the log is not read
    assert log.asked == [None]
    later = changes.look(101)
    assert log.asked == [None, 10]
    assert changes.changed_after("s1", mark)
    assert not changes.changed_after("s2", mark)
    assert not changes.changed_after("s1", later)  # a mark taken after it: seen already
    changes.look(102)
    assert log.asked == [None, 10, 11]
    assert [changes.changed_after(run, later) for run in ("s1", "s2", "s3")] == [
        False,
        True,
        True,
    ]


def test_without_a_log_every_move_of_the_counter_wakes_every_reader() -> None:
    changes = FlowChanges(None)
    mark = changes.look(5)
    assert not changes.changed_after("s1", mark)
    changes.look(6)
    assert changes.changed_after("s1", mark)
    assert changes.changed_after("anything", mark)


def test_a_log_that_cannot_tell_wakes_every_reader() -> None:
    changes = FlowChanges(ScriptedLog((None, 1), (None, 4)))
    mark = changes.look(1)
    changes.look(2)
    assert changes.changed_after("s9", mark)


def test_past_the_runs_kept_every_reader_wakes_once() -> None:
    changes = FlowChanges(
        ScriptedLog((None, 0), ({"a": 1, "b": 1}, 1), ({"c": 2, "d": 2}, 2)), most_runs=3
    )
    mark = changes.look(1)
    changes.look(2)
    assert not changes.changed_after("z", mark)
    second = changes.look(3)  # four runs would be kept: all are forgotten
    assert changes.changed_after("z", mark)
    assert not changes.changed_after("a", second)


def test_a_failed_read_of_the_log_is_made_again_at_the_next_look() -> None:
    class FailingOnce(ScriptedLog):
        def runs_logged_since(self, change: int | None) -> LoggedRuns:
            if len(self.asked) == 1:
                self.asked.append(change)
                raise OSError("disk I/O error")
            return super().runs_logged_since(change)

    log = FailingOnce((None, 0), ({"s1": 1}, 1))
    changes = FlowChanges(log)
    mark = changes.look(1)
    with pytest.raises(OSError, match="disk I/O error"):
        changes.look(2)
    changes.look(2)
    assert log.asked == [None, 0, 0]
    assert changes.changed_after("s1", mark)


def test_a_look_wakes_the_watchers_of_the_runs_it_saw_get_events() -> None:
    changes = FlowChanges(ScriptedLog((None, 0), ({"s1": 1}, 1), (None, 2)))
    changes.look(1)
    woken: list[str] = []

    def waker(name: str) -> Callable[[], None]:
        return lambda: woken.append(name)

    wakes = {name: waker(name) for name in ("s1-a", "s1-b", "s2")}
    changes.watch("s1", wakes["s1-a"])
    changes.watch("s1", wakes["s1-b"])
    changes.watch("s2", wakes["s2"])
    assert changes.watched()
    changes.look(1)  # the counter did not move: nobody is woken
    assert woken == []
    changes.look(2)
    assert sorted(woken) == ["s1-a", "s1-b"]  # each once, in no set order
    changes.unwatch("s1", wakes["s1-a"])
    woken.clear()
    changes.look(3)  # the log cannot tell: everyone still watching
    assert sorted(woken) == ["s1-b", "s2"]
    changes.unwatch("s1", wakes["s1-b"])
    changes.unwatch("s2", wakes["s2"])
    changes.unwatch("s2", wakes["s2"])  # twice is harmless
    assert not changes.watched()


def test_each_run_s_newest_commit_with_events_is_known_from_the_looks_that_saw_it() -> None:
    log = ScriptedLog((None, 10), ({"s1": 11}, 11), ({"s2": 12}, 12), ({"s1": 14}, 14), (None, 15))
    changes = FlowChanges(log)
    changes.look(1)  # the first look learns the newest number only: no run is known
    assert changes.last_events_change("s1") is None
    changes.look(2)
    assert changes.last_events_change("s1") == 11
    assert changes.last_events_change("s2") is None
    changes.look(3)  # a look that does not name s1 leaves what is known of it
    assert (changes.last_events_change("s1"), changes.last_events_change("s2")) == (11, 12)
    changes.look(4)
    assert changes.last_events_change("s1") == 14
    changes.look(5)  # the log cannot tell: nothing is known any more
    assert changes.last_events_change("s1") is None
    assert changes.last_events_change("s2") is None


def test_past_the_runs_kept_no_run_s_newest_commit_is_known() -> None:
    log = ScriptedLog((None, 0), ({"a": 1}, 1), ({"b": 2, "c": 2}, 2))
    changes = FlowChanges(log, most_runs=2)
    changes.look(1)
    changes.look(2)
    assert changes.last_events_change("a") == 1
    changes.look(3)
    assert [changes.last_events_change(run) for run in "abc"] == [None, None, None]


def test_a_run_that_changed_without_events_is_told_apart_from_one_that_got_events() -> None:
    log = ScriptedLog((None, 10), ({"s1": 11}, frozenset({"s1", "s2"}), 12), ({}, frozenset(), 12))
    changes = FlowChanges(log)
    mark = changes.look(1)
    assert not changes.run_changed_after("s1", mark)
    later = changes.look(2)
    # s2 changed (a claim, a queued message) without an event: its readers sleep on,
    # but a wait that read its snapshot before must read it again.
    assert [changes.changed_after(run, mark) for run in ("s1", "s2", "s3")] == [True, False, False]
    assert [changes.run_changed_after(run, mark) for run in ("s1", "s2", "s3")] == [
        True,
        True,
        False,
    ]
    assert not changes.run_changed_after("s2", later)
    changes.look(3)  # a commit of no run (nothing logged)
    assert not changes.run_changed_after("s2", later)
    assert changes.runs_changed_after(mark) == frozenset({"s1", "s2"})
    assert changes.runs_changed_after(later) == frozenset()


def test_the_runs_changed_after_a_mark_are_those_of_later_looks_only() -> None:
    log = ScriptedLog(
        (None, 0),
        ({}, frozenset({"a", "b"}), 1),
        ({}, frozenset({"b", "c"}), 2),
        ({}, frozenset(), 2),
    )
    changes = FlowChanges(log)
    first = changes.look(1)  # the first look cannot tell which runs changed before it
    assert changes.runs_changed_after(first - 1) is None
    assert changes.runs_changed_after(first) == frozenset()
    second = changes.look(2)
    third = changes.look(3)
    assert changes.runs_changed_after(first) == frozenset({"a", "b", "c"})
    assert changes.runs_changed_after(second) == frozenset({"b", "c"})  # b again, in the later look
    assert changes.runs_changed_after(third) == frozenset()
    changes.look(4)  # the counter moved for a commit that changed no run
    assert changes.runs_changed_after(third) == frozenset()


def test_without_a_log_any_move_of_the_counter_may_have_changed_any_run() -> None:
    changes = FlowChanges(None)
    mark = changes.look(5)
    assert not changes.run_changed_after("s1", mark)
    changes.look(5)  # the counter did not move
    assert not changes.run_changed_after("s1", mark)
    changes.look(6)
    assert changes.run_changed_after("s1", mark)
    assert changes.runs_changed_after(mark) is None


def test_past_the_runs_kept_every_run_may_have_changed() -> None:
    log = ScriptedLog((None, 0), ({}, frozenset({"a", "b"}), 1), ({}, frozenset({"c", "d"}), 2))
    changes = FlowChanges(log, most_runs=3)
    mark = changes.look(1)
    changes.look(2)
    assert not changes.run_changed_after("z", mark)
    changes.look(3)
    assert changes.run_changed_after("z", mark)
    assert changes.runs_changed_after(mark) is None
