"""Policy `timeout`s run from the event's time, once (volcano-semantics.md#policy-matching),
whatever the event.

Volcano schedules a timed action at event time + timeout and cancels it only when the condition
clears. Events with a time of their own use it (PodPending: creation, PodFailed: finishedAt or,
for a pod the kubelet rejected, its conditions/startTime; TaskCompleted: the last finishedAt;
Unknown: the PodGroup's Unschedulable condition); the others run from when a reconcile first saw
them, kept in `status.controlledResources["tephra.io/timers"]` until the condition clears.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from batch.controllers import constants as c
from batch.controllers.job import TIMERS_KEY, reconcile_job
from batch.controllers.timeutil import format_time

from .conftest import Harness, make_job, task


def _timers(h: Harness) -> dict[str, Any]:
    raw = (h.status.get("controlledResources") or {}).get(TIMERS_KEY)
    return json.loads(raw) if raw else {}


def _wait(h: Harness, seconds: int, *, every: int = 5) -> None:
    for _ in range(seconds // every):
        h.step(every)


def test_task_completed_timeout_fires_after_the_last_finish() -> None:
    h = Harness(
        make_job(
            tasks=[task("a", 1), task("b", 1)],
            policies=[{"event": "TaskCompleted", "action": "CompleteJob", "timeout": "30s"}],
        )
    )
    h.start()
    h.pod("job-a-0", "Succeeded")  # finishedAt = now
    res = h.step(10)
    assert h.phase == c.RUNNING
    assert res.requeue_after is not None and 19 <= res.requeue_after <= 20
    assert _timers(h) == {}  # finishedAt is the event's own time: nothing to remember
    _wait(h, 15)
    assert h.phase == c.RUNNING
    _wait(h, 10)
    assert h.phase in (c.COMPLETING, c.COMPLETED)


def test_task_completed_without_finish_times_runs_from_first_sight() -> None:
    h = Harness(
        make_job(
            tasks=[task("a", 1), task("b", 1)],
            policies=[{"event": "TaskCompleted", "action": "CompleteJob", "timeout": "30s"}],
        )
    )
    h.start()
    pod = h.cluster.get("Pod", "ns", "job-a-0")
    assert pod is not None
    pod["status"] = {"phase": "Succeeded"}
    seen = h.clock.tick(3)
    h.step()
    assert [v["since"] for v in _timers(h).values()] == [format_time(seen)]
    for _ in range(5):  # reconciles in between do not move the deadline
        h.step(5)
    assert h.phase == c.RUNNING
    h.step(5)
    assert h.phase in (c.COMPLETING, c.COMPLETED)
    assert _timers(h) == {}


def test_unknown_timeout_fires_once_and_clears() -> None:
    h = Harness(
        make_job(
            tasks=[task("a", 2)],
            policies=[{"event": "Unknown", "action": "RestartJob", "timeout": "60s"}],
        )
    )
    h.start()
    h.cluster.set_podgroup_phase(h.job, "Unknown")
    h.step(1)
    assert len(_timers(h)) == 1
    # the group recovers before the deadline: the timer goes
    _wait(h, 30)
    h.cluster.set_podgroup_phase(h.job, "Running")
    h.step(1)
    assert _timers(h) == {}
    # Unknown again: a fresh 60 s, not what is left of the first one
    h.cluster.set_podgroup_phase(h.job, "Unknown")
    h.step(1)
    _wait(h, 55)
    assert h.status["retryCount"] == 0
    _wait(h, 10)
    assert h.status["retryCount"] == 1
    assert h.phase in (c.RESTARTING, c.PENDING)
    assert _timers(h) == {}
    h.step(60)
    assert h.status["retryCount"] == 1


def test_unknown_uses_the_unschedulable_condition_time() -> None:
    h = Harness(
        make_job(
            tasks=[task("a", 2)],
            policies=[{"event": "Unknown", "action": "RestartJob", "timeout": "60s"}],
        )
    )
    h.start()
    pg = h.podgroup()
    assert pg is not None
    became = h.clock.now
    pg["status"] = {
        "phase": "Unknown",
        "conditions": [
            {"type": "Unschedulable", "status": "True", "lastTransitionTime": format_time(became)}
        ],
    }
    h.clock.tick(50)  # the controller only looks 50 s later
    res = h.step()
    assert h.status["retryCount"] == 0
    assert res.requeue_after is not None and 9 <= res.requeue_after <= 10
    h.step(10)
    assert h.status["retryCount"] == 1


def _rejected(h: Harness, name: str, **status: Any) -> None:
    pod = h.cluster.get("Pod", "ns", name)
    assert pod is not None
    pod["status"] = {
        "phase": "Failed",
        "reason": "OutOfcpu",
        "message": "Pod was rejected: Node didn't have enough resource: cpu",
        **status,
    }


def test_pod_failed_without_container_statuses_uses_start_time() -> None:
    h = Harness(
        make_job(
            tasks=[task("a", 2)],
            policies=[{"event": "PodFailed", "action": "RestartJob", "timeout": "30s"}],
        )
    )
    h.start()
    _rejected(h, "job-a-0", startTime=format_time(h.clock.now))
    h.clock.tick(20)
    res = h.step()
    assert res.requeue_after is not None and 9 <= res.requeue_after <= 10
    assert _timers(h) == {}
    h.step(10)
    assert h.status["retryCount"] == 1


def test_pod_failed_without_any_time_runs_from_first_sight() -> None:
    h = Harness(
        make_job(
            tasks=[task("a", 2)],
            policies=[{"event": "PodFailed", "action": "RestartJob", "timeout": "30s"}],
        )
    )
    h.start()
    _rejected(h, "job-a-0")
    for _ in range(5):
        h.step(5)
    assert h.status["retryCount"] == 0
    h.step(10)
    assert h.status["retryCount"] == 1


def test_task_failed_timeout() -> None:
    h = Harness(
        make_job(
            tasks=[task("worker", 2, maxRetry=1)],
            policies=[{"event": "TaskFailed", "action": "TerminateJob", "timeout": "20s"}],
        )
    )
    h.start()
    h.pod("job-worker-0", "Running", restarts=1)
    for _ in range(3):
        h.step(5)
    assert h.phase == c.RUNNING
    h.step(10)
    assert h.phase in (c.TERMINATING, c.TERMINATED)
    assert _timers(h) == {}


def _evict(h: Harness, name: str) -> None:
    gone = copy.deepcopy(h.cluster.get("Pod", "ns", name))
    del h.cluster.objects[("Pod", "ns", name)]
    h.cluster.reconcile("ns", "job", now=h.clock.tick(1), deleted_pods=[gone])
    h.step()


def test_pod_evicted_of_a_gone_pod_fires_after_the_timeout() -> None:
    h = Harness(
        make_job(
            tasks=[task("a", 2)],
            policies=[{"event": "PodEvicted", "action": "RestartJob", "timeout": "30s"}],
        )
    )
    h.start()
    _evict(h, "job-a-0")
    assert h.status["retryCount"] == 0
    assert "job-a-0" in h.pod_names()  # recreated, still Pending
    (entry,) = _timers(h).values()
    assert entry["evicted"]["metadata"]["name"] == "job-a-0"
    _wait(h, 25)
    assert h.status["retryCount"] == 0
    _wait(h, 10)
    assert h.status["retryCount"] == 1
    assert _timers(h) == {}


def test_pod_evicted_of_a_gone_pod_cancelled_when_its_replacement_runs() -> None:
    h = Harness(
        make_job(
            tasks=[task("a", 2)],
            policies=[{"event": "PodEvicted", "action": "RestartJob", "timeout": "30s"}],
        )
    )
    h.start()
    _evict(h, "job-a-0")
    h.step(10)
    h.pod("job-a-0", "Running")
    h.step(1)
    assert _timers(h) == {}
    _wait(h, 60)
    assert h.status["retryCount"] == 0
    assert h.phase == c.RUNNING


def test_restart_pod_after_timeout_names_the_gone_pod() -> None:
    h = Harness(
        make_job(
            tasks=[task("a", 2)],
            policies=[{"event": "PodEvicted", "action": "RestartPod", "timeout": "30s"}],
        )
    )
    h.start()
    _evict(h, "job-a-0")
    a1 = h.cluster.get("Pod", "ns", "job-a-1")
    assert a1 is not None
    _wait(h, 35)
    st = h.status
    assert st["retryCount"] == 1
    assert st["controlledResources"]["tephra.io/kill-target"] == "pod:job-a-0:1"
    still = h.cluster.get("Pod", "ns", "job-a-1")
    assert still is not None and still["metadata"]["uid"] == a1["metadata"]["uid"]
    _wait(h, 60)
    assert h.status["retryCount"] == 1


def test_vanished_pod_with_timeout_is_remembered_for_its_task() -> None:
    # Deleted while the controller was down: only the counts show it, and the first status
    # write erases that evidence; the timer keeps it.
    h = Harness(
        make_job(
            tasks=[task("a", 2)],
            policies=[{"event": "PodEvicted", "action": "RestartTask", "timeout": "30s"}],
        )
    )
    h.start()
    del h.cluster.objects[("Pod", "ns", "job-a-1")]
    h.step(1)
    (entry,) = _timers(h).values()
    assert entry["evicted"]["metadata"]["name"] == ""
    _wait(h, 25)
    assert h.status["retryCount"] == 0
    _wait(h, 10)
    assert h.status["retryCount"] == 1
    assert _timers(h) == {}
    _wait(h, 60)
    assert h.status["retryCount"] == 1


def test_a_recorded_timer_is_not_rewritten() -> None:
    h = Harness(
        make_job(
            tasks=[task("a", 2)],
            policies=[{"event": "Unknown", "action": "RestartJob", "timeout": "60s"}],
        )
    )
    h.start()
    h.cluster.set_podgroup_phase(h.job, "Unknown")
    h.step(1)
    job = h.cluster.get("Job", "ns", "job")
    assert job is not None
    res = reconcile_job(
        copy.deepcopy(job),
        copy.deepcopy(h.pods()),
        copy.deepcopy(h.podgroup()),
        now=h.clock.tick(7),
    )
    assert res.actions == []
    assert res.requeue_after is not None and 52 <= res.requeue_after <= 53


def test_timed_restart_survives_a_crash_at_every_action() -> None:
    for k in range(8):
        h = Harness(
            make_job(
                tasks=[task("a", 2)],
                policies=[{"event": "Unknown", "action": "RestartJob", "timeout": "60s"}],
            )
        )
        h.start()
        h.cluster.set_podgroup_phase(h.job, "Unknown")
        job = h.cluster.get("Job", "ns", "job")
        assert job is not None
        res = reconcile_job(
            copy.deepcopy(job),
            copy.deepcopy(h.pods()),
            copy.deepcopy(h.podgroup()),
            now=h.clock.tick(1),
        )
        h.cluster.apply(res.actions[:k])
        _wait(h, 55)
        assert h.status["retryCount"] == 0, k
        _wait(h, 10)
        assert h.status["retryCount"] == 1, k
        assert h.phase in (c.RESTARTING, c.PENDING), k
