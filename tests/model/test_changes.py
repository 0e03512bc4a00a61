"""The change log's hold: a session's changes kept aside, and marked at release unless undone."""

from __future__ import annotations

from batch.model.changes import ChangeLog, Cursor


def test_marks_under_hold_reach_consumers_only_when_not_undone() -> None:
    log = ChangeLog()
    cur = Cursor(log)
    assert cur.changed() is None  # first look: everything
    log.mark("a")
    log.hold()
    log.mark("b")
    log.mark("c")
    log.release(["b"])  # b is back at its version from before the hold
    assert cur.changed() == ["c", "a"]
    assert cur.changed() == []


def test_a_consumer_told_of_held_marks_sees_them_again_after_release() -> None:
    log = ChangeLog()
    cur = Cursor(log)
    cur.changed()
    log.hold()
    log.mark("b")
    assert cur.changed() == ["b"]  # told of b in the session's state
    log.release(["b"])
    assert cur.changed() == ["b"]  # so it looks again at b as undone


def test_without_held_the_held_marks_stay_out_and_others_are_listed_once() -> None:
    log = ChangeLog()
    cur = Cursor(log)
    other = Cursor(log)
    cur.changed()
    other.changed()
    log.mark("a")
    log.hold()
    log.mark("a")
    log.mark("b")
    assert cur.changed(held=False) == ["a"]
    assert other.changed() == ["b", "a"]  # most recent first, each once
    log.release(["a", "b"])


def test_a_second_hold_gives_up_the_first_sessions_changes() -> None:
    log = ChangeLog()
    cur = Cursor(log)
    cur.changed()
    log.hold()
    log.mark("x")
    log.hold()  # the first session never rolled back: x is marked
    log.release([])
    assert cur.changed() == ["x"]
