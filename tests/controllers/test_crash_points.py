"""Crash at every point of a reconcile: apply only the first k actions, then carry on normally.

Whatever k is, the job must end exactly as without the crash (same retryCount, same phase, no
pod created twice). This checks the write ordering of the job reconciler action by action.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from batch.controllers import constants as c
from batch.controllers.job import reconcile_job
from batch.controllers.memory import command

from .conftest import Harness, make_job, task


def _crash_once(h: Harness, k: int) -> None:
    """One reconcile whose actions stop after k (the controller died there)."""
    job = h.cluster.get("Job", h.ns, h.name)
    assert job is not None
    h.cluster.now = h.clock.tick(1)
    res = reconcile_job(
        job,
        h.cluster.job_pods(job),
        h.cluster.job_podgroup(job),
        now=h.clock.now,
        commands=h.cluster.job_commands(job),
    )
    h.cluster.apply(res.actions[:k])


def _uids(h: Harness) -> set[str]:
    return {str(p["metadata"]["uid"]) for p in h.pods()}


Scenario = Callable[[Harness], None]


def _scale_down(h: Harness) -> None:
    h.cluster.get("Job", "ns", "job")["spec"]["tasks"][0]["replicas"] = 1


def _pod_fails(h: Harness) -> None:
    h.pod("job-worker-0", "Failed")


def _abort(h: Harness) -> None:
    h.cluster.add(command(h.job, "AbortJob"))


def _two_succeed(h: Harness) -> None:
    h.pod("job-worker-0", "Succeeded")
    h.pod("job-worker-1", "Succeeded")


def _restart_command(h: Harness) -> None:
    h.cluster.add(command(h.job, "RestartJob"))


SCENARIOS: dict[str, tuple[dict[str, Any], Scenario, dict[str, Any]]] = {
    "min success completes once": (
        {"minSuccess": 2, "min_available": 1},
        _two_succeed,
        {"retryCount": 0, "phase": c.COMPLETED, "pods": 2},
    ),
    "restart command once": (
        {},
        _restart_command,
        {"retryCount": 1, "phase": c.PENDING, "pods": 0},
    ),
    "restart task once": (
        {"policies": [{"event": "PodFailed", "action": "RestartTask"}]},
        _pod_fails,
        {"retryCount": 1, "phase": c.PENDING, "pods": 3},
    ),
    "scale-down is no eviction": (
        {"policies": [{"event": "PodEvicted", "action": "RestartJob"}], "min_available": 1},
        _scale_down,
        {"retryCount": 0, "phase": c.RUNNING, "pods": 1},
    ),
    "restart pod once": (
        {"policies": [{"event": "PodFailed", "action": "RestartPod"}]},
        _pod_fails,
        {"retryCount": 1, "phase": c.PENDING, "pods": 3},
    ),
    "restart job once": (
        {"policies": [{"event": "PodFailed", "action": "RestartJob"}]},
        _pod_fails,
        {"retryCount": 1, "phase": c.PENDING, "pods": 0},
    ),
    "abort once": ({}, _abort, {"retryCount": 0, "phase": c.ABORTED, "pods": 0}),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_crash_at_every_action(name: str) -> None:
    spec, trigger, want = SCENARIOS[name]
    spec = dict(spec)
    min_av = spec.pop("min_available", None)
    outcomes = []
    for k in range(12):
        h = Harness(make_job(tasks=[task("worker", 3)], min_available=min_av, **spec))
        h.start()
        before = _uids(h)
        trigger(h)
        _crash_once(h, k)
        h.step(1)
        h.step(1)
        st = h.status
        outcomes.append((k, st["retryCount"], h.phase, len(h.pods())))
        assert st["retryCount"] == want["retryCount"], outcomes
        assert h.phase == want["phase"], outcomes
        assert len(h.pods()) == want["pods"], outcomes
        if name == "scale-down is no eviction":
            assert _uids(h) <= before  # nothing recreated
        phases = [x["status"] for x in st["conditions"]]
        assert len(phases) == len(set(phases)), phases
        assert h.cluster.objects_of("Command") == []


def test_vanished_pod_while_controller_down_raises_pod_evicted() -> None:
    h = Harness(
        make_job(
            tasks=[task("worker", 2)], policies=[{"event": "PodEvicted", "action": "RestartJob"}]
        )
    )
    h.start()
    del h.cluster.objects[("Pod", "ns", "job-worker-1")]  # deleted by someone while we were down
    h.step(1)
    assert h.status["retryCount"] == 1
    h.step(1)
    assert h.status["retryCount"] == 1


def test_scale_rewrites_the_svc_configmap_whatever_the_crash_point() -> None:
    # The new layout is recorded only once the ConfigMap holds it: a crash (or a failed
    # ConfigMap write) before that rewrites it on the next reconcile.
    hosts = ",".join(f"job-worker-{i}.job" for i in range(4))
    for k in range(8):
        h = Harness(make_job(tasks=[task("worker", 2)], plugins={"svc": []}))
        h.start()
        h.cluster.get("Job", "ns", "job")["spec"]["tasks"][0]["replicas"] = 4
        _crash_once(h, k)
        h.step(1)
        cm = h.cluster.get("ConfigMap", "ns", "job-svc")
        assert cm is not None
        assert (cm["data"]["VC_WORKER_NUM"], cm["data"]["VC_WORKER_HOSTS"]) == ("4", hosts), k
        assert h.pod_names() == [f"job-worker-{i}" for i in range(4)], k
