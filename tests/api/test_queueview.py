"""`batch.api.queueview`: a Queue read once per version."""

from __future__ import annotations

from batch.api.queueview import queue_view


def test_a_queue_as_its_controller_reads_it() -> None:
    team = queue_view(
        {
            "metadata": {
                "name": "team",
                "uid": "q-team",
                "resourceVersion": "3",
                "annotations": {"volcano.sh/closed-by-parent": "true"},
            },
            "spec": {"parent": "org"},
            "status": {"state": "Closed"},
        }
    )
    assert (team.name, team.parent, team.parent_written, team.state) == (
        "team",
        "org",
        "org",
        "Closed",
    )
    assert team.closed_by_parent and not team.deleting and team.status == {"state": "Closed"}
    unset = queue_view({"metadata": {"name": "q", "deletionTimestamp": "t"}})
    assert (unset.parent, unset.parent_written, unset.state, unset.deleting) == (
        "root",
        "",
        "",
        True,
    )
    assert queue_view({"metadata": {"name": "root"}, "spec": {"parent": "x"}}).parent is None


def test_a_view_is_built_once_per_uid_and_resource_version() -> None:
    meta = {"name": "q", "uid": "q-once", "resourceVersion": "1"}
    first = queue_view({"metadata": meta, "status": {"state": "Open"}})
    assert queue_view({"metadata": dict(meta), "status": {"state": "Open"}}) is first
    newer = queue_view(
        {"metadata": {**meta, "resourceVersion": "2"}, "status": {"state": "Closed"}}
    )
    assert newer.state == "Closed" and first.state == "Open"
