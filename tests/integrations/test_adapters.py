"""Adapter features the corpus manifests do not exercise (the SOURCE.txt files say which fields
no upstream example sets: schedulingPolicy, runLauncherAsWorker, batchSchedulerOptions, GPUs in
Spark), and the one-line errors for workloads a user got wrong."""

from __future__ import annotations

from typing import Any

import pytest

from batch.api.integration import (
    GangError,
    apply_gang_injection,
    mutate_pod_for_gang,
)
from batch.controllers.gang import PodGroupAction, decide_podgroup
from integrations.mpi import MPI, MPI_V1
from integrations.pytorch import PYTORCH, TENSORFLOW
from integrations.ray import RAY
from integrations.spark import SPARK, jvm_memory_mib


def replica(n: int, cpu: str | None = None, *, res: dict[str, str] | None = None) -> dict[str, Any]:
    """A replica spec of n pods, each requesting `cpu` (and the resources in `res`)."""
    requests = {**({"cpu": cpu} if cpu else {}), **(res or {})}
    container: dict[str, Any] = {"name": "main", "image": "x"}
    if requests:
        container["resources"] = {"requests": requests}
    return {"replicas": n, "template": {"spec": {"containers": [container]}}}


def pytorchjob(spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "train", "namespace": "ml", "uid": "u-train", **meta},
        "spec": spec,
    }


# --------------------------------------------------------------------------- PyTorchJob


def test_pytorch_scheduling_policy() -> None:
    job = pytorchjob(
        {
            "runPolicy": {
                "schedulingPolicy": {
                    "minAvailable": 3,
                    "queue": "research",
                    "priorityClass": "high",
                }
            },
            "pytorchReplicaSpecs": {
                "Master": replica(1, cpu="2"),
                "Worker": replica(4, cpu="1", res={"nvidia.com/gpu": "1"}),
            },
        }
    )
    gang = PYTORCH.gang_for_workload(job)
    assert gang is not None
    # minAvailable 3 = the master + 2 of the 4 workers; minResources = those 3 pods.
    assert gang.min_member == 3
    assert dict(gang.min_task_member) == {"master": 1, "worker": 2}
    assert dict(gang.min_resources or {}) == {"cpu": "4", "nvidia.com/gpu": "2"}
    assert (gang.queue, gang.priority_class_name) == ("research", "high")
    assert gang.owner is not None and gang.owner.kind == "PyTorchJob"


def test_pytorch_given_min_resources_and_annotation_queue() -> None:
    job = pytorchjob(
        {
            "runPolicy": {
                "schedulingPolicy": {"minResources": {"cpu": "1500m", "memory": "1024Mi"}}
            },
            "pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(1)},
        },
        annotations={
            "scheduling.volcano.sh/queue-name": "night",
            "volcano.sh/preemptable": "true",
            "other": "x",
        },
    )
    gang = PYTORCH.gang_for_workload(job)
    assert gang is not None
    assert dict(gang.min_resources or {}) == {"cpu": "1500m", "memory": "1Gi"}
    assert gang.queue == "night"
    # volcano.sh/ annotations travel to the PodGroup, as Volcano's PodGroup controller does.
    assert dict(gang.annotations) == {"volcano.sh/preemptable": "true"}


def test_pytorch_priority_falls_back_to_the_pod_template() -> None:
    master = replica(1)
    master["template"]["spec"]["priorityClassName"] = "train-prio"
    gang = PYTORCH.gang_for_workload(
        pytorchjob({"pytorchReplicaSpecs": {"Master": master, "Worker": replica(2)}})
    )
    assert gang is not None and gang.priority_class_name == "train-prio"


def test_suspended_job_has_no_gang() -> None:
    job = pytorchjob(
        {"runPolicy": {"suspend": True}, "pytorchReplicaSpecs": {"Worker": replica(2)}}
    )
    assert PYTORCH.gang_for_workload(job) is None


def test_tfjob_roles() -> None:
    tf = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "tf", "namespace": "ml"},
        "spec": {
            "tfReplicaSpecs": {
                "PS": replica(2, cpu="1"),
                "Worker": replica(4, cpu="2"),
                "Chief": replica(1, cpu="1"),
            }
        },
    }
    gang = TENSORFLOW.gang_for_workload(tf)
    assert gang is not None
    assert gang.min_member == 7
    assert dict(gang.min_task_member) == {"chief": 1, "ps": 2, "worker": 4}
    assert dict(gang.min_resources or {}) == {"cpu": "11"}
    assert gang.owner is None  # no uid yet: the controller waits for the stored object
    # A PyTorch adapter does not take a TFJob.
    assert PYTORCH.gang_for_workload(tf) is None


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"pytorchReplicaSpecs": {"Worker": {"replicas": "two"}}},
            r"^PyTorchJob ml/train: spec\.pytorchReplicaSpecs\.Worker\.replicas: must be an "
            r"integer >= 0, got 'two'$",
        ),
        (
            {"pytorchReplicaSpecs": {}},
            r"^PyTorchJob ml/train: spec\.pytorchReplicaSpecs: required",
        ),
        (
            {
                "runPolicy": {"schedulingPolicy": {"minAvailable": 9}},
                "pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(2)},
            },
            r"^PyTorchJob ml/train: spec\.runPolicy\.schedulingPolicy\.minAvailable: 9 exceeds "
            r"the 3 replicas of the job$",
        ),
        (
            {
                "runPolicy": {"schedulingPolicy": {"minResources": {"cpu": "fast"}}},
                "pytorchReplicaSpecs": {"Worker": replica(1)},
            },
            r"^PyTorchJob ml/train: spec\.runPolicy\.schedulingPolicy\.minResources: cpu",
        ),
        (
            {"elasticPolicy": {"minReplicas": 5}, "pytorchReplicaSpecs": {"Worker": replica(2)}},
            r"^PyTorchJob ml/train: spec\.elasticPolicy\.minReplicas: 5 exceeds the 2 Worker",
        ),
    ],
)
def test_pytorch_user_errors(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(GangError, match=message) as info:
        PYTORCH.gang_for_workload(pytorchjob(spec))
    assert "\n" not in str(info.value)


# --------------------------------------------------------------------------- MPIJob


def mpijob(**spec: Any) -> dict[str, Any]:
    body = {"mpiReplicaSpecs": {"Launcher": replica(1, cpu="1"), "Worker": replica(3, cpu="2")}}
    body.update(spec)
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "m", "namespace": "hpc", "uid": "u-m"},
        "spec": body,
    }


def test_mpi_run_launcher_as_worker_keeps_the_gang_size() -> None:
    plain = MPI.gang_for_workload(mpijob())
    as_worker = MPI.gang_for_workload(mpijob(runLauncherAsWorker=True))
    assert plain is not None and as_worker is not None
    for gang in (plain, as_worker):
        assert gang.min_member == 4
        assert dict(gang.min_task_member) == {"launcher": 1, "worker": 3}
        assert dict(gang.min_resources or {}) == {"cpu": "7"}
        assert gang.leader_role is None


def test_mpi_wait_for_workers_ready_lets_workers_lead() -> None:
    gang = MPI.gang_for_workload(mpijob(launcherCreationPolicy="WaitForWorkersReady"))
    assert gang is not None and gang.leader_role == "worker"
    first = decide_podgroup(gang, None).body
    assert first is not None
    # The launcher does not exist until the workers run: gate on the 3 workers only, but
    # reserve the whole job at enqueue.
    assert first["spec"]["minMember"] == 3
    assert first["spec"]["minTaskMember"] == {"worker": 3}
    assert first["spec"]["minResources"] == {"cpu": "7"}


@pytest.mark.parametrize(
    ("min_available", "min_member", "workers_min", "cpu"),
    [
        # 3 workers of 2 cpu, launcher 1 cpu. mpi-operator's own PodGroup: minMember =
        # minAvailable (else workers + 1), no per-role minimum.
        (None, 4, 3, "7"),
        (1, 1, 1, "2"),
        (2, 2, 2, "4"),
        (3, 3, 3, "6"),
        (4, 4, 3, "7"),
    ],
)
def test_mpi_wait_for_workers_ready_never_requires_the_launcher(
    min_available: int | None, min_member: int, workers_min: int, cpu: str
) -> None:
    """The operator creates the launcher only once every worker is ready: a gang requiring the
    launcher per role would never place the workers (minAvailable 1 used to give
    minTaskMember {launcher: 1}, minAvailable 2 {launcher: 1, worker: 1})."""
    extra: dict[str, Any] = {"launcherCreationPolicy": "WaitForWorkersReady"}
    if min_available is not None:
        extra["runPolicy"] = {"schedulingPolicy": {"minAvailable": min_available}}
    gang = MPI.gang_for_workload(mpijob(**extra))
    assert gang is not None
    assert gang.min_member == min_member
    assert dict(gang.min_task_member) == {"worker": workers_min}
    assert gang.leader_role == "worker"
    assert dict(gang.min_resources or {}) == {"cpu": cpu}
    for running in (False, True):
        body = decide_podgroup(gang, None, leader_running=running).body
        assert body is not None
        assert body["spec"]["minTaskMember"] == {"worker": workers_min}
        assert body["spec"]["minMember"] == (min_member if running else workers_min)


def test_mpi_scheduling_policy_and_fallbacks() -> None:
    launcher = replica(1)
    launcher["template"]["spec"]["priorityClassName"] = "launcher-prio"
    job = mpijob(
        mpiReplicaSpecs={"Launcher": launcher, "Worker": replica(8, cpu="1")},
        runPolicy={"schedulingPolicy": {"minAvailable": 5}},
    )
    job["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": "hpc-q"}
    gang = MPI.gang_for_workload(job)
    assert gang is not None
    assert gang.min_member == 5
    assert dict(gang.min_task_member) == {"launcher": 1, "worker": 4}
    assert dict(gang.min_resources or {}) == {"cpu": "4"}
    assert gang.queue == "hpc-q"
    assert gang.priority_class_name == "launcher-prio"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"mpiReplicaSpecs": {"Launcher": replica(2), "Worker": replica(1)}},
            r"^MPIJob hpc/m: spec\.mpiReplicaSpecs\.Launcher\.replicas: must be 1, got 2$",
        ),
        (
            {"mpiReplicaSpecs": {"Launcher": replica(1), "Chief": replica(1)}},
            r"^MPIJob hpc/m: spec\.mpiReplicaSpecs: unknown replica type 'chief'",
        ),
        (
            {"runLauncherAsWorker": "yes"},
            r"^MPIJob hpc/m: spec\.runLauncherAsWorker: must be a boolean$",
        ),
    ],
)
def test_mpi_user_errors(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(GangError, match=message):
        MPI.gang_for_workload(mpijob(**spec))


def test_mpi_versions_do_not_cross() -> None:
    v1 = mpijob()
    v1["apiVersion"] = "kubeflow.org/v1"
    assert MPI.gang_for_workload(v1) is None
    gang = MPI_V1.gang_for_workload(v1)
    assert gang is not None and gang.min_member == 4


# --------------------------------------------------------------------------- Ray


def raycluster(spec: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    base: dict[str, Any] = {"headGroupSpec": {"template": replica(1, cpu="1")["template"]}}
    base.update(spec)
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "rc", "namespace": "ray", "uid": "u-rc", "labels": labels or {}},
        "spec": base,
    }


def group(name: str, **fields: Any) -> dict[str, Any]:
    return {"groupName": name, "template": replica(1, cpu="2")["template"], **fields}


def test_ray_replicas_clamped_suspended_groups_skipped_priority_label() -> None:
    rc = raycluster(
        {
            "workerGroupSpecs": [
                group("a", replicas=10, minReplicas=1, maxReplicas=3),  # clamped to 3
                group("b", minReplicas=2),  # replicas default to minReplicas
                group("c", replicas=4, suspend=True),  # suspended: not a member
                group("d", replicas=1, numOfHosts=2),  # 1 replica = 2 hosts
            ]
        },
        {"ray.io/priority-class-name": "urgent"},
    )
    gang = RAY.gang_for_workload(rc)
    assert gang is not None
    assert dict(gang.min_task_member) == {"headgroup": 1, "a": 3, "b": 2, "d": 2}
    assert gang.min_member == 8
    assert dict(gang.min_resources or {}) == {"cpu": "15"}  # 1 + 7 x 2
    assert gang.priority_class_name == "urgent"
    assert gang.name == "ray-rc-pg"


def test_ray_rayjob_on_an_existing_cluster_or_suspended_has_no_gang() -> None:
    job = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "j"},
        "spec": {"clusterSelector": {"ray.io/cluster": "shared"}},
    }
    assert RAY.gang_for_workload(job) is None
    rc = raycluster({"suspend": True})
    assert RAY.gang_for_workload(rc) is None


def test_ray_user_errors() -> None:
    with pytest.raises(GangError, match=r"^RayCluster ray/rc: spec\.headGroupSpec: required$"):
        RAY.gang_for_workload({**raycluster({}), "spec": {}})
    bad = raycluster({"workerGroupSpecs": [group("a", minReplicas=3, maxReplicas=1)]})
    with pytest.raises(
        GangError,
        match=r"^RayCluster ray/rc: spec\.workerGroupSpecs\[0\]\.minReplicas: 3 exceeds "
        r"maxReplicas 1$",
    ):
        RAY.gang_for_workload(bad)
    nameless = raycluster({"workerGroupSpecs": [{"replicas": 1}]})
    with pytest.raises(GangError, match=r"workerGroupSpecs\[0\]\.groupName: required"):
        RAY.gang_for_workload(nameless)


# --------------------------------------------------------------------------- Spark


def sparkapp(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": "Scala",
        "mode": "cluster",
        "driver": {"cores": 1, "memory": "2g"},
        "executor": {
            "instances": 4,
            "cores": 2,
            "memory": "4g",
            "gpu": {"name": "nvidia.com/gpu", "quantity": 1},
        },
    }
    body.update(spec)
    return {
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": "etl", "namespace": "data", "uid": "u-etl"},
        "spec": body,
    }


def test_spark_gang_covers_driver_and_executors_with_gpus() -> None:
    gang = SPARK.gang_for_workload(sparkapp())
    assert gang is not None
    # spark-operator#1343 would give minMember 1; Tephra's gang is 1 driver + 4 executors.
    assert gang.min_member == 5
    assert dict(gang.min_task_member) == {"spark-driver": 1, "spark-executor": 4}
    # driver 2048 + max(204, 384) = 2432Mi; executor 4096 + 409 = 4505Mi (x4 = 18020Mi)
    assert dict(gang.min_resources or {}) == {
        "cpu": "9",
        "memory": f"{2432 + 4 * 4505}Mi",
        "nvidia.com/gpu": "4",
    }
    assert gang.leader_role == "spark-driver"
    assert gang.adopt_existing is False


def test_spark_batch_scheduler_options() -> None:
    app = sparkapp(
        batchScheduler="volcano",
        batchSchedulerOptions={
            "queue": "etl-q",
            "priorityClassName": "batch",
            "resources": {"cpu": "20", "memory": "64Gi"},
        },
    )
    gang = SPARK.gang_for_workload(app)
    assert gang is not None
    assert gang.queue == "etl-q"
    assert gang.priority_class_name == "batch"
    assert dict(gang.min_resources or {}) == {"cpu": "20", "memory": "64Gi"}
    assert gang.adopt_existing is True


def test_spark_client_mode_and_dynamic_floor_zero() -> None:
    client = SPARK.gang_for_workload(sparkapp(mode="client"))
    assert client is not None
    assert client.min_member == 4
    assert dict(client.min_task_member) == {"spark-executor": 4}
    assert client.leader_role is None
    floor_zero = SPARK.gang_for_workload(sparkapp(dynamicAllocation={"enabled": True}))
    assert floor_zero is not None
    assert (floor_zero.min_member, dict(floor_zero.min_task_member)) == (1, {"spark-driver": 1})
    nothing = SPARK.gang_for_workload(sparkapp(mode="client", dynamicAllocation={"enabled": True}))
    assert nothing is None


def test_spark_conf_fallbacks_and_core_request() -> None:
    app = sparkapp(
        executor={"coreRequest": "500m", "memory": "1024m", "memoryOverhead": "1g"},
        sparkConf={"spark.executor.instances": "3"},
    )
    gang = SPARK.gang_for_workload(app)
    assert gang is not None
    assert dict(gang.min_task_member) == {"spark-driver": 1, "spark-executor": 3}
    # driver 1 cpu / 2432Mi; executors 3 x (500m / 1024+1024 Mi)
    assert dict(gang.min_resources or {}) == {"cpu": "2500m", "memory": f"{2432 + 3 * 2048}Mi"}


def test_spark_sizes_from_spark_conf() -> None:
    """spark-operator leaves driver/executor cores and memory unset when sparkConf has them;
    Spark then sizes the pods from the conf."""
    app = sparkapp(
        sparkConf={
            "spark.driver.memory": "4g",
            "spark.driver.cores": "2",
            "spark.executor.memory": "8g",
            "spark.executor.cores": "4",
        },
        driver={},
        executor={"instances": 2},
    )
    gang = SPARK.gang_for_workload(app)
    assert gang is not None
    # driver 2 cpu, 4096 + 409 Mi; executors 2 x (4 cpu, 8192 + 819 Mi)
    assert dict(gang.min_resources or {}) == {
        "cpu": "10",
        "memory": f"{4096 + 409 + 2 * (8192 + 819)}Mi",
    }
    # The request cores and the overhead (size or per-role factor) from sparkConf; the spec's
    # cores give way to a request, as in Spark.
    app = sparkapp(
        sparkConf={
            "spark.kubernetes.executor.request.cores": "3",
            "spark.executor.memoryOverhead": "2g",
            "spark.kubernetes.driver.request.cores": "500m",
            "spark.driver.memoryOverheadFactor": "0.5",
        },
        driver={"cores": 1, "memory": "1g"},
        executor={"instances": 2, "cores": 1, "memory": "1g"},
    )
    gang = SPARK.gang_for_workload(app)
    assert gang is not None
    # driver 500m, 1024 + 512 Mi; executors 2 x (3 cpu, 1024 + 2048 Mi)
    assert dict(gang.min_resources or {}) == {
        "cpu": "6500m",
        "memory": f"{1024 + 512 + 2 * 3072}Mi",
    }
    # The spec field wins over the same setting in sparkConf.
    app = sparkapp(
        sparkConf={"spark.executor.memory": "64g", "spark.executor.cores": "16"},
        executor={"instances": 1, "cores": 2, "memory": "4g"},
    )
    gang = SPARK.gang_for_workload(app)
    assert gang is not None
    assert dict(gang.min_resources or {}) == {"cpu": "3", "memory": f"{2432 + 4505}Mi"}


def test_spark_sidecars_and_init_containers_count() -> None:
    side = [{"name": "proxy", "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}]
    init = [{"name": "fetch", "resources": {"requests": {"cpu": "4", "memory": "8Gi"}}}]
    app = sparkapp(
        driver={"cores": 1, "memory": "1g", "sidecars": side},
        executor={
            "instances": 2,
            "cores": 1,
            "memory": "1g",
            "sidecars": side,
            "initContainers": init,
        },
    )
    gang = SPARK.gang_for_workload(app)
    assert gang is not None
    # driver 1 cpu / 1408Mi + the sidecar = 1500m / 1664Mi; an executor pod needs the larger
    # of its containers (1500m / 1664Mi) and its init container (4 / 8Gi).
    assert dict(gang.min_resources or {}) == {"cpu": "9500m", "memory": f"{1664 + 2 * 8192}Mi"}


def test_spark_conf_size_errors_name_the_conf_key() -> None:
    with pytest.raises(
        GangError,
        match=r"^SparkApplication data/etl: spec\.sparkConf\[spark\.executor\.memory\]: "
        r"'lots' is not a Spark memory size",
    ):
        SPARK.gang_for_workload(
            sparkapp(executor={"instances": 1}, sparkConf={"spark.executor.memory": "lots"})
        )
    bad_sidecar = [{"name": "proxy", "resources": {"requests": {"cpu": "fast"}}}]
    with pytest.raises(
        GangError, match=r"^SparkApplication data/etl: spec\.driver: container proxy: resources"
    ):
        SPARK.gang_for_workload(sparkapp(driver={"sidecars": bad_sidecar}))
    with pytest.raises(GangError, match=r"spec\.executor\.initContainers: must be a list"):
        SPARK.gang_for_workload(sparkapp(executor={"initContainers": {"name": "x"}}))


@pytest.mark.parametrize(
    ("value", "mib"),
    [
        ("512m", 512),
        ("2g", 2048),
        ("1G", 1024),
        ("1024", 1024),
        ("1048576k", 1024),
        ("1t", 1024 * 1024),
        (300, 300),
        ("2gb", 2048),
    ],
)
def test_jvm_memory_strings(value: Any, mib: int) -> None:
    assert jvm_memory_mib(value, what="x") == mib


def test_spark_user_errors() -> None:
    with pytest.raises(
        GangError,
        match=r"^SparkApplication data/etl: spec\.driver\.memory: '1\.5g' is not a Spark memory",
    ):
        SPARK.gang_for_workload(sparkapp(driver={"memory": "1.5g"}))
    with pytest.raises(GangError, match=r"spec\.mode: must be cluster or client"):
        SPARK.gang_for_workload(sparkapp(mode="local"))


def test_spark_submit_driver_pod_is_a_workload() -> None:
    driver = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "pi-driver",
            "namespace": "data",
            "uid": "u-drv",
            "labels": {"spark-role": "driver", "spark-app-selector": "spark-77aa"},
            "annotations": {
                "scheduling.volcano.sh/group-min-member": "3",
                "scheduling.volcano.sh/group-min-resources": '{"cpu": "3", "memory": "6Gi"}',
                "scheduling.volcano.sh/queue-name": "adhoc",
            },
        },
        "spec": {
            "containers": [
                {
                    "name": "spark-kubernetes-driver",
                    "resources": {"requests": {"cpu": "1", "memory": "1408Mi"}},
                }
            ]
        },
    }
    gang = SPARK.gang_for_workload(driver)
    assert gang is not None
    assert gang.name == "spark-77aa-podgroup"
    assert gang.min_member == 3
    assert dict(gang.min_task_member) == {"spark-driver": 1, "spark-executor": 2}
    assert dict(gang.min_resources or {}) == {"cpu": "3", "memory": "6Gi"}
    assert gang.queue == "adhoc"
    assert gang.owner is not None and (gang.owner.kind, gang.owner.uid) == ("Pod", "u-drv")
    assert gang.leader_role == "spark-driver"
    # Without the annotations: the driver alone, with its own requests.
    del driver["metadata"]["annotations"]
    bare = SPARK.gang_for_workload(driver)
    assert bare is not None
    assert (bare.min_member, dict(bare.min_resources or {})) == (
        1,
        {"cpu": "1", "memory": "1408Mi"},
    )
    # With Spark's own VolcanoFeatureStep the driver names its group: adopt it.
    driver["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "spark-77aa-podgroup"}
    own = SPARK.gang_for_workload(driver)
    assert own is not None and own.adopt_existing is True
    # An operator-launched driver is not a native workload (its SparkApplication is).
    driver["metadata"]["labels"]["sparkoperator.k8s.io/app-name"] = "pi"
    assert SPARK.gang_for_workload(driver) is None


OPTED_IN = {"metadata": {"name": "data", "labels": {"tephra.io/gang-injection": "enabled"}}}


def spark_pod(name: str, labels: dict[str, str], *, owner: dict[str, Any] | None = None) -> Any:
    meta: dict[str, Any] = {"name": name, "namespace": "data", "uid": f"u-{name}"}
    meta["labels"] = labels
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
    }


def test_executors_of_a_notebook_driver_are_not_named_a_group_that_never_comes() -> None:
    """Client mode from a notebook: the executors are owned by the notebook pod, which is no
    spark-submit driver and so has no Spark gang. The webhook must not name `<app>-podgroup`
    (nobody would create it); the controller gives them Volcano's default group instead."""
    notebook = spark_pod("notebook", {"app": "jupyter"})
    owner = {"apiVersion": "v1", "kind": "Pod", "name": "notebook", "uid": "u-notebook"}
    executor = spark_pod(
        "exec-1",
        {"spark-role": "executor", "spark-app-selector": "spark-0a1b", "spark-exec-id": "1"},
        owner={**owner, "controller": True},
    )
    ref = SPARK.workload_ref_for_pod(executor)
    assert ref is not None and (ref.kind, ref.name, ref.gang_name) == ("Pod", "notebook", None)
    assert SPARK.gang_for_workload(notebook) is None
    ops = mutate_pod_for_gang(executor, namespace_obj=OPTED_IN, adapters=[SPARK])
    assert ops == [
        {"op": "add", "path": "/spec/schedulerName", "value": "volcano"},
        {
            "op": "add",
            "path": "/metadata/annotations",
            "value": {"volcano.sh/task-spec": "spark-executor"},
        },
    ]


def test_webhook_injection_does_not_make_a_spark_submit_driver_wait_for_sparks_group() -> None:
    """A group name on a spark-submit driver means Spark's VolcanoFeatureStep made the group;
    the opt-in webhook must not write one, or the controller waits the whole grace period for
    a group that only Tephra itself would create."""
    driver = spark_pod("pi-driver", {"spark-role": "driver", "spark-app-selector": "spark-77aa"})
    assert apply_gang_injection(driver, namespace_obj=OPTED_IN, adapters=[SPARK])
    assert driver["spec"]["schedulerName"] == "volcano"
    assert driver["metadata"]["annotations"] == {"volcano.sh/task-spec": "spark-driver"}
    gang = SPARK.gang_for_workload(driver)
    assert gang is not None and gang.name == "spark-77aa-podgroup"
    assert gang.adopt_existing is False
    assert decide_podgroup(gang, None).action is PodGroupAction.CREATE
