"""VolcanoLifecycle applying the reconciler's actions to the virtual cluster, action by action,
with a backend that records the watch events the scheduler would see."""

from __future__ import annotations

from typing import Any

from batch.controllers.effects import (
    Action,
    CreateObject,
    DeleteObject,
    ObjectRef,
    PatchObject,
    PatchStatus,
)
from batch.sim.backend import CycleOutcome
from batch.sim.engine import EngineOptions, JobRun, Simulation
from batch.sim.lifecycle import VolcanoLifecycle
from batch.sim.metrics import JobRecord

from .conftest import cluster, job, workload


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []

    def apply(self, kind: str, event: str, obj: dict[str, Any]) -> None:
        status = obj.get("status") or {}
        self.events.append((kind, event, obj["metadata"]["name"], str(status.get("phase"))))

    def at(self, now: float) -> None:
        pass

    def cycle(self, now: float) -> CycleOutcome:  # pragma: no cover - not called
        raise AssertionError

    def next_change(self, since: float) -> float | None:  # pragma: no cover
        raise AssertionError


def _setup(*, gate_pods: bool = True) -> tuple[VolcanoLifecycle, JobRun, Recorder]:
    w = workload([job("a", submit=5, run=10, pods=2, gpus_per_pod=2)], cluster(1))
    backend = Recorder()
    sim = Simulation(w, backend, options=EngineOptions(lifecycle="volcano", gate_pods=gate_pods))
    lc = sim.lifecycle
    assert isinstance(lc, VolcanoLifecycle)
    j = w.jobs[0]
    run = JobRun(0, j, 0, JobRecord(j.name, j.queue, j.submit, 4.0, 2, j.run_time))
    run.state = {"metadata": {"name": "a"}, "spec": {}, "status": {"version": 3}}
    return lc, run, backend


def ref(kind: str, name: str) -> ObjectRef:
    return ObjectRef("v1", kind, "sim", name)


def pod(name: str) -> dict[str, Any]:
    ann = {"volcano.sh/task-spec": "worker"}
    return {"kind": "Pod", "metadata": {"name": name, "annotations": ann}, "spec": {}}


def test_create_patch_delete_reach_the_cluster() -> None:
    lc, run, backend = _setup()
    pg = {"kind": "PodGroup", "metadata": {"name": "a-pg"}, "spec": {"minMember": 2}}
    actions: list[Action] = [
        CreateObject(pg),
        CreateObject({"kind": "PodGroup", "metadata": {"name": "again"}}),  # has one: ignored
        CreateObject(pod("a-0")),
        CreateObject(pod("a-0")),  # exists: ignored
        CreateObject({"kind": "Service", "metadata": {"name": "svc"}}),  # not simulated
    ]
    assert lc._apply(run, actions, 7.0) is True
    assert backend.events == [
        ("PodGroup", "ADDED", "a-pg", "Pending"),
        ("Pod", "ADDED", "a-0", "Pending"),
    ]
    assert run.pg is not None and run.pg["metadata"]["uid"] == "pg-0000000-3"
    assert run.pg["metadata"]["creationTimestamp"] == "2020-01-01T00:00:05Z"  # job's submit
    p = run.pods["a-0"]
    assert p.obj["metadata"]["uid"] == "pod-0000000-a-0-0"
    assert p.obj["metadata"]["creationTimestamp"] == "2020-01-01T00:00:07Z"  # now
    assert p.gpu == 2000
    backend.events.clear()
    actions = [
        PatchStatus(ref("Job", "a"), {"state": {"phase": "Running"}}),
        PatchStatus(ref("PodGroup", "a-pg"), {"phase": "Inqueue"}),
        PatchStatus(ref("Pod", "a-0"), {"phase": "Running"}),
        PatchStatus(ref("Pod", "gone"), {"phase": "Running"}),  # unknown pod: ignored
        PatchObject(ref("Job", "a"), {"metadata": {"labels": {"x": "1"}}}),
        PatchObject(ref("Pod", "a-0"), {"metadata": {"labels": {"y": "2"}}}),  # no event
        PatchObject(ref("PodGroup", "a-pg"), {"spec": {"minMember": 1}}),
    ]
    assert lc._apply(run, actions, 8.0) is False
    assert backend.events == [
        ("PodGroup", "MODIFIED", "a-pg", "Inqueue"),
        ("Pod", "MODIFIED", "a-0", "Running"),
        ("PodGroup", "MODIFIED", "a-pg", "Inqueue"),
    ]
    assert run.state["status"] == {"version": 3, "state": {"phase": "Running"}}
    assert run.state["metadata"]["labels"] == {"x": "1"}
    assert run.pods["a-0"].obj["metadata"]["labels"] == {"y": "2"}
    assert run.pg["spec"] == {"minMember": 1}
    backend.events.clear()
    assert not lc._apply(
        run, [DeleteObject(ref("Pod", "a-0")), DeleteObject(ref("PodGroup", "a-pg"))], 9.0
    )
    assert backend.events == [
        ("Pod", "DELETED", "a-0", "Running"),
        ("PodGroup", "DELETED", "a-pg", "Inqueue"),
    ]
    assert run.pods == {} and run.pg is None


def test_ungated_pods_get_an_inqueue_podgroup_and_patches_need_one() -> None:
    lc, run, backend = _setup(gate_pods=False)
    actions: list[Action] = [
        PatchStatus(ref("PodGroup", "a-pg"), {"phase": "Running"}),  # none yet: ignored
        PatchObject(ref("PodGroup", "a-pg"), {"spec": {}}),
        CreateObject({"kind": "PodGroup", "metadata": {"name": "a-pg"}, "status": {"x": 1}}),
    ]
    assert lc._apply(run, actions, 1.0) is False
    assert backend.events == [("PodGroup", "ADDED", "a-pg", "Inqueue")]
    assert run.pg is not None and run.pg["status"] == {"x": 1, "phase": "Inqueue"}
