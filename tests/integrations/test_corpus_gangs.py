"""Every framework manifest of shared/corpus/frameworks maps to the gang derived by hand.

Each row's expected values were worked out from the manifest text, not from the code; the
comment on each row shows the arithmetic. Conventions used throughout:
* a container's request for a resource it only limits is the limit (the API server defaults
  requests that way) - so `limits: {nvidia.com/gpu: 1}` requests 1 GPU;
* Kubeflow/MPI PodGroup = the job name; KubeRay `ray-<cluster>-pg` (`ray-<rayjob>-pg` for a
  RayJob's cluster); spark-operator `spark-<app>-pg`;
* no manifest sets a Volcano queue except the two KubeRay `volcano-scheduler-queue` samples;
  `kai.scheduler/queue` and `yunikorn.apache.org/queue` are other schedulers' queues (None);
* Spark memory: pod memory = memory + max(factor*memory, 384Mi), factor 0.1 (0.4 for Python),
  unless memoryOverhead is given; `512m` is 512 MiB.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import pytest

from batch.api.integration import GangSpec, WorkloadAdapter, adapter_for_workload
from integrations.ray import RAY, cluster_for
from integrations.spark import application_for
from tests.integrations.conftest import load_workload


@dataclass(frozen=True)
class Row:
    path: str
    kind: str
    name: str | None  # None: no gang for this workload
    min_member: int = 0
    min_task: dict[str, int] = field(default_factory=dict)
    min_resources: dict[str, str] = field(default_factory=dict)
    queue: str | None = None
    adopt: bool = False
    leader: str | None = None
    namespace: str = "default"


GPU = "nvidia.com/gpu"

ROWS = [
    # ---------------------------------------------------------------- PyTorchJob
    # Master 1 + Worker 1, no resources anywhere.
    Row("pytorch/demo.yaml", "PyTorchJob", "torchrun-cpu", 2, {"master": 1, "worker": 1}),
    # Worker-only, replicas 2, elasticPolicy.minReplicas 1 -> the gang needs 1 worker.
    Row("pytorch/echo.yaml", "PyTorchJob", "elastic-example-echo", 1, {"worker": 1}),
    # Worker-only, replicas 2, elastic min 1; each worker requests cpu 4 -> 1 x 4.
    Row(
        "pytorch/imagenet.yaml",
        "PyTorchJob",
        "elastic-example-imagenet",
        1,
        {"worker": 1},
        {"cpu": "4"},
    ),
    # Master 1 + Worker 1, each limits nvidia.com/gpu 1 -> 2 GPUs.
    Row(
        "pytorch/pytorch_deepspeed_demo.yaml",
        "PyTorchJob",
        "pytorch-deepspeed-demo",
        2,
        {"master": 1, "worker": 1},
        {GPU: "2"},
    ),
    Row(
        "pytorch/pytorch_job_mnist_gloo.yaml",
        "PyTorchJob",
        "pytorch-dist-mnist-gloo",
        2,
        {"master": 1, "worker": 1},
        {GPU: "2"},
    ),
    Row(
        "pytorch/pytorch_job_mnist_mpi.yaml",
        "PyTorchJob",
        "pytorch-dist-mnist-mpi",
        2,
        {"master": 1, "worker": 1},
        {GPU: "2"},
    ),
    Row(
        "pytorch/pytorch_job_mnist_nccl.yaml",
        "PyTorchJob",
        "pytorch-dist-mnist-nccl",
        2,
        {"master": 1, "worker": 1},
        {GPU: "2"},
    ),
    # Master 1 + Worker 3, no resources.
    Row(
        "pytorch/pytorch_job_sendrecv.yaml",
        "PyTorchJob",
        "pytorch-dist-basic-sendrecv",
        4,
        {"master": 1, "worker": 3},
    ),
    # Master 1 + Worker 1 in namespace kubeflow.
    Row(
        "pytorch/simple.yaml",
        "PyTorchJob",
        "pytorch-simple",
        2,
        {"master": 1, "worker": 1},
        namespace="kubeflow",
    ),
    # ---------------------------------------------------------------- MPIJob v2beta1
    # Launcher (no resources) + 2 workers requesting cpu 16 / 128Gi / 1 GPU each (requests win
    # over the limits of 30 / 230Gi / 2) -> cpu 32, 256Gi, 2 GPUs.
    Row(
        "mpi/deepspeed-config.yaml",
        "MPIJob",
        "deepspeed-mpijob",
        3,
        {"launcher": 1, "worker": 2},
        {"cpu": "32", "memory": "256Gi", GPU: "2"},
    ),
    # Launcher requests 50m / 128Mi; 2 workers limit 8 GPUs each -> 16 GPUs.
    Row(
        "mpi/nccl-tests.yaml",
        "MPIJob",
        "nccl-tests",
        3,
        {"launcher": 1, "worker": 2},
        {"cpu": "50m", "memory": "128Mi", GPU: "16"},
    ),
    # Launcher limits 1 cpu / 1Gi, 2 workers the same -> 3 cpu, 3Gi.
    Row(
        "mpi/pi-intel.yaml",
        "MPIJob",
        "pi",
        3,
        {"launcher": 1, "worker": 2},
        {"cpu": "3", "memory": "3Gi"},
    ),
    Row(
        "mpi/pi-mpich.yaml",
        "MPIJob",
        "pi",
        3,
        {"launcher": 1, "worker": 2},
        {"cpu": "3", "memory": "3Gi"},
    ),
    Row(
        "mpi/pi.yaml",
        "MPIJob",
        "pi",
        3,
        {"launcher": 1, "worker": 2},
        {"cpu": "3", "memory": "3Gi"},
    ),
    # Launcher without resources; 2 workers limit 1 GPU each.
    Row(
        "mpi/tensorflow-benchmarks.yaml",
        "MPIJob",
        "tensorflow-benchmarks",
        3,
        {"launcher": 1, "worker": 2},
        {GPU: "2"},
    ),
    # Launcher 1 cpu / 2Gi + 2 workers x (2 cpu / 4Gi) -> 5 cpu, 10Gi.
    Row(
        "mpi/tensorflow-mnist.yaml",
        "MPIJob",
        "tensorflow-mnist",
        3,
        {"launcher": 1, "worker": 2},
        {"cpu": "5", "memory": "10Gi"},
    ),
    # ---------------------------------------------------------------- RayCluster
    # Autoscaling -> minReplicas: large-cpu-group 1, accelerator 0, spot 0 -> head + 1 worker.
    # Head requests 1 cpu / 2Gi plus the autoscaler sidecar (autoscalerOptions.resources
    # requests 500m / 512Mi), worker 2 cpu / 4Gi -> 3500m, 2048+512+4096 = 6656Mi.
    Row(
        "ray/ray-cluster-label-selector.yaml",
        "RayCluster",
        "ray-ray-label-cluster-pg",
        2,
        {"headgroup": 1, "large-cpu-group": 1},
        {"cpu": "3500m", "memory": "6656Mi"},
    ),
    # Autoscaling, small-group minReplicas 0 -> the head alone: 1 cpu / 2Gi + sidecar 500m/512Mi.
    Row(
        "ray/ray-cluster.autoscaler.yaml",
        "RayCluster",
        "ray-raycluster-autoscaler-pg",
        1,
        {"headgroup": 1},
        {"cpu": "1500m", "memory": "2560Mi"},
    ),
    # No autoscaling: head 1 cpu / 2Gi + 2 workers x (1 cpu / 1Gi) -> 3 cpu, 4Gi. The KAI queue
    # label is not a Volcano queue.
    Row(
        "ray/ray-cluster.kai-scheduler.yaml",
        "RayCluster",
        "ray-raycluster-sample-pg",
        3,
        {"headgroup": 1, "worker": 2},
        {"cpu": "3", "memory": "4Gi"},
    ),
    Row(
        "ray/ray-cluster.scheduler-plugins.yaml",
        "RayCluster",
        "ray-test-podgroup-0-pg",
        3,
        {"headgroup": 1, "worker": 2},
        {"cpu": "3", "memory": "4Gi"},
    ),
    # Same shape; label volcano.sh/queue-name: kuberay-test-queue.
    Row(
        "ray/ray-cluster.volcano-scheduler-queue.yaml",
        "RayCluster",
        "ray-test-cluster-0-pg",
        3,
        {"headgroup": 1, "worker": 2},
        {"cpu": "3", "memory": "4Gi"},
        queue="kuberay-test-queue",
    ),
    # Same shape; yunikorn.apache.org/queue is YuniKorn's queue, not Volcano's.
    Row(
        "ray/ray-cluster.yunikorn-scheduler.yaml",
        "RayCluster",
        "ray-test-yunikorn-0-pg",
        3,
        {"headgroup": 1, "worker": 2},
        {"cpu": "3", "memory": "4Gi"},
    ),
    # ---------------------------------------------------------------- RayJob (its RayCluster)
    # generateName pytorch-text-classifier- (the test assigns the suffix "abcde"); head-only
    # cluster requesting 2 cpu / 8G / 1 GPU.
    Row(
        "ray/ray-job.pytorch-distributed-training.yaml",
        "RayJob",
        "ray-pytorch-text-classifier-abcde-pg",
        1,
        {"headgroup": 1},
        {"cpu": "2", "memory": "8G", GPU: "1"},
    ),
    # Head 1 cpu / 8G + gpu-group 4 x (1 cpu / 8G / 1 GPU) -> 5 pods, 5 cpu, 40G, 4 GPUs.
    Row(
        "ray/ray-job.pytorch-image-classifier.yaml",
        "RayJob",
        "ray-pytorch-image-classifier-abcde-pg",
        5,
        {"headgroup": 1, "gpu-group": 4},
        {"cpu": "5", "memory": "40G", GPU: "4"},
    ),
    # Head 8 cpu / 40G; tpu-group 1 replica x numOfHosts 4 = 4 pods x (24 cpu / 200G / 4 TPU)
    # -> 5 pods, 8+96 = 104 cpu, 40+800 = 840G, 16 TPU.
    Row(
        "ray/ray-job.tpu-v6e-16-multihost.yaml",
        "RayJob",
        "ray-v6e-16-job-pg",
        5,
        {"headgroup": 1, "tpu-group": 4},
        {"cpu": "104", "memory": "840G", "google.com/tpu": "16"},
    ),
    # Head 1 cpu / 2Gi + 2 x (1 cpu / 1Gi); the RayJob's queue label is copied to its cluster.
    Row(
        "ray/ray-job.volcano-scheduler-queue.yaml",
        "RayJob",
        "ray-rayjob-sample-0-pg",
        3,
        {"headgroup": 1, "small-group": 2},
        {"cpu": "3", "memory": "4Gi"},
        queue="kuberay-test-queue",
    ),
    # ---------------------------------------------------------------- RayService (its RayCluster)
    # Cluster "<svc>-raycluster-x1y2z": head requests 2 cpu / 4Gi + gpu-group 1 x
    # (32 cpu / 32Gi / 4 GPU) -> 2 pods, 34 cpu, 36Gi, 4 GPUs.
    Row(
        "ray/ray-service.llm-serve.yaml",
        "RayService",
        "ray-ray-serve-llm-raycluster-x1y2z-pg",
        2,
        {"headgroup": 1, "gpu-group": 1},
        {"cpu": "34", "memory": "36Gi", GPU: "4"},
    ),
    # Head requests 2 cpu / 2Gi + small-group 1 x (500m / 2Gi) -> 2500m, 4Gi.
    Row(
        "ray/ray-service.sample.yaml",
        "RayService",
        "ray-rayservice-sample-raycluster-x1y2z-pg",
        2,
        {"headgroup": 1, "small-group": 1},
        {"cpu": "2500m", "memory": "4Gi"},
    ),
    # ---------------------------------------------------------------- SparkApplication
    # Scala, driver cores 1 / 512m -> 512 + max(51, 384) = 896Mi; 1 executor the same.
    Row(
        "spark/spark-pi.yaml",
        "SparkApplication",
        "spark-spark-pi-pg",
        2,
        {"spark-driver": 1, "spark-executor": 1},
        {"cpu": "2", "memory": "1792Mi"},
        leader="spark-driver",
    ),
    # Dynamic allocation: the gang is the driver + minExecutors 1 (not instances/initial 2).
    Row(
        "spark/spark-pi-dynamic-allocation.yaml",
        "SparkApplication",
        "spark-spark-pi-dynamic-allocation-pg",
        2,
        {"spark-driver": 1, "spark-executor": 1},
        {"cpu": "2", "memory": "1792Mi"},
        leader="spark-driver",
    ),
    # batchScheduler: kube-scheduler - the user chose another scheduler: no gang.
    Row("spark/spark-pi-kube-scheduler.yaml", "SparkApplication", None),
    # Driver 512m + memoryOverhead 512m = 1024Mi; executor 1g + 512m = 1536Mi; 1 cpu each
    # (the pod template's cpu/memory are ignored by Spark) -> 2 cpu, 2560Mi.
    Row(
        "spark/spark-pi-pod-template.yaml",
        "SparkApplication",
        "spark-spark-pi-pod-template-pg",
        2,
        {"spark-driver": 1, "spark-executor": 1},
        {"cpu": "2", "memory": "2560Mi"},
        leader="spark-driver",
    ),
    # Python: factor 0.4 -> 512 + max(204, 384) = 896Mi per pod.
    Row(
        "spark/spark-pi-python.yaml",
        "SparkApplication",
        "spark-spark-pi-python-pg",
        2,
        {"spark-driver": 1, "spark-executor": 1},
        {"cpu": "2", "memory": "1792Mi"},
        leader="spark-driver",
    ),
    # ScheduledSparkApplication: one run "spark-pi-scheduled-1700000000" from spec.template.
    Row(
        "spark/spark-pi-scheduled.yaml",
        "ScheduledSparkApplication",
        "spark-spark-pi-scheduled-1700000000-pg",
        2,
        {"spark-driver": 1, "spark-executor": 1},
        {"cpu": "2", "memory": "1792Mi"},
        leader="spark-driver",
    ),
    # batchScheduler volcano: the operator makes spark-<app>-pg -> adopt; 2 executors -> 3 pods
    # x (1 cpu / 896Mi) = 3 cpu, 2688Mi.
    Row(
        "spark/spark-pi-volcano.yaml",
        "SparkApplication",
        "spark-spark-pi-volcano-pg",
        3,
        {"spark-driver": 1, "spark-executor": 2},
        {"cpu": "3", "memory": "2688Mi"},
        adopt=True,
        leader="spark-driver",
    ),
    # batchScheduler yunikorn (its queue root.default is YuniKorn's): no gang.
    Row("spark/spark-pi-yunikorn.yaml", "SparkApplication", None),
]


def workload_as_operator_sees_it(row: Row) -> dict[str, Any]:
    """The object the PodGroup controller is handed: the manifest as stored by the API server
    (a generated name gets the suffix "abcde", a uid is assigned), and for RayService /
    ScheduledSparkApplication the child object their operator creates."""
    obj = copy.deepcopy(load_workload(row.path, row.kind))
    meta = obj.setdefault("metadata", {})
    if "name" not in meta:
        meta["name"] = meta["generateName"] + "abcde"
    meta["uid"] = f"uid-{meta['name']}"
    if row.kind == "RayService":
        obj = cluster_for(obj, f"{meta['name']}-raycluster-x1y2z")
        obj["metadata"]["uid"] = "uid-cluster"
    elif row.kind == "RayJob":
        obj = cluster_for(obj, f"{meta['name']}-q7w2e")
        obj["metadata"]["uid"] = "uid-cluster"
    elif row.kind == "ScheduledSparkApplication":
        obj = application_for(obj, f"{meta['name']}-1700000000")
        obj["metadata"]["uid"] = "uid-run"
    return obj


def gang_of(row: Row, adapters: list[WorkloadAdapter]) -> GangSpec | None:
    workload = workload_as_operator_sees_it(row)
    adapter = adapter_for_workload(workload, adapters)
    assert adapter is not None, f"no adapter watches {workload['apiVersion']} {workload['kind']}"
    return adapter.gang_for_workload(workload)


def test_every_corpus_workload_has_a_row() -> None:
    import yaml

    from tests.integrations.conftest import frameworks_dir

    workload_kinds = {
        "PyTorchJob",
        "MPIJob",
        "RayCluster",
        "RayJob",
        "RayService",
        "SparkApplication",
        "ScheduledSparkApplication",
    }
    found = set()
    for path in sorted(frameworks_dir().glob("*/*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") in workload_kinds:
                found.add((f"{path.parent.name}/{path.name}", doc["kind"]))
    assert found == {(r.path, r.kind) for r in ROWS}


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.path.split("/")[-1])
def test_corpus_gang(row: Row, adapters: list[WorkloadAdapter]) -> None:
    gang = gang_of(row, adapters)
    if row.name is None:
        assert gang is None
        return
    assert gang is not None
    assert gang.name == row.name
    assert gang.namespace == row.namespace
    assert gang.min_member == row.min_member
    assert dict(gang.min_task_member) == row.min_task
    assert dict(gang.min_resources or {}) == row.min_resources
    assert gang.queue == row.queue
    assert gang.adopt_existing is row.adopt
    assert gang.leader_role == row.leader
    # The operator's own PodGroup name is the gang's name: Tephra and a Volcano-configured
    # operator can never make two groups for one workload.
    assert gang.existing_podgroup_name == row.name
    # Tephra's PodGroup is owned by the workload it was derived from.
    assert gang.owner is not None and gang.owner.uid.startswith("uid-")


@pytest.mark.parametrize("row", [r for r in ROWS if r.kind == "RayJob"], ids=lambda r: r.path)
def test_rayjob_gang_is_the_same_from_the_job_or_its_cluster(row: Row) -> None:
    job = copy.deepcopy(load_workload(row.path, row.kind))
    meta = job["metadata"]
    meta.setdefault("name", meta.get("generateName", "") + "abcde")
    direct = RAY.gang_for_workload(job)
    assert direct is not None
    assert (direct.name, direct.min_member, dict(direct.min_resources or {})) == (
        row.name,
        row.min_member,
        row.min_resources,
    )
    assert direct.workload.kind == "RayJob"
