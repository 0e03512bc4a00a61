"""The KubeRay adapter's `observe` (the ledger's view of Ray workloads), issue 34.5: the
controller watches every kind the adapter lists, RayCluster included, so a RayCluster's own
observation must say when it ran (KubeRay's `status.state`), or the ledger never records its
start."""

from __future__ import annotations

import datetime as dt
from typing import Any

from batch.ledger import events as ev
from batch.ledger.convert import events_from_job
from integrations.ray import RayAdapter

UTC = dt.UTC


def cluster(status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": "rc",
            "namespace": "ns",
            "labels": {"volcano.sh/queue-name": "ray-q"},
        },
        "spec": {
            "headGroupSpec": {
                "template": {
                    "spec": {"containers": [{"name": "h", "resources": {"requests": {"cpu": "1"}}}]}
                }
            },
            "workerGroupSpecs": [
                {
                    "groupName": "w",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "containers": [{"name": "w", "resources": {"requests": {"cpu": "1"}}}]
                        }
                    },
                }
            ],
        },
        "status": status or {},
    }


def test_a_ready_raycluster_is_running_since_it_became_ready() -> None:
    seen = RayAdapter().observe(
        cluster({"state": "ready", "stateTransitionTimes": {"ready": "2026-01-01T00:00:05Z"}})
    )
    assert seen is not None
    assert seen.queue == "ray-q" and seen.replicas == {"headgroup": 1, "w": 2}
    assert list(seen.phases) == [("Running", dt.datetime(2026, 1, 1, 0, 0, 5, tzinfo=UTC))]


def test_a_raycluster_not_yet_ready_is_observed_without_a_phase() -> None:
    seen = RayAdapter().observe(cluster())
    assert seen is not None and seen.queue == "ray-q" and not seen.phases


def test_a_failed_raycluster_failed() -> None:
    status = {"state": "failed", "stateTransitionTimes": {"failed": "2026-01-01T00:01:00Z"}}
    seen = RayAdapter().observe(cluster(status))
    assert seen is not None and [p for p, _ in seen.phases] == ["Failed"]


# ------------------------------------------------------------------------------------ RayJob
# The controller watches RayJobs too (issue 34.5): KubeRay's PodGroup of a finished RayJob is
# never completed (it stays behind, KubeRay #4473), so its phases cannot stand in for the
# RayJob's; the ledger follows the RayJob's own jobDeploymentStatus.
T0, T1, T2 = "2026-01-01T00:00:00Z", "2026-01-01T00:00:40Z", "2026-01-01T00:01:30Z"


def at(stamp: str) -> dt.datetime:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def rayjob(status: dict[str, Any], status_written: str | None = None) -> dict[str, Any]:
    spec_cluster = cluster()["spec"]
    managed: list[dict[str, Any]] = [
        {"manager": "kubectl", "operation": "Update", "time": T0},
    ]
    if status_written:
        managed.append(
            {
                "manager": "kuberay-operator",
                "operation": "Update",
                "subresource": "status",
                "time": status_written,
            }
        )
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {
            "name": "rj",
            "namespace": "ns",
            "uid": "rj-uid",
            "creationTimestamp": T0,
            "labels": {"volcano.sh/queue-name": "ray-q"},
            "managedFields": managed,
        },
        "spec": {"entrypoint": "python x.py", "rayClusterSpec": spec_cluster},
        "status": status,
    }


def test_the_ray_adapter_lists_rayjob_so_the_controller_watches_it() -> None:
    kinds = {(k.api_version, k.kind, k.plural) for k in RayAdapter().kinds}
    assert ("ray.io/v1", "RayJob", "rayjobs") in kinds
    assert ("ray.io/v1", "RayCluster", "rayclusters") in kinds


def test_a_running_rayjob_runs_since_kuberay_wrote_running_not_since_it_initialised() -> None:
    """status.startTime is when KubeRay initialised the RayJob, before its cluster was even
    scheduled; the status write that set Running is when the wait ended."""
    seen = RayAdapter().observe(
        rayjob({"jobDeploymentStatus": "Running", "startTime": T0}, status_written=T1)
    )
    assert seen is not None and seen.queue == "ray-q"
    assert seen.replicas == {"headgroup": 1, "w": 2}
    assert list(seen.phases) == [("Running", at(T1))]


def test_rays_own_job_start_wins_when_kuberay_copied_it() -> None:
    status = {
        "jobDeploymentStatus": "Running",
        "startTime": T0,
        "rayJobInfo": {"startTime": "2026-01-01T00:00:30Z"},
    }
    seen = RayAdapter().observe(rayjob(status, status_written=T1))
    assert seen is not None and list(seen.phases) == [("Running", at("2026-01-01T00:00:30Z"))]


def test_a_waiting_rayjob_is_pending_since_it_initialised() -> None:
    status = {"jobDeploymentStatus": "Initializing", "startTime": T0}
    seen = RayAdapter().observe(rayjob(status, status_written=T1))
    assert seen is not None and list(seen.phases) == [("Pending", at(T0))]


def test_a_failed_rayjob_failed_at_its_end_time() -> None:
    status = {"jobDeploymentStatus": "Failed", "startTime": T0, "endTime": T2}
    seen = RayAdapter().observe(rayjob(status, status_written=T2))
    assert seen is not None and seen.finished
    assert list(seen.phases) == [("Failed", at(T2))]


def test_the_ledger_records_a_rayjob_start_and_end_from_the_rayjob_itself() -> None:
    initialising = rayjob({"jobDeploymentStatus": "Initializing", "startTime": T0}, T0)
    running = rayjob({"jobDeploymentStatus": "Running", "startTime": T0}, T1)
    failed = rayjob({"jobDeploymentStatus": "Failed", "startTime": T0, "endTime": T2}, T2)
    adapters = [RayAdapter()]
    changes = [
        *events_from_job(None, initialising, adapters=adapters),
        *events_from_job(initialising, running, adapters=adapters),
        *events_from_job(running, failed, adapters=adapters),
    ]
    phases = [(e.to_phase, e.at) for e in changes if isinstance(e, ev.JobPhaseChanged)]
    assert phases == [("Pending", at(T0)), ("Running", at(T1)), ("Failed", at(T2))]
    observed = [e for e in changes if isinstance(e, ev.JobObserved)]
    assert {(e.kind, e.name, e.queue) for e in observed} == {("RayJob", "rj", "ray-q")}


# -------------------------------------------------------------------------------- RayService
# A RayService is a job of its own in the ledger (issue 34): it runs since its first cluster
# was ready (the gang's wait ended), fails on KubeRay's initializing timeout, else serves until
# it is deleted. The clusters KubeRay creates for it (or for a RayJob) are part of its job.


def rayservice(status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {
            "name": "svc",
            "namespace": "ns",
            "uid": "svc-uid",
            "creationTimestamp": T0,
            "labels": {"volcano.sh/queue-name": "ray-q"},
        },
        "spec": {"serveConfigV2": "applications: []", "rayClusterConfig": cluster()["spec"]},
        "status": status or {},
    }


def ready_cluster_status(when: str) -> dict[str, Any]:
    return {"rayClusterStatus": {"state": "ready", "stateTransitionTimes": {"ready": when}}}


def test_the_ray_adapter_lists_rayservice_so_the_controller_watches_it() -> None:
    kinds = {(k.api_version, k.kind, k.plural) for k in RayAdapter().kinds}
    assert ("ray.io/v1", "RayService", "rayservices") in kinds


def test_a_rayservice_waits_since_it_was_created_with_its_clusters_gang() -> None:
    initialising = {
        "conditions": [
            {"type": "Ready", "status": "False", "reason": "Initializing", "lastTransitionTime": T1}
        ]
    }
    seen = RayAdapter().observe(rayservice(initialising))
    assert seen is not None and seen.part_of is None
    assert seen.queue == "ray-q" and seen.replicas == {"headgroup": 1, "w": 2}
    assert seen.requests == {"cpu": 3000}
    assert list(seen.phases) == [("Pending", at(T0))]


def test_a_rayservice_runs_since_its_pending_cluster_was_ready_before_it_serves() -> None:
    """Serving needs Ray inside the pods; the gang's wait ended when the cluster was ready."""
    status = {"pendingServiceStatus": ready_cluster_status(T1)}
    seen = RayAdapter().observe(rayservice(status))
    assert seen is not None and list(seen.phases) == [("Running", at(T1))]


def test_a_serving_rayservice_runs_since_the_earlier_of_ready_and_its_cluster() -> None:
    status = {
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": T2}],
        "activeServiceStatus": ready_cluster_status(T1),
    }
    seen = RayAdapter().observe(rayservice(status))
    assert seen is not None and list(seen.phases) == [("Running", at(T1))]


def test_a_rayservice_past_its_initializing_timeout_failed() -> None:
    status = {
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "reason": "InitializingTimeout",
                "lastTransitionTime": T2,
            }
        ],
        "pendingServiceStatus": ready_cluster_status(T1),
    }
    seen = RayAdapter().observe(rayservice(status))
    assert seen is not None and seen.finished
    assert list(seen.phases) == [("Failed", at(T2))]


def owned_cluster(owner_kind: str, owner_uid: str) -> dict[str, Any]:
    obj = cluster({"state": "ready", "stateTransitionTimes": {"ready": T1}})
    obj["metadata"]["uid"] = "rc-uid"
    obj["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "ray.io/v1",
            "kind": owner_kind,
            "name": "owner",
            "uid": owner_uid,
            "controller": True,
        }
    ]
    return obj


def test_a_cluster_a_rayjob_or_rayservice_created_is_part_of_its_job() -> None:
    for kind in ("RayJob", "RayService"):
        seen = RayAdapter().observe(owned_cluster(kind, "owner-uid"))
        assert seen is not None and seen.part_of is not None
        assert (seen.part_of.kind, seen.part_of.uid) == (kind, "owner-uid")
    standalone = RayAdapter().observe(owned_cluster("Deployment", "d-uid"))
    assert standalone is not None and standalone.part_of is None


def test_the_ledger_records_nothing_of_a_cluster_that_is_part_of_a_job() -> None:
    obj = owned_cluster("RayJob", "rj-uid")
    assert events_from_job(None, obj, adapters=[RayAdapter()]) == []
    assert events_from_job(obj, None, adapters=[RayAdapter()]) == []
