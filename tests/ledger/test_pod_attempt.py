"""How a pod's attempt ends in the ledger: outcome, finish time, exit code, restarts, eviction."""

from __future__ import annotations

import datetime as dt
from typing import Any

from batch.ledger.convert import events_from_pod
from batch.ledger.events import PodAttempt

NOW = dt.datetime(2026, 1, 1, 1, tzinfo=dt.UTC)
T = "2026-01-01T00:00:%02dZ"


def _at(second: int) -> dt.datetime:
    return dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=second)


def _pod(phase: str | None, containers: tuple[Any, ...] = (), **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", **meta},
        "spec": {},
        "status": {"phase": phase, "containerStatuses": list(containers)},
    }


def _ended(code: int | None, start: int, end: int | None, restarts: int = 0) -> dict[str, Any]:
    term: dict[str, Any] = {"startedAt": T % start, "exitCode": code}
    if end is not None:
        term["finishedAt"] = T % end
    return {"restartCount": restarts, "state": {"terminated": term}}


def _attempt(old: Any, new: Any) -> PodAttempt:
    [attempt] = events_from_pod(old, new, now=NOW, adapters=[])
    assert isinstance(attempt, PodAttempt)
    return attempt


def test_a_failed_pod_ends_with_its_first_non_zero_exit_code_and_last_finish() -> None:
    pod = _pod("Failed", (_ended(0, 1, 9), _ended(137, 2, 5, restarts=2), _ended(1, 3, 7)))
    a = _attempt(None, pod)
    assert (a.outcome, a.exit_code, a.restarts) == ("Failed", 137, 2)
    assert (a.started_at, a.finished_at) == (_at(1), _at(9))


def test_a_finish_no_container_recorded_is_the_deletion_else_now() -> None:
    deleting = _pod("Succeeded", (_ended(None, 1, None),), deletionTimestamp=T % 30)
    a = _attempt(None, deleting)
    assert (a.outcome, a.exit_code, a.finished_at) == ("Succeeded", 0, _at(30))
    assert _attempt(None, _pod("Failed")).finished_at == NOW
    assert _attempt(None, _pod("Failed")).exit_code is None  # no container said


def test_a_deleted_pod_that_never_ran_has_no_finish() -> None:
    never = _attempt(_pod("Pending", deletionTimestamp=T % 20), None)
    assert (never.outcome, never.finished_at) == ("Deleted", None)
    bound = _pod("Pending", deletionTimestamp=T % 20)
    bound["spec"]["nodeName"] = "n1"
    assert _attempt(bound, None).finished_at == _at(20)
    running = _pod("Running", ({"state": {"running": {"startedAt": T % 4}}},))
    gone = _attempt(running, None)
    assert (gone.outcome, gone.started_at, gone.finished_at) == ("Deleted", _at(4), NOW)


def test_the_start_falls_back_to_the_pods_start_time_and_evictions_are_named() -> None:
    pod = _pod("Running")
    pod["status"]["startTime"] = T % 3
    pod["status"]["reason"] = "Evicted"
    a = _attempt(None, pod)
    assert (a.started_at, a.outcome, a.eviction_cause) == (_at(3), None, "Evicted")
    pod["status"]["conditions"] = [
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
    ]
    assert _attempt(None, pod).eviction_cause == "PreemptionByScheduler"
    assert _attempt(None, _pod("Pending")).started_at is None


def _deleting(pod: dict[str, Any], deadline: int, grace: int = 30) -> dict[str, Any]:
    """``pod`` once its deletion was asked for at ``deadline - grace``: the API server sets
    ``deletionTimestamp`` to the deadline, not to the moment of the request."""
    pod["metadata"] |= {"deletionTimestamp": T % deadline, "deletionGracePeriodSeconds": grace}
    return pod


def _running(start: int) -> dict[str, Any]:
    return {"state": {"running": {"startedAt": T % start}}}


def test_a_deleted_pod_finishes_when_its_deletion_was_asked_not_at_the_deadline() -> None:
    gone = _attempt(_deleting(_pod("Running", (_running(1),)), 32), None)
    assert (gone.outcome, gone.started_at, gone.finished_at) == ("Deleted", _at(1), _at(2))
    killed = _deleting(_pod("Failed", (_ended(137, 1, 3),)), 32)  # SIGTERM took a second
    assert _attempt(None, killed).finished_at == _at(2)
    assert _attempt(killed, None).finished_at == _at(2)


def test_a_pod_that_ended_before_its_deletion_keeps_its_end() -> None:
    done = _deleting(_pod("Succeeded", (_ended(0, 1, 5),)), 40)
    assert _attempt(done, None).finished_at == _at(5)
    assert _attempt(None, done).finished_at == _at(5)
    # The phase not yet updated: every container has ended all the same.
    exited = _deleting(_pod("Running", (_ended(0, 1, 5), _ended(0, 2, 6))), 40)
    assert _attempt(exited, None).finished_at == _at(6)


def test_a_pod_still_running_a_container_ran_until_its_deletion() -> None:
    sidecar = _deleting(_pod("Running", (_ended(0, 1, 3), _running(1))), 40)
    assert _attempt(sidecar, None).finished_at == _at(10)


def test_a_deleted_pod_without_container_statuses_finishes_at_the_request() -> None:
    bound = _deleting(_pod("Pending"), 35)
    bound["spec"]["nodeName"] = "n1"
    assert _attempt(bound, None).finished_at == _at(5)
    started = _deleting(_pod("Running"), 35)
    started["status"]["startTime"] = T % 1
    assert _attempt(started, None).finished_at == _at(5)


def test_a_deleted_pods_finish_is_the_earliest_known_never_before_its_start() -> None:
    pod = _deleting(_pod("Running", (_running(8),)), 35)  # asked at 5, started at 8
    assert _attempt(pod, None).finished_at == _at(8)
    seen_early = events_from_pod(_deleting(_pod("Running", (_running(1),)), 35), None, now=_at(3))
    assert [a.finished_at for a in seen_early if isinstance(a, PodAttempt)] == [_at(3)]


def test_a_deleted_pods_finish_does_not_depend_on_when_it_is_seen() -> None:
    """A restarted controller, or a late watch, sees the same object later: same finish."""
    pod = _deleting(_pod("Running", (_running(1),)), 32)
    seen = {
        a.finished_at
        for when in (NOW, NOW + dt.timedelta(days=1))
        for a in events_from_pod(pod, None, now=when)
        if isinstance(a, PodAttempt)
    }
    assert seen == {_at(2)}
