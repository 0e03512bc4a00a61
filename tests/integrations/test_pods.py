"""Pod -> workload mapping and roles, with the labels each operator really puts on its pods.

Label conventions (from the corpus SOURCE.txt files, checked against the operators' source):
training-operator `training.kubeflow.org/{operator-name,job-name,replica-type,replica-index,
job-role}`; mpi-operator v2beta1 `job-role` but no `replica-type`; KubeRay `ray.io/{cluster,
node-type,group,...}`; Spark `spark-role`, `spark-app-selector`, spark-operator
`sparkoperator.k8s.io/app-name`.
"""

from __future__ import annotations

from typing import Any

import pytest

from batch.api.integration import (
    WorkloadAdapter,
    WorkloadRef,
    adapter_for_pod,
)


def pod(
    name: str,
    labels: dict[str, str],
    *,
    owner: tuple[str, str, str] | None = None,
    annotations: dict[str, str] | None = None,
    namespace: str = "team-a",
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels}
    if owner is not None:
        api_version, kind, owner_name = owner
        meta["ownerReferences"] = [
            {
                "apiVersion": api_version,
                "kind": kind,
                "name": owner_name,
                "uid": f"uid-{owner_name}",
                "controller": True,
            }
        ]
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": []}}


KF = "training.kubeflow.org/"

CASES: list[tuple[str, dict[str, Any], str | None, WorkloadRef | None, str | None]] = [
    (
        "pytorch master",
        pod(
            "mnist-master-0",
            {
                KF + "operator-name": "pytorchjob-controller",
                KF + "job-name": "mnist",
                KF + "replica-type": "master",
                KF + "replica-index": "0",
                KF + "job-role": "master",
            },
            owner=("kubeflow.org/v1", "PyTorchJob", "mnist"),
        ),
        "pytorch",
        WorkloadRef("kubeflow.org/v1", "PyTorchJob", "team-a", "mnist", "mnist", "uid-mnist"),
        "master",
    ),
    (
        "pytorch worker, labels only (no owner reference)",
        pod(
            "mnist-worker-2",
            {
                KF + "operator-name": "pytorchjob-controller",
                KF + "job-name": "mnist",
                KF + "replica-type": "worker",
                KF + "replica-index": "2",
            },
        ),
        "pytorch",
        WorkloadRef("kubeflow.org/v1", "PyTorchJob", "team-a", "mnist", "mnist"),
        "worker",
    ),
    (
        "tfjob ps",
        pod(
            "tf-ps-0",
            {
                KF + "operator-name": "tfjob-controller",
                KF + "job-name": "tf",
                KF + "replica-type": "ps",
            },
            owner=("kubeflow.org/v1", "TFJob", "tf"),
        ),
        "tensorflow",
        WorkloadRef("kubeflow.org/v1", "TFJob", "team-a", "tf", "tf", "uid-tf"),
        "ps",
    ),
    (
        "mpi v2beta1 worker",
        pod(
            "pi-worker-0",
            {
                KF + "operator-name": "mpi-operator",
                KF + "job-name": "pi",
                KF + "job-role": "worker",
                KF + "replica-index": "0",
            },
            owner=("kubeflow.org/v2beta1", "MPIJob", "pi"),
        ),
        "mpi",
        WorkloadRef("kubeflow.org/v2beta1", "MPIJob", "team-a", "pi", "pi", "uid-pi"),
        "worker",
    ),
    (
        "mpi v2beta1 launcher (pod of the launcher batch Job)",
        pod(
            "pi-launcher-x7k2p",
            {
                KF + "operator-name": "mpi-operator",
                KF + "job-name": "pi",
                KF + "job-role": "launcher",
            },
            owner=("batch/v1", "Job", "pi-launcher"),
        ),
        "mpi",
        WorkloadRef("kubeflow.org/v2beta1", "MPIJob", "team-a", "pi", "pi"),
        "launcher",
    ),
    (
        "mpi v1 (training-operator) launcher",
        pod(
            "pi-launcher",
            {
                KF + "operator-name": "mpijob-controller",
                KF + "job-name": "pi",
                KF + "replica-type": "launcher",
            },
        ),
        "mpi-v1",
        WorkloadRef("kubeflow.org/v1", "MPIJob", "team-a", "pi", "pi"),
        "launcher",
    ),
    (
        "ray head",
        pod(
            "c-head-abcde",
            {
                "ray.io/cluster": "c",
                "ray.io/node-type": "head",
                "ray.io/group": "headgroup",
                "ray.io/is-ray-node": "yes",
                "ray.io/identifier": "c-head",
            },
            owner=("ray.io/v1", "RayCluster", "c"),
        ),
        "ray",
        # The gang name is not known from these labels alone: a RayJob's cluster looks the
        # same and its group is named after the RayJob.
        WorkloadRef("ray.io/v1", "RayCluster", "team-a", "c", None, "uid-c"),
        "headgroup",
    ),
    (
        "ray worker of a multi-host group",
        pod(
            "c-worker-tpu-group-0-xyz",
            {
                "ray.io/cluster": "c",
                "ray.io/node-type": "worker",
                "ray.io/group": "tpu-group",
                "ray.io/worker-group-replica-name": "tpu-group-0",
                "ray.io/replica-host-index": "2",
            },
            owner=("ray.io/v1", "RayCluster", "c"),
        ),
        "ray",
        WorkloadRef("ray.io/v1", "RayCluster", "team-a", "c", None, "uid-c"),
        "tpu-group",
    ),
    (
        "ray worker carrying the RayJob origin labels",
        pod(
            "job-q7w2e-worker-small-group-abc",
            {
                "ray.io/cluster": "job-q7w2e",
                "ray.io/node-type": "worker",
                "ray.io/group": "small-group",
                "ray.io/originated-from-crd": "RayJob",
                "ray.io/originated-from-cr-name": "job",
            },
        ),
        "ray",
        WorkloadRef("ray.io/v1", "RayCluster", "team-a", "job-q7w2e", "ray-job-pg"),
        "small-group",
    ),
    (
        "RayJob submitter pod is not a gang member",
        pod(
            "job-submitter-abc",
            {"batch.kubernetes.io/job-name": "job", "job-name": "job"},
            owner=("batch/v1", "Job", "job"),
        ),
        None,
        None,
        None,
    ),
    (
        "spark-operator driver",
        pod(
            "spark-pi-driver",
            {
                "spark-role": "driver",
                "spark-app-selector": "spark-0a1b2c",
                "sparkoperator.k8s.io/app-name": "spark-pi",
                "sparkoperator.k8s.io/launched-by-spark-operator": "true",
                "sparkoperator.k8s.io/submission-id": "f00",
            },
        ),
        "spark",
        WorkloadRef(
            "sparkoperator.k8s.io/v1beta2",
            "SparkApplication",
            "team-a",
            "spark-pi",
            "spark-spark-pi-pg",
        ),
        "spark-driver",
    ),
    (
        "spark-operator executor",
        pod(
            "spark-pi-5d2f-exec-1",
            {
                "spark-role": "executor",
                "spark-exec-id": "1",
                "spark-app-selector": "spark-0a1b2c",
                "sparkoperator.k8s.io/app-name": "spark-pi",
            },
            owner=("v1", "Pod", "spark-pi-driver"),
        ),
        "spark",
        WorkloadRef(
            "sparkoperator.k8s.io/v1beta2",
            "SparkApplication",
            "team-a",
            "spark-pi",
            "spark-spark-pi-pg",
        ),
        "spark-executor",
    ),
    (
        "spark-submit driver (no operator)",
        pod("pi-driver", {"spark-role": "driver", "spark-app-selector": "spark-77aa"}),
        "spark",
        # No gang name for the webhook: on a driver it would read as Spark's own group.
        WorkloadRef("v1", "Pod", "team-a", "pi-driver", None),
        "spark-driver",
    ),
    (
        "spark-submit executor, grouped with its driver by spark-app-selector",
        pod(
            "pi-exec-3",
            {"spark-role": "executor", "spark-app-selector": "spark-77aa", "spark-exec-id": "3"},
            owner=("v1", "Pod", "pi-driver"),
        ),
        "spark",
        # No gang name: the owner pod may be a notebook (client mode) that has no gang.
        WorkloadRef("v1", "Pod", "team-a", "pi-driver", None, "uid-pi-driver"),
        "spark-executor",
    ),
    (
        "plain Deployment pod",
        pod(
            "web-7c9-abc",
            {"app": "web", "pod-template-hash": "7c9"},
            owner=("apps/v1", "ReplicaSet", "web-7c9"),
        ),
        None,
        None,
        None,
    ),
    (
        "job-name label of another operator",
        pod("x-0", {KF + "operator-name": "someone-else", KF + "job-name": "x"}),
        None,
        None,
        None,
    ),
]


@pytest.mark.parametrize(
    ("pod_obj", "adapter_name", "ref", "role"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_pod_maps_to_its_workload(
    adapters: list[WorkloadAdapter],
    pod_obj: dict[str, Any],
    adapter_name: str | None,
    ref: WorkloadRef | None,
    role: str | None,
) -> None:
    claimed = adapter_for_pod(pod_obj, adapters)
    if adapter_name is None:
        assert claimed is None
        return
    assert claimed is not None
    adapter, got = claimed
    assert adapter.name == adapter_name
    assert got == ref
    assert adapter.role_of_pod(pod_obj) == role
    # Exactly one adapter claims a workload pod.
    assert [a.name for a in adapters if a.workload_ref_for_pod(pod_obj) is not None] == [
        adapter_name
    ]


def test_operator_task_spec_wins_over_labels(adapters: list[WorkloadAdapter]) -> None:
    """training-operator configured for Volcano writes the role itself; keep its value."""
    p = pod(
        "j-worker-0",
        {
            KF + "operator-name": "pytorchjob-controller",
            KF + "job-name": "j",
            KF + "replica-type": "worker",
        },
        annotations={"scheduling.k8s.io/group-name": "j", "volcano.sh/task-spec": "Worker"},
    )
    claimed = adapter_for_pod(p, adapters)
    assert claimed is not None
    assert claimed[0].role_of_pod(p) == "Worker"


def test_ray_cluster_gang_name_follows_its_origin() -> None:
    from integrations.ray import RAY

    plain = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "c"}}
    of_job = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": "job-q7w2e",
            "labels": {
                "ray.io/originated-from-crd": "RayJob",
                "ray.io/originated-from-cr-name": "job",
            },
        },
    }
    of_service = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": "svc-raycluster-abcde",
            "labels": {
                "ray.io/originated-from-crd": "RayService",
                "ray.io/originated-from-cr-name": "svc",
            },
        },
    }
    assert RAY.existing_podgroup_name(plain) == "ray-c-pg"
    assert RAY.existing_podgroup_name(of_job) == "ray-job-pg"
    assert RAY.existing_podgroup_name(of_service) == "ray-svc-raycluster-abcde-pg"
