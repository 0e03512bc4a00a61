"""End to end with the real scheduler: no pod of a workload is bound until its whole gang fits.

The sandbox (fixture `e2e_api` in conftest) runs Tephra's controllers and scheduler with the
operators' CRDs installed; the test plays each operator (and, for Spark, the driver creating
its executors). Every test has its own namespace, its own extended resource
(`tephra.test/<framework>`) and its own nodes, so the tests do not compete for capacity. Each
gang is built so that the queue admits it (enqueue's overcommit check passes) but the nodes hold
only part of it: two nodes of 3 slots, pods of 2 slots - one pod per node, so 2 of 3 pods would
fit. Without gang scheduling 2 pods would be bound; with it none is, until a third node arrives
and all are bound together.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest

pytest.importorskip("batch.sandbox.testing")

from kubernetes import client

from batch.sandbox.nodes import make_nodes
from tests.waiting import wait_for

PG = ("scheduling.volcano.sh", "v1beta1")
SLOT = 2  # slots per pod
NODE_SLOTS = 3  # slots per node: one pod per node


class Env:
    def __init__(self, api: Any, ns: str) -> None:
        self.ns = ns
        self.core = client.CoreV1Api(api)
        self.co = client.CustomObjectsApi(api)
        self.ext = client.ApiextensionsV1Api(api)
        self.sched = client.SchedulingV1Api(api)

    def add_nodes(self, framework: str, count: int, *, first: int = 0) -> None:
        for i, node in enumerate(make_nodes(count=count + first, prefix=framework)):
            if i < first:
                continue
            for field in ("capacity", "allocatable"):
                node["status"][field][f"tephra.test/{framework}"] = str(NODE_SLOTS)
            self.core.create_node(node)

    def podgroup(self, name: str) -> dict[str, Any] | None:
        try:
            return self.co.get_namespaced_custom_object(*PG, self.ns, "podgroups", name)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def bound(self, names: list[str]) -> dict[str, str | None]:
        return {n: self.core.read_namespaced_pod(n, self.ns).spec.node_name for n in names}

    def seen(self, pg_name: str) -> bool:
        """The scheduler has looked at the gang (it writes a condition either way)."""
        pg = self.podgroup(pg_name)
        return bool(pg and (pg.get("status") or {}).get("conditions"))

    def unschedulable(self, pg_name: str, min_member: int | None = None) -> bool:
        """The scheduler has looked at the gang (of this size) and found it does not fit."""
        pg = self.podgroup(pg_name)
        if pg is None:
            return False
        if min_member is not None and (pg.get("spec") or {}).get("minMember") != min_member:
            return False
        conds = (pg.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Unschedulable" and c.get("status") == "True" for c in conds)


@pytest.fixture
def env(e2e_api: Any, request: pytest.FixtureRequest) -> Env:
    """A fresh namespace per test: gangs of different tests never share one."""
    ns = request.node.name.removeprefix("test_").replace("_", "-")[:50]
    e = Env(e2e_api, ns)
    e.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    return e


def pod_spec(
    framework: str, *, cpu: str | None = None, memory: str | None = None
) -> dict[str, Any]:
    res = {f"tephra.test/{framework}": str(SLOT)}
    requests = {**res, **({"cpu": cpu} if cpu else {}), **({"memory": memory} if memory else {})}
    return {
        "schedulerName": "volcano",
        "containers": [
            {"name": "main", "image": "x", "resources": {"requests": requests, "limits": dict(res)}}
        ],
    }


def owner_of(obj: dict[str, Any]) -> dict[str, Any]:
    m = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": m["name"],
        "uid": m["uid"],
        "controller": True,
    }


def create_pod(
    env: Env, name: str, labels: dict[str, str], owner: dict[str, Any], spec: dict[str, Any]
) -> str:
    env.core.create_namespaced_pod(
        env.ns,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": labels, "ownerReferences": [owner]},
            "spec": copy.deepcopy(spec),
        },
    )
    return name


def gang_is_all_or_nothing(
    env: Env, framework: str, pg_name: str, pods: list[str], min_member: int
) -> None:
    """With 2 one-pod nodes none of the 3 pods is bound; a third node binds them all."""
    wait_for(lambda: env.seen(pg_name), f"the scheduler to look at {pg_name}")
    time.sleep(0.6)  # a few more scheduling cycles
    assert env.bound(pods) == dict.fromkeys(pods)
    pg = env.podgroup(pg_name)
    assert pg is not None and pg["spec"]["minMember"] == min_member
    env.add_nodes(framework, 1, first=2)
    placed = wait_for(lambda: all((b := env.bound(pods)).values()) and b, f"{pg_name} bound")
    assert len(set(placed.values())) == len(pods)  # one pod per node, all three nodes


# --------------------------------------------------------------------------- frameworks


def test_pytorchjob_gang(env: Env) -> None:
    env.add_nodes("pytorch", 2)
    tmpl = {"spec": pod_spec("pytorch")}
    job = env.co.create_namespaced_custom_object(
        "kubeflow.org",
        "v1",
        env.ns,
        "pytorchjobs",
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "torch"},
            "spec": {
                "runPolicy": {"schedulingPolicy": {"queue": "research", "priorityClass": "high"}},
                "pytorchReplicaSpecs": {
                    "Master": {"replicas": 1, "template": copy.deepcopy(tmpl)},
                    "Worker": {"replicas": 2, "template": copy.deepcopy(tmpl)},
                },
            },
        },
    )
    kf = "training.kubeflow.org/"
    pods = []
    for role, n in (("master", 1), ("worker", 2)):
        for i in range(n):
            labels = {
                kf + "operator-name": "pytorchjob-controller",
                kf + "job-name": "torch",
                kf + "replica-type": role,
                kf + "replica-index": str(i),
            }
            pods.append(create_pod(env, f"torch-{role}-{i}", labels, owner_of(job), tmpl["spec"]))
    pg = wait_for(lambda: env.podgroup("torch"), "PodGroup torch")
    # Queue and priority come from the workload's schedulingPolicy.
    assert (pg["spec"]["queue"], pg["spec"]["priorityClassName"]) == ("research", "high")
    gang_is_all_or_nothing(env, "pytorch", "torch", pods, 3)


def test_mpijob_gang(env: Env) -> None:
    env.add_nodes("mpi", 2)
    tmpl = {"spec": pod_spec("mpi")}
    job = env.co.create_namespaced_custom_object(
        "kubeflow.org",
        "v2beta1",
        env.ns,
        "mpijobs",
        {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": {"name": "allreduce"},
            "spec": {
                "slotsPerWorker": 1,
                "mpiReplicaSpecs": {
                    "Launcher": {"replicas": 1, "template": copy.deepcopy(tmpl)},
                    "Worker": {"replicas": 2, "template": copy.deepcopy(tmpl)},
                },
            },
        },
    )
    kf = "training.kubeflow.org/"
    base = {kf + "operator-name": "mpi-operator", kf + "job-name": "allreduce"}
    pods = [
        create_pod(
            env,
            "allreduce-launcher",
            {**base, kf + "job-role": "launcher"},
            owner_of(job),
            tmpl["spec"],
        )
    ]
    for i in range(2):
        pods.append(
            create_pod(
                env,
                f"allreduce-worker-{i}",
                {**base, kf + "job-role": "worker", kf + "replica-index": str(i)},
                owner_of(job),
                tmpl["spec"],
            )
        )
    pg = wait_for(lambda: env.podgroup("allreduce"), "PodGroup allreduce")
    assert pg["spec"]["minTaskMember"] == {"launcher": 1, "worker": 2}
    gang_is_all_or_nothing(env, "mpi", "allreduce", pods, 3)


def test_mpijob_waiting_for_workers_never_waits_for_the_launcher(env: Env) -> None:
    """launcherCreationPolicy WaitForWorkersReady: mpi-operator creates the launcher only once
    every worker is ready. minAvailable 3 (mpi-operator's count: launcher + 2 workers) must
    not require the launcher per role, or the workers are never placed; the 3 workers are the
    pods that exist, so they are placed all-or-nothing, and the launcher follows."""
    env.add_nodes("mpiwait", 2)
    tmpl = {"spec": pod_spec("mpiwait")}
    launcher_spec = {
        "schedulerName": "volcano",
        "containers": [{"name": "main", "image": "x", "resources": {"requests": {"cpu": "100m"}}}],
    }
    job = env.co.create_namespaced_custom_object(
        "kubeflow.org",
        "v2beta1",
        env.ns,
        "mpijobs",
        {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": {"name": "ar"},
            "spec": {
                "launcherCreationPolicy": "WaitForWorkersReady",
                "runPolicy": {"schedulingPolicy": {"minAvailable": 3}},
                "mpiReplicaSpecs": {
                    "Launcher": {"replicas": 1, "template": {"spec": launcher_spec}},
                    "Worker": {"replicas": 3, "template": copy.deepcopy(tmpl)},
                },
            },
        },
    )
    kf = "training.kubeflow.org/"
    base = {kf + "operator-name": "mpi-operator", kf + "job-name": "ar"}
    workers = [
        create_pod(
            env,
            f"ar-worker-{i}",
            {**base, kf + "job-role": "worker", kf + "replica-index": str(i)},
            owner_of(job),
            tmpl["spec"],
        )
        for i in range(3)
    ]
    wait_for(lambda: env.podgroup("ar"), "PodGroup ar")
    gang_is_all_or_nothing(env, "mpiwait", "ar", workers, 3)
    wait_for(
        lambda: all(
            env.core.read_namespaced_pod(w, env.ns).status.phase == "Running" for w in workers
        ),
        "workers running",
    )
    # Playing mpi-operator: every worker is ready, so now the launcher is created.
    launcher = create_pod(
        env, "ar-launcher", {**base, kf + "job-role": "launcher"}, owner_of(job), launcher_spec
    )
    wait_for(lambda: env.bound([launcher])[launcher], "launcher bound")
    pg = env.podgroup("ar")
    assert pg is not None and pg["spec"]["minTaskMember"] == {"worker": 3}


def test_raycluster_gang(env: Env) -> None:
    env.add_nodes("ray", 2)
    tmpl = {"spec": pod_spec("ray")}
    rc = env.co.create_namespaced_custom_object(
        "ray.io",
        "v1",
        env.ns,
        "rayclusters",
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "metadata": {"name": "tune", "labels": {"volcano.sh/queue-name": "research"}},
            "spec": {
                "headGroupSpec": {"template": copy.deepcopy(tmpl)},
                "workerGroupSpecs": [
                    {
                        "groupName": "gpu",
                        "replicas": 2,
                        "minReplicas": 2,
                        "maxReplicas": 2,
                        "template": copy.deepcopy(tmpl),
                    }
                ],
            },
        },
    )
    base = {"ray.io/cluster": "tune", "ray.io/is-ray-node": "yes"}
    pods = [
        create_pod(
            env,
            "tune-head",
            {**base, "ray.io/node-type": "head", "ray.io/group": "headgroup"},
            owner_of(rc),
            tmpl["spec"],
        )
    ]
    for i in range(2):
        pods.append(
            create_pod(
                env,
                f"tune-worker-gpu-{i}",
                {**base, "ray.io/node-type": "worker", "ray.io/group": "gpu"},
                owner_of(rc),
                tmpl["spec"],
            )
        )
    pg = wait_for(lambda: env.podgroup("ray-tune-pg"), "PodGroup ray-tune-pg")
    assert pg["spec"]["queue"] == "research"
    gang_is_all_or_nothing(env, "ray", "ray-tune-pg", pods, 3)


def test_sparkapplication_executors_are_a_gang(env: Env) -> None:
    """spark-operator#1343: the executors are placed all-or-nothing once the driver runs."""
    env.add_nodes("spark", 2)
    gpu = {"name": "tephra.test/spark", "quantity": SLOT}
    app = env.co.create_namespaced_custom_object(
        "sparkoperator.k8s.io",
        "v1beta2",
        env.ns,
        "sparkapplications",
        {
            "apiVersion": "sparkoperator.k8s.io/v1beta2",
            "kind": "SparkApplication",
            "metadata": {"name": "etl"},
            "spec": {
                "type": "Scala",
                "mode": "cluster",
                "driver": {"cores": 1, "memory": "512m", "gpu": gpu},
                "executor": {"instances": 2, "cores": 1, "memory": "512m", "gpu": gpu},
            },
        },
    )
    labels = {"spark-app-selector": "spark-etl0001", "sparkoperator.k8s.io/app-name": "etl"}
    spec = pod_spec("spark", cpu="1", memory="896Mi")  # what Spark gives 1 core / 512m
    driver = create_pod(env, "etl-driver", {**labels, "spark-role": "driver"}, owner_of(app), spec)
    pg = wait_for(lambda: env.podgroup("spark-etl-pg"), "PodGroup spark-etl-pg")
    # The whole application is reserved at enqueue: 3 x (1 cpu, 896Mi, 2 slots).
    assert pg["spec"]["minResources"] == {"cpu": "3", "memory": "2688Mi", "tephra.test/spark": "6"}
    # The driver alone is gated first, so it can start ...
    wait_for(lambda: env.bound([driver])[driver], "driver bound")
    wait_for(
        lambda: env.core.read_namespaced_pod(driver, env.ns).status.phase == "Running",
        "driver running",
    )
    # ... and create its executors, owned by the driver pod.
    drv = env.core.read_namespaced_pod(driver, env.ns)
    drv_owner = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": driver,
        "uid": drv.metadata.uid,
        "controller": True,
    }
    executors = [
        create_pod(
            env,
            f"etl-exec-{i}",
            {**labels, "spark-role": "executor", "spark-exec-id": str(i)},
            drv_owner,
            spec,
        )
        for i in (1, 2)
    ]
    # One node is left with room for one executor: without a gang, one would start and idle.
    wait_for(lambda: env.unschedulable("spark-etl-pg", 3), "executors found unschedulable")
    time.sleep(0.6)
    assert env.bound(executors) == dict.fromkeys(executors)
    env.add_nodes("spark", 1, first=2)
    placed = wait_for(lambda: all((b := env.bound(executors)).values()) and b, "executors bound")
    assert env.bound([driver])[driver] not in placed.values()


def test_another_applications_running_driver_is_not_this_gangs_leader(env: Env) -> None:
    env.add_nodes("sparkpair", 2)
    for app_name in ("first", "second"):
        app = env.co.create_namespaced_custom_object(
            "sparkoperator.k8s.io",
            "v1beta2",
            env.ns,
            "sparkapplications",
            {
                "apiVersion": "sparkoperator.k8s.io/v1beta2",
                "kind": "SparkApplication",
                "metadata": {"name": app_name},
                "spec": {
                    "driver": {"cores": 1, "memory": "512m"},
                    "executor": {"instances": 2, "cores": 1, "memory": "512m"},
                },
            },
        )
        labels = {
            "spark-app-selector": f"spark-{app_name}",
            "spark-role": "driver",
            "sparkoperator.k8s.io/app-name": app_name,
        }
        spec = {
            "schedulerName": "volcano",
            "containers": [
                {
                    "name": "main",
                    "image": "x",
                    "resources": {"requests": {"cpu": "1", "memory": "896Mi"}},
                }
            ],
        }
        driver = create_pod(env, f"{app_name}-driver", labels, owner_of(app), spec)
        if app_name == "first":
            wait_for(
                lambda d=driver: env.core.read_namespaced_pod(d, env.ns).status.phase == "Running",
                "first driver running",
            )
    pg = wait_for(lambda: env.podgroup("spark-second-pg"), "PodGroup spark-second-pg")
    time.sleep(0.5)  # let the controller reconcile the second driver's events
    pg = env.podgroup("spark-second-pg")
    assert pg is not None
    # The second driver has not started: its gang must gate on the driver alone.
    assert pg["spec"]["minMember"] == 1


def opted_in_namespace(env: Env, suffix: str) -> str:
    """A namespace that opted into gang injection (way 3), beside the test's own."""
    ns = f"{env.ns[:40].rstrip('-')}-{suffix}"
    env.core.create_namespace(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": ns, "labels": {"tephra.io/gang-injection": "enabled"}},
        }
    )
    return ns


def small_pod(
    ns: str,
    name: str,
    labels: dict[str, str],
    *,
    owner: dict[str, Any] | None = None,
    scheduler: str | None = "volcano",
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": labels}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]
    }
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def test_executors_of_a_notebook_driver_are_grouped_and_bound(env: Env) -> None:
    """Spark client mode from a notebook: the executors are owned by the notebook pod, which is
    no spark-submit driver, so the Spark adapter has no gang for them. They take Volcano's
    default group `podgroup-<notebook uid>` and are bound, with the scheduler named in their
    template (way 2) or injected by the opted-in namespace's webhook (way 3)."""
    for ns, scheduler in ((env.ns, "volcano"), (opted_in_namespace(env, "in"), None)):
        env.core.create_namespaced_pod(
            ns, small_pod(ns, "notebook", {"app": "jupyter"}, scheduler=None)
        )
        nb = env.core.read_namespaced_pod("notebook", ns)
        owner = {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "notebook",
            "uid": nb.metadata.uid,
            "controller": True,
        }
        labels = {"spark-role": "executor", "spark-app-selector": "spark-0a1b"}
        executors = [f"exec-{i}" for i in (1, 2)]
        admitted = [
            env.core.create_namespaced_pod(
                ns,
                small_pod(
                    ns, name, {**labels, "spark-exec-id": str(i)}, owner=owner, scheduler=scheduler
                ),
            )
            for i, name in enumerate(executors, 1)
        ]
        # The pod as admitted, before the controller may name its group: the webhook names
        # none here, since `spark-0a1b-podgroup` would never be created.
        assert admitted[0].spec.scheduler_name == "volcano"
        assert "scheduling.k8s.io/group-name" not in (admitted[0].metadata.annotations or {})
        group = f"podgroup-{nb.metadata.uid}"

        def placed(ns: str = ns, group: str = group, executors: list[str] = executors) -> bool:
            pods = [env.core.read_namespaced_pod(n, ns) for n in executors]
            return all(
                p.spec.node_name
                and (p.metadata.annotations or {}).get("scheduling.k8s.io/group-name") == group
                for p in pods
            )

        wait_for(placed, f"{ns}: executors in {group} and bound")


def test_opted_in_spark_submit_driver_gets_its_group_at_once(env: Env) -> None:
    """Way 3 for spark-submit: the webhook must not write a group name that the controller
    then takes for Spark's VolcanoFeatureStep announcing its own group (a 30 s wait)."""
    ns = opted_in_namespace(env, "in")
    labels = {"spark-role": "driver", "spark-app-selector": "spark-5e6f"}
    env.core.create_namespaced_pod(ns, small_pod(ns, "pi-driver", labels, scheduler=None))
    # Well inside the 30 s the controller would wait for a group announced by Spark.
    pg = wait_for(
        lambda: env.co.get_namespaced_custom_object(*PG, ns, "podgroups", "spark-5e6f-podgroup"),
        "PodGroup spark-5e6f-podgroup",
        timeout=20,
        tolerate=(client.ApiException,),
    )
    assert "tephra.io/gang-spec-hash" in pg["metadata"]["annotations"]
    wait_for(lambda: env.core.read_namespaced_pod("pi-driver", ns).spec.node_name, "driver bound")
