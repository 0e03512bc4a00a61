"""One ledger row per Ray job (issue 34): a RayCluster that a RayJob or RayService created is
part of its owner's job, whichever order the controller's watches deliver the RayJob or
RayService, its cluster and the PodGroup KubeRay made (owned by the RayJob, or for a
RayService by its cluster); a standalone RayCluster keeps its own row."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from batch.ledger import events as ev
from batch.ledger.owners import JobOwners
from batch.ledger.recorder import Recorder
from integrations.ray import RAY, cluster_for
from tests.integrations.test_ray_observe import T0, T1, T2, at, rayjob, rayservice

from .helpers import rows

OBSERVED = {("ray.io/v1", "RayCluster"), ("ray.io/v1", "RayJob"), ("ray.io/v1", "RayService")}


def owners() -> JobOwners:
    return JobOwners([RAY], OBSERVED)


def made_cluster(owner: dict[str, Any], name: str, ready_at: str | None = None) -> dict[str, Any]:
    obj = cluster_for(owner, name)
    obj["metadata"].update(uid=f"{name}-uid", creationTimestamp=T0)
    if ready_at:
        obj["status"] = {"state": "ready", "stateTransitionTimes": {"ready": ready_at}}
    return obj


def podgroup(name: str, owner: dict[str, Any], phase: str, when: str) -> dict[str, Any]:
    meta = owner["metadata"]
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"{name}-uid",
            "creationTimestamp": T0,
            "ownerReferences": [
                {
                    "apiVersion": "ray.io/v1",
                    "kind": owner["kind"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {"minMember": 3, "queue": "ray-q"},
        "status": {
            "phase": phase,
            "conditions": [{"type": "Scheduled", "status": "True", "lastTransitionTime": when}],
        },
    }


def record(url: str, tmp_path: Path, events: list[ev.LedgerEvent]) -> None:
    with Recorder(url, spill_path=tmp_path / "spill.jsonl", background=False) as rec:
        rec.record(events)
        assert rec.flush()


def jobs(engine: Engine) -> list[tuple[Any, ...]]:
    keys = ("kind", "name", "queue", "final_phase", "first_started_at", "finished_at")
    return sorted(tuple(r[k] for k in keys) for r in rows(engine, "jobs"))


def test_a_rayjob_and_its_cluster_are_one_job(
    ledger_url: str, engine: Engine, tmp_path: Path
) -> None:
    job = rayjob({"jobDeploymentStatus": "Initializing", "startTime": T0}, T0)
    running = rayjob({"jobDeploymentStatus": "Running", "startTime": T0}, T1)
    failed = rayjob({"jobDeploymentStatus": "Failed", "startTime": T0, "endTime": T2}, T2)
    rc = made_cluster(job, "rj-abcde")
    ready = made_cluster(job, "rj-abcde", ready_at=T1)
    pg = podgroup("ray-rj-pg", job, "Running", T1)
    feed = owners()
    events = [
        *feed.podgroup_events(None, pg),  # KubeRay's PodGroup, owned by the RayJob
        *feed.job_events(None, rc),
        *feed.job_events(None, job),
        *feed.job_events(rc, ready),
        *feed.job_events(job, running),
        *feed.job_events(running, failed),
        *feed.job_events(ready, None),  # KubeRay deletes the cluster of a finished RayJob
    ]
    record(ledger_url, tmp_path, events)
    assert jobs(engine) == [("RayJob", "rj", "ray-q", "Failed", at(T1), at(T2))]
    assert {r["job_uid"] for r in rows(engine, "job_transitions")} == {"rj-uid"}


def test_a_rayservice_is_a_job_and_its_clusters_podgroup_is_its_own(
    ledger_url: str, engine: Engine, tmp_path: Path
) -> None:
    """KubeRay owns a RayService cluster's PodGroup by the cluster; seen before the cluster
    (a restart lists the kinds in any order), it is held, then recorded as the service's."""
    svc = rayservice()
    rc = made_cluster(svc, "svc-raycluster-x1y2z")
    pg = podgroup("ray-svc-raycluster-x1y2z-pg", rc, "Inqueue", T1)
    serving = rayservice({"pendingServiceStatus": {"rayClusterStatus": rc.get("status") or {}}})
    ready_rc = made_cluster(svc, "svc-raycluster-x1y2z", ready_at=T1)
    ready_svc = copy.deepcopy(serving)
    ready_svc["status"]["pendingServiceStatus"]["rayClusterStatus"] = ready_rc["status"]
    feed = owners()
    held = feed.podgroup_events(None, pg)
    assert held == []  # its owner, the cluster, not seen yet
    events = [
        *feed.job_events(None, svc),
        *feed.job_events(None, rc),  # the held PodGroup is recorded now, as the service's
        *feed.job_events(rc, ready_rc),
        *feed.job_events(svc, ready_svc),
    ]
    observed = [e for e in events if isinstance(e, ev.JobObserved)]
    assert {(e.kind, e.uid) for e in observed} == {("RayService", "svc-uid")}
    assert any(e.podgroup == "ray-svc-raycluster-x1y2z-pg" for e in observed)
    events += feed.job_events(ready_svc, None)  # deleted while it serves
    record(ledger_url, tmp_path, events)
    assert [r[:5] for r in jobs(engine)] == [("RayService", "svc", "ray-q", "Deleted", at(T1))]
    transitions = rows(engine, "job_transitions")
    assert {(r["job_uid"], r["source"], r["to_phase"]) for r in transitions} >= {
        ("svc-uid", "podgroup", "Inqueue"),
        ("svc-uid", "job", "Running"),
    }


def test_a_rayservice_deleted_while_waiting_ends_deleted_and_never_started(
    ledger_url: str, engine: Engine, tmp_path: Path
) -> None:
    svc = rayservice()
    rc = made_cluster(svc, "svc-raycluster-x1y2z")
    pg = podgroup("ray-svc-raycluster-x1y2z-pg", rc, "Pending", T0)
    feed = owners()
    events = [
        *feed.job_events(None, svc),
        *feed.job_events(None, rc),
        *feed.podgroup_events(None, pg),
        *feed.job_events(rc, None),
        *feed.job_events(svc, None),
    ]
    record(ledger_url, tmp_path, events)
    (row,) = rows(engine, "jobs")
    assert (row["kind"], row["final_phase"], row["first_started_at"]) == (
        "RayService",
        "Deleted",
        None,
    )
    assert row["submitted_at"] == at(T0) and row["finished_at"] is not None


def test_a_standalone_raycluster_keeps_its_own_row(
    ledger_url: str, engine: Engine, tmp_path: Path
) -> None:
    rc = made_cluster(rayservice(), "solo", ready_at=T1)
    rc["metadata"].pop("ownerReferences", None)
    pg = podgroup("ray-solo-pg", rc, "Running", T1)
    feed = owners()
    events = [*feed.job_events(None, rc), *feed.podgroup_events(None, pg)]
    record(ledger_url, tmp_path, events)
    assert [(r[0], r[1], r[4]) for r in jobs(engine)] == [("RayCluster", "solo", at(T1))]
    assert {r["job_uid"] for r in rows(engine, "job_transitions")} == {"solo-uid"}


def test_a_rayservice_whose_status_kuberay_never_writes_runs_since_its_cluster_was_ready(
    ledger_url: str, engine: Engine, tmp_path: Path
) -> None:
    """KubeRay writes a RayService's status only once Ray's dashboard answers; its cluster's
    readiness (the gang ran) is the service's start all the same. The cluster's failure is not
    the service's end."""
    svc = rayservice()
    rc = made_cluster(svc, "svc-abcde")
    ready = made_cluster(svc, "svc-abcde", ready_at=T1)
    failed = copy.deepcopy(ready)
    failed["status"] = {"state": "failed", "stateTransitionTimes": {"failed": T2}}
    feed = owners()
    events = [
        *feed.job_events(None, svc),
        *feed.job_events(None, rc),
        *feed.job_events(rc, ready),
        *feed.job_events(ready, ready),  # a later write of the same state adds nothing
        *feed.job_events(ready, failed),
    ]
    running = [e for e in events if isinstance(e, ev.JobPhaseChanged) and e.to_phase == "Running"]
    assert [(e.job_uid, e.kind, e.at) for e in running] == [("svc-uid", "RayService", at(T1))]
    record(ledger_url, tmp_path, events)
    assert jobs(engine) == [("RayService", "svc", "ray-q", None, at(T1), None)]


def ray_pod(
    name: str, cluster: dict[str, Any], *, deleted_phase: str | None = None
) -> dict[str, Any]:
    """A pod KubeRay made for `cluster` (controlled by the RayCluster), bound and running."""
    meta = cluster["metadata"]
    owner = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": meta["name"]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"{name}-uid",
            "creationTimestamp": T0,
            "labels": {"ray.io/cluster": meta["name"], "ray.io/node-type": "worker"},
            "ownerReferences": [{**owner, "uid": meta["uid"], "controller": True}],
        },
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "ray", "resources": {"requests": {"cpu": "1"}}}],
        },
        "status": {"phase": deleted_phase or "Running", "startTime": T1},
    }


def test_a_rayjobs_cluster_pods_are_the_rayjobs_whatever_the_order(
    ledger_url: str, engine: Engine, tmp_path: Path
) -> None:
    """A RayJob's cluster has no row, so its pods are recorded under the RayJob: seen before
    the cluster (held, after a restart), after it, and deleted after the cluster was."""
    job = rayjob({"jobDeploymentStatus": "Running", "startTime": T0}, T1)
    rc = made_cluster(job, "rj-abcde", ready_at=T1)
    early, late = ray_pod("early", rc), ray_pod("late", rc)
    feed = owners()
    events = [
        *feed.pod_events(None, early),  # the pod's watch listed first: held
        *feed.job_events(None, job),
        *feed.job_events(None, rc),  # the cluster seen: `early` recorded
        *feed.pod_events(None, late),
        *feed.job_events(rc, None),  # the RayJob finished, KubeRay deletes the cluster...
        *feed.pod_events(late, None),  # ... and then its pods
    ]
    record(ledger_url, tmp_path, events)
    pods = {r["name"]: (r["job_uid"], r["outcome"]) for r in rows(engine, "pod_attempts")}
    assert pods == {"early": ("rj-uid", None), "late": ("rj-uid", "Deleted")}


def test_a_standalone_clusters_pods_are_its_own(
    ledger_url: str, engine: Engine, tmp_path: Path
) -> None:
    rc = made_cluster(rayservice(), "solo", ready_at=T1)
    rc["metadata"].pop("ownerReferences", None)
    feed = owners()
    events = [*feed.pod_events(None, ray_pod("p", rc)), *feed.job_events(None, rc)]
    record(ledger_url, tmp_path, events)
    assert [r["job_uid"] for r in rows(engine, "pod_attempts")] == ["solo-uid"]
