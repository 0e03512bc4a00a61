"""PodGroup controller for pods no VCJob created (volcano-semantics.md#podgroup-controller)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from batch.api.integration import (
    GangSpec,
    OwnerRef,
    WorkloadKind,
    WorkloadObservation,
    WorkloadRef,
)
from batch.controllers import constants as c
from batch.controllers.effects import CreateObject, DeleteObject, PatchObject, PatchStatus
from batch.controllers.gang import podgroup_manifest
from batch.controllers.podgroup import (
    CREATED_BY,
    CREATED_BY_CONTROLLER,
    reconcile_adapter_pod,
    reconcile_group,
    reconcile_plain_pod,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def pod(
    name: str = "p", *, owner: dict[str, Any] | None = None, sched: str = "volcano", **ann: str
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": f"uid-{name}",
        "annotations": dict(ann),
    }
    if owner:
        meta["ownerReferences"] = [owner]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "schedulerName": sched,
            "priorityClassName": "high",
            "containers": [
                {"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}
            ],
        },
    }


RS = {
    "apiVersion": "apps/v1",
    "kind": "ReplicaSet",
    "name": "web-abc",
    "uid": "rs-uid",
    "controller": True,
}


def test_replicaset_pod_gets_podgroup_of_owner() -> None:
    owner_obj = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": "web-abc",
            "uid": "rs-uid",
            "annotations": {c.GROUP_MIN_MEMBER: "3", "volcano.sh/x": "y", "other": "z"},
        },
        "spec": {"replicas": 3},
    }
    p = pod(owner=RS, **{c.POD_QUEUE_ANNOTATION: "team-a"})
    res = reconcile_plain_pod(p, owner_obj=owner_obj, podgroup=None)
    create = res.of_type(CreateObject)[0].body
    assert create["metadata"]["name"] == "podgroup-rs-uid"
    assert create["metadata"]["ownerReferences"] == [RS]
    assert create["spec"]["minMember"] == 3
    assert create["spec"]["queue"] == "team-a"
    assert create["spec"]["priorityClassName"] == "high"
    assert create["spec"]["minResources"] == {"cpu": "1500m", "memory": "3Gi"}
    assert create["metadata"]["annotations"]["volcano.sh/x"] == "y"
    assert "other" not in create["metadata"]["annotations"]
    assert create["status"]["phase"] == "Pending"
    patch = res.of_type(PatchObject)[0]
    assert patch.ref.name == "p"
    assert patch.patch["metadata"]["annotations"][c.GROUP_NAME_ANNOTATION] == "podgroup-rs-uid"
    # second pod of the same RS: no second PodGroup
    res2 = reconcile_plain_pod(pod("p2", owner=RS), owner_obj=owner_obj, podgroup=create)
    assert res2.of_type(CreateObject) == []
    assert len(res2.of_type(PatchObject)) == 1


def test_bare_pod_and_skips() -> None:
    res = reconcile_plain_pod(pod("bare"), owner_obj=None, podgroup=None)
    body = res.of_type(CreateObject)[0].body
    assert body["metadata"]["name"] == "podgroup-uid-bare"
    assert body["metadata"]["ownerReferences"][0]["kind"] == "Pod"
    assert body["spec"]["minMember"] == 1
    assert body["spec"]["queue"] == "default"
    # other scheduler, already grouped, or a VCJob pod: nothing
    assert (
        reconcile_plain_pod(pod(sched="default-scheduler"), owner_obj=None, podgroup=None).actions
        == []
    )
    grouped = pod(**{c.GROUP_NAME_ANNOTATION: "x"})
    assert reconcile_plain_pod(grouped, owner_obj=None, podgroup=None).actions == []
    vc = pod(
        owner={
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "name": "j",
            "uid": "j",
            "controller": True,
        }
    )
    assert reconcile_plain_pod(vc, owner_obj=None, podgroup=None).actions == []


def _group(owner: dict[str, Any], phase: str = "Running") -> dict[str, Any]:
    return {
        "apiVersion": c.SCHED_API,
        "kind": "PodGroup",
        "metadata": {
            "name": f"podgroup-{owner['uid']}",
            "namespace": "ns",
            "uid": "pg",
            "ownerReferences": [owner],
            "annotations": {CREATED_BY: CREATED_BY_CONTROLLER},
        },
        "spec": {"minMember": 1},
        "status": {"phase": phase},
    }


def test_batch_job_completion_marks_group_completed() -> None:
    job_ref = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "j",
        "uid": "bj",
        "controller": True,
    }
    job_obj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "uid": "bj"},
        "status": {"conditions": [{"type": "Complete", "status": "True"}]},
    }
    res = reconcile_group(_group(job_ref), owners={"bj": job_obj}, pods=[])
    assert res.of_type(PatchStatus)[0].status == {"phase": "Completed"}
    running_job = {**job_obj, "status": {}}
    assert reconcile_group(_group(job_ref), owners={"bj": running_job}, pods=[]).actions == []


def test_orphan_and_scaled_to_zero_are_deleted() -> None:
    assert isinstance(
        reconcile_group(_group(RS), owners={"rs-uid": None}, pods=[]).actions[0], DeleteObject
    )
    rs0 = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"uid": "rs-uid"},
        "spec": {"replicas": 0},
    }
    assert isinstance(
        reconcile_group(_group(RS), owners={"rs-uid": rs0}, pods=[]).actions[0], DeleteObject
    )
    foreign = _group(RS)
    foreign["metadata"]["annotations"] = {}
    assert reconcile_group(foreign, owners={"rs-uid": None}, pods=[]).actions == []


def test_bare_pod_group_completes_when_pod_finishes() -> None:
    ref = {"apiVersion": "v1", "kind": "Pod", "name": "bare", "uid": "uid-bare", "controller": True}
    p = pod("bare")
    p["status"] = {"phase": "Succeeded"}
    res = reconcile_group(_group(ref), owners={"uid-bare": p}, pods=[p])
    assert res.of_type(PatchStatus)[0].status == {"phase": "Completed"}


class FakeAdapter:
    name = "fake"
    kinds: list[WorkloadKind] = []

    def gang_for_workload(self, workload: Any) -> GangSpec | None:
        return None

    def workload_ref_for_pod(self, pod: Any) -> WorkloadRef | None:
        return None

    def existing_podgroup_name(self, workload: Any) -> str | None:
        return None

    def role_of_pod(self, pod: Any) -> str | None:
        return "worker"


def test_adapter_pod_creates_gang_and_annotates() -> None:
    ref = WorkloadRef(
        api_version="example.com/v1",
        kind="Trainer",
        namespace="ns",
        name="t",
        gang_name="t",
        uid="tu",
    )
    gang = GangSpec(
        name="t",
        namespace="ns",
        min_member=4,
        workload=ref,
        adapter="fake",
        min_task_member={"worker": 4},
        queue="team",
    )
    workload = {"metadata": {"name": "t", "uid": "tu", "creationTimestamp": "2025-12-31T23:59:00Z"}}
    res = reconcile_adapter_pod(
        pod("t-worker-0"),
        adapter=FakeAdapter(),
        gang=gang,
        podgroup=None,
        now=NOW,
        workload=workload,
    )  # type: ignore[arg-type]
    body = res.of_type(CreateObject)[0].body
    assert body["metadata"]["name"] == "t"
    assert body["spec"]["minMember"] == 4
    assert body["spec"]["queue"] == "team"
    ann = res.of_type(PatchObject)[0].patch["metadata"]["annotations"]
    assert ann == {c.GROUP_NAME_ANNOTATION: "t", c.TASK_SPEC: "worker"}
    # the operator's own PodGroup (no Tephra fingerprint) is adopted, never rewritten
    operator_pg = {"metadata": {"name": "t", "namespace": "ns"}, "spec": {"minMember": 2}}
    res2 = reconcile_adapter_pod(
        pod("t-worker-1"),
        adapter=FakeAdapter(),
        gang=gang,
        podgroup=operator_pg,
        now=NOW,
        workload=workload,
    )  # type: ignore[arg-type]
    assert res2.of_type(CreateObject) == []
    assert [type(a).__name__ for a in res2.actions] == ["PatchObject"]


def test_group_refreshed_from_a_new_pod_after_owner_update() -> None:
    owner_obj = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web-abc", "uid": "rs-uid", "annotations": {c.GROUP_MIN_MEMBER: "2"}},
    }
    first = reconcile_plain_pod(pod(owner=RS), owner_obj=owner_obj, podgroup=None)
    existing = first.of_type(CreateObject)[0].body
    assert existing["spec"]["minMember"] == 2
    owner_obj["metadata"]["annotations"][c.GROUP_MIN_MEMBER] = "4"
    res = reconcile_plain_pod(pod("p9", owner=RS), owner_obj=owner_obj, podgroup=existing)
    patch = res.of_type(PatchObject)[0]
    assert patch.ref.kind == "PodGroup"
    assert patch.patch == {"spec": {"minMember": 4, "minResources": {"cpu": "2", "memory": "4Gi"}}}
    # unchanged owner: only the pod annotation
    same = reconcile_plain_pod(
        pod("p10", owner=RS),
        owner_obj=owner_obj,
        podgroup={
            **existing,
            "spec": {
                **existing["spec"],
                "minMember": 4,
                "minResources": {"cpu": "2", "memory": "4Gi"},
            },
        },
    )
    assert [a.ref.kind for a in same.actions] == ["Pod"]


def _trainer_gang() -> GangSpec:
    ref = WorkloadRef(
        api_version="example.com/v1", kind="Trainer", namespace="ns", name="t", gang_name="t"
    )
    return GangSpec(name="t", namespace="ns", min_member=2, workload=ref, adapter="fake")


def test_no_podgroup_recreated_for_a_finished_pod_or_workload() -> None:
    """The operator deletes its PodGroup when its job ends; the finished pods that stay behind
    (or a pod of a finished workload) must not bring a new PodGroup back that then holds the
    queue's resources (issue 34, finding 5)."""
    gang = _trainer_gang()
    workload = {"metadata": {"name": "t", "creationTimestamp": "2025-12-31T23:00:00Z"}}
    done = {**pod("t-worker-0"), "status": {"phase": "Succeeded"}}
    res = reconcile_adapter_pod(
        done, adapter=FakeAdapter(), gang=gang, podgroup=None, now=NOW, workload=workload
    )  # type: ignore[arg-type]
    assert res.actions == []
    running = {**pod("t-worker-1"), "status": {"phase": "Running"}}
    res = reconcile_adapter_pod(
        running,
        adapter=FakeAdapter(),
        gang=gang,
        podgroup=None,
        now=NOW,
        workload=workload,
        workload_finished=True,
    )  # type: ignore[arg-type]
    assert res.actions == []
    res = reconcile_adapter_pod(
        running, adapter=FakeAdapter(), gang=gang, podgroup=None, now=NOW, workload=workload
    )  # type: ignore[arg-type]
    assert res.of_type(CreateObject)


def test_a_group_of_an_earlier_workload_of_the_same_name_is_replaced() -> None:
    """A workload deleted and created again under its name, before the garbage collector removed
    its old PodGroup: that group (owned by the old uid) is deleted, that incarnation only, and
    the pod comes back to make the new one. Kept, it would vanish under the pods later."""
    ref = WorkloadRef(
        api_version="example.com/v1", kind="Trainer", namespace="ns", name="t", gang_name="t"
    )
    gang = GangSpec(
        name="t",
        namespace="ns",
        min_member=2,
        workload=ref,
        adapter="fake",
        owner=OwnerRef("example.com/v1", "Trainer", "t", "new-uid"),
    )
    workload = {"metadata": {"name": "t", "uid": "new-uid", "creationTimestamp": "2025-12-31Z"}}
    made = podgroup_manifest(gang)
    mine = {**made, "metadata": {**made["metadata"], "uid": "pg-1"}}

    def group_actions(group: dict[str, Any]) -> list[Any]:
        res = reconcile_adapter_pod(
            pod("t-worker-0"),
            adapter=FakeAdapter(),  # type: ignore[arg-type]
            gang=gang,
            podgroup=group,
            now=NOW,
            workload=workload,
        )
        assert res.requeue_after is not None or group is mine
        return [a for a in res.actions if a.ref.kind == "PodGroup"]

    assert group_actions(mine) == []  # its own group, up to date
    owner = {**mine["metadata"]["ownerReferences"][0], "uid": "old-uid"}
    stale = {**mine, "metadata": {**mine["metadata"], "ownerReferences": [owner]}}
    (delete,) = group_actions(stale)
    assert isinstance(delete, DeleteObject)
    assert (delete.ref.name, delete.ref.uid) == ("t", "pg-1")


def test_workload_observation_finished_follows_the_latest_phase() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    later = t0 + timedelta(seconds=5)
    assert WorkloadObservation(phases=[("Running", t0), ("Completed", later)]).finished
    assert not WorkloadObservation(phases=[("Failed", t0), ("Running", later)]).finished
    assert not WorkloadObservation().finished
