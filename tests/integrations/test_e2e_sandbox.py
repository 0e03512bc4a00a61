"""End to end on the sandbox: the operators' CRDs installed, a workload created, the test playing
the operator (it creates the pods the operator would, with the operator's labels and owner
references), and Tephra's PodGroup controller giving the workload its gang over real HTTP.

The users' manifests are the corpus ones with ``schedulerName: volcano`` added to the pod
templates ("way 2" in docs/integrations.md). The sandbox is the shared `e2e_api` fixture
(controllers and scheduler); these tests check what the controller writes, the scheduler tests
in test_e2e_scheduler.py what gets bound.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest

pytest.importorskip("batch.sandbox.testing")

from kubernetes import client

from tests.integrations.conftest import load_workload
from tests.waiting import wait_for

PG = ("scheduling.volcano.sh", "v1beta1")


class Cluster:
    def __init__(self, api: Any) -> None:
        self.core = client.CoreV1Api(api)
        self.co = client.CustomObjectsApi(api)
        self.ext = client.ApiextensionsV1Api(api)

    def namespace(self, name: str) -> str:
        self.core.create_namespace(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
        return name

    def create(self, obj: dict[str, Any], ns: str) -> dict[str, Any]:
        group, _, version = obj["apiVersion"].rpartition("/")
        plural = obj["kind"].lower() + "s"
        if obj["kind"] == "Queue":
            return self.co.create_cluster_custom_object(group, version, "queues", obj)
        return self.co.create_namespaced_custom_object(group, version, ns, plural, obj)

    def podgroup(self, name: str, ns: str) -> dict[str, Any] | None:
        try:
            return self.co.get_namespaced_custom_object(*PG, ns, "podgroups", name)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def podgroups(self, ns: str) -> list[dict[str, Any]]:
        return self.co.list_namespaced_custom_object(*PG, ns, "podgroups")["items"]

    def pod(self, name: str, ns: str) -> Any:
        return self.core.read_namespaced_pod(name, ns)

    def create_pod(self, body: dict[str, Any], ns: str) -> None:
        self.core.create_namespaced_pod(ns, body)

    def annotations(self, name: str, ns: str) -> dict[str, str]:
        return dict(self.pod(name, ns).metadata.annotations or {})


@pytest.fixture(scope="session")
def cluster(e2e_api: Any) -> Cluster:
    return Cluster(e2e_api)


# --------------------------------------------------------------------------- playing operators


def with_scheduler(template: dict[str, Any]) -> None:
    template.setdefault("spec", {})["schedulerName"] = "volcano"


def owner(obj: dict[str, Any]) -> dict[str, Any]:
    m = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": m["name"],
        "uid": m["uid"],
        "controller": True,
    }


def make_pod(
    name: str,
    template: dict[str, Any],
    labels: dict[str, str],
    owner_ref: dict[str, Any],
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "labels": {**(template.get("metadata") or {}).get("labels", {}), **labels},
        "ownerReferences": [owner_ref],
    }
    if annotations:
        meta["annotations"] = annotations
    spec = copy.deepcopy(template["spec"])
    for container in spec.get("containers", []):  # the API takes quantities as strings
        for section in (container.get("resources") or {}).values():
            for key, value in section.items():
                section[key] = str(value)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def kubeflow_pods(job: dict[str, Any], field: str, operator: str) -> list[dict[str, Any]]:
    """The pods training-operator (or mpi-operator, for MPIJob) creates for a job."""
    out = []
    name = job["metadata"]["name"]
    for rtype, rspec in job["spec"][field].items():
        role = rtype.lower()
        for i in range(rspec.get("replicas", 1)):
            labels = {
                "training.kubeflow.org/operator-name": operator,
                "training.kubeflow.org/job-name": name,
                "training.kubeflow.org/replica-index": str(i),
            }
            if operator == "mpi-operator":
                labels["training.kubeflow.org/job-role"] = role
            else:
                labels["training.kubeflow.org/replica-type"] = role
            pod_name = f"{name}-{role}-{i}"
            out.append(make_pod(pod_name, rspec["template"], labels, owner(job)))
    return out


def submit(c: Cluster, kind: str, path: str, ns: str, **templates: Any) -> dict[str, Any]:
    obj = copy.deepcopy(load_workload(path, kind))
    obj["metadata"].pop("namespace", None)
    return c.create(obj, ns)


# --------------------------------------------------------------------------- tests


def test_pytorchjob_gets_its_gang(cluster: Cluster) -> None:
    ns = cluster.namespace("pytorch-gang")
    job = copy.deepcopy(load_workload("pytorch/pytorch_job_sendrecv.yaml", "PyTorchJob"))
    for rspec in job["spec"]["pytorchReplicaSpecs"].values():
        with_scheduler(rspec["template"])
    job = cluster.create(job, ns)
    for pod in kubeflow_pods(job, "pytorchReplicaSpecs", "pytorchjob-controller"):
        cluster.create_pod(pod, ns)
    name = "pytorch-dist-basic-sendrecv"
    pg = wait_for(lambda: cluster.podgroup(name, ns), f"PodGroup {name}")
    spec = pg["spec"]
    # Master 1 + Worker 3 (see test_corpus_gangs): minMember 4.
    assert spec["minMember"] == 4
    assert spec["minTaskMember"] == {"master": 1, "worker": 3}
    assert spec["queue"] == "default"
    assert "minResources" not in spec or not spec["minResources"]
    assert pg["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    for pod_name, role in (
        ("pytorch-dist-basic-sendrecv-master-0", "master"),
        ("pytorch-dist-basic-sendrecv-worker-2", "worker"),
    ):
        ann = wait_for(
            lambda n=pod_name: (
                cluster.annotations(n, ns).get("scheduling.k8s.io/group-name")
                and cluster.annotations(n, ns)
            ),
            f"pod {pod_name} annotated",
        )
        assert ann["scheduling.k8s.io/group-name"] == name
        assert ann["volcano.sh/task-spec"] == role
    owned = [
        g
        for g in cluster.podgroups(ns)
        if any(
            o.get("uid") == job["metadata"]["uid"] for o in g["metadata"].get("ownerReferences", [])
        )
    ]
    assert [g["metadata"]["name"] for g in owned] == [name]


def test_a_deleted_podgroup_is_made_again_for_the_waiting_pods(cluster: Cluster) -> None:
    """The gang's PodGroup deleted (by a user, or by the garbage collector because it was an
    earlier workload's of the same name) while the workload's pods wait: the pods are reconciled
    again and the group comes back, owned by the workload. Nothing else would bring it back:
    the pods do not change."""
    ns = cluster.namespace("pytorch-regroup")
    job = copy.deepcopy(load_workload("pytorch/pytorch_job_sendrecv.yaml", "PyTorchJob"))
    for rspec in job["spec"]["pytorchReplicaSpecs"].values():
        with_scheduler(rspec["template"])
        rspec["template"]["spec"]["nodeSelector"] = {"no-such-node": "true"}  # stay Pending
    job = cluster.create(job, ns)
    for pod in kubeflow_pods(job, "pytorchReplicaSpecs", "pytorchjob-controller"):
        cluster.create_pod(pod, ns)
    name = "pytorch-dist-basic-sendrecv"
    first = wait_for(lambda: cluster.podgroup(name, ns), f"PodGroup {name}")
    cluster.co.delete_namespaced_custom_object(*PG, ns, "podgroups", name)
    again = wait_for(
        lambda: (
            (g := cluster.podgroup(name, ns))
            and g["metadata"]["uid"] != first["metadata"]["uid"]
            and g
        ),
        f"PodGroup {name} made again",
    )
    assert again["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    assert again["spec"]["minMember"] == 4


def test_mpijob_gets_its_gang_with_resources(cluster: Cluster) -> None:
    ns = cluster.namespace("mpi-gang")
    job = copy.deepcopy(load_workload("mpi/tensorflow-mnist.yaml", "MPIJob"))
    for rspec in job["spec"]["mpiReplicaSpecs"].values():
        with_scheduler(rspec["template"])
    job = cluster.create(job, ns)
    for pod in kubeflow_pods(job, "mpiReplicaSpecs", "mpi-operator"):
        cluster.create_pod(pod, ns)
    pg = wait_for(lambda: cluster.podgroup("tensorflow-mnist", ns), "PodGroup tensorflow-mnist")
    assert pg["spec"]["minMember"] == 3
    assert pg["spec"]["minTaskMember"] == {"launcher": 1, "worker": 2}
    assert pg["spec"]["minResources"] == {"cpu": "5", "memory": "10Gi"}


def test_raycluster_gets_its_gang_in_the_workloads_queue(cluster: Cluster) -> None:
    ns = cluster.namespace("ray-gang")
    path = "ray/ray-cluster.volcano-scheduler-queue.yaml"
    cluster.create(copy.deepcopy(load_workload(path, "Queue")), ns)
    rc = copy.deepcopy(load_workload(path, "RayCluster"))
    with_scheduler(rc["spec"]["headGroupSpec"]["template"])
    for g in rc["spec"]["workerGroupSpecs"]:
        with_scheduler(g["template"])
    rc = cluster.create(rc, ns)
    name = rc["metadata"]["name"]
    base = {"ray.io/cluster": name, "ray.io/is-ray-node": "yes"}
    cluster.create_pod(
        make_pod(
            f"{name}-head-x1",
            rc["spec"]["headGroupSpec"]["template"],
            {**base, "ray.io/node-type": "head", "ray.io/group": "headgroup"},
            owner(rc),
        ),
        ns,
    )
    group = rc["spec"]["workerGroupSpecs"][0]
    for i in range(2):
        cluster.create_pod(
            make_pod(
                f"{name}-worker-{i}",
                group["template"],
                {**base, "ray.io/node-type": "worker", "ray.io/group": group["groupName"]},
                owner(rc),
            ),
            ns,
        )
    pg = wait_for(lambda: cluster.podgroup("ray-test-cluster-0-pg", ns), "PodGroup ray-...-pg")
    assert pg["spec"]["minMember"] == 3
    assert pg["spec"]["minTaskMember"] == {"headgroup": 1, "worker": 2}
    assert pg["spec"]["minResources"] == {"cpu": "3", "memory": "4Gi"}
    assert pg["spec"]["queue"] == "kuberay-test-queue"
    ann = wait_for(
        lambda: cluster.annotations(f"{name}-worker-1", ns).get("scheduling.k8s.io/group-name"),
        "ray worker annotated",
    )
    assert ann == "ray-test-cluster-0-pg"


def test_sparkapplication_gang_grows_once_the_driver_runs(cluster: Cluster) -> None:
    ns = cluster.namespace("spark-gang")
    app = copy.deepcopy(load_workload("spark/spark-pi.yaml", "SparkApplication"))
    app["metadata"].pop("namespace", None)
    app = cluster.create(app, ns)
    name = app["metadata"]["name"]
    selector = "spark-1f2e3d4c"
    driver_spec = {
        "schedulerName": "volcano",
        "containers": [
            {
                "name": "spark-kubernetes-driver",
                "image": "apache/spark",
                "resources": {"requests": {"cpu": "1", "memory": "896Mi"}},
            }
        ],
    }
    labels = {
        "spark-app-selector": selector,
        "sparkoperator.k8s.io/app-name": name,
        "sparkoperator.k8s.io/launched-by-spark-operator": "true",
    }
    cluster.create_pod(
        make_pod(
            f"{name}-driver", {"spec": driver_spec}, {**labels, "spark-role": "driver"}, owner(app)
        ),
        ns,
    )
    pg_name = "spark-spark-pi-pg"
    pg = wait_for(lambda: cluster.podgroup(pg_name, ns), f"PodGroup {pg_name}")
    # The driver leads: only it is gated first, the whole application is reserved.
    assert pg["spec"]["minMember"] == 1
    assert pg["spec"]["minTaskMember"] == {"spark-driver": 1}
    assert pg["spec"]["minResources"] == {"cpu": "2", "memory": "1792Mi"}
    # The scheduler places the driver and the node emulator runs it; then, playing the driver,
    # the test creates its executor.
    wait_for(lambda: cluster.pod(f"{name}-driver", ns).status.phase == "Running", "driver running")
    driver = cluster.pod(f"{name}-driver", ns)
    executor_owner = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": f"{name}-driver",
        "uid": driver.metadata.uid,
        "controller": True,
    }
    cluster.create_pod(
        make_pod(
            f"{name}-exec-1",
            {
                "spec": {
                    **driver_spec,
                    "containers": [{"name": "spark-kubernetes-executor", "image": "apache/spark"}],
                }
            },
            {**labels, "spark-role": "executor", "spark-exec-id": "1"},
            executor_owner,
        ),
        ns,
    )
    grown = wait_for(
        lambda: (g := cluster.podgroup(pg_name, ns)) and g["spec"]["minMember"] == 2 and g,
        "PodGroup minMember 1 + 1 executor",
    )
    assert grown["spec"]["minTaskMember"] == {"spark-driver": 1, "spark-executor": 1}
    ann = wait_for(
        lambda: cluster.annotations(f"{name}-exec-1", ns).get("volcano.sh/task-spec"),
        "executor annotated",
    )
    assert ann == "spark-executor"
    assert cluster.annotations(f"{name}-exec-1", ns)["scheduling.k8s.io/group-name"] == pg_name


def test_operator_made_podgroup_is_adopted_untouched(cluster: Cluster) -> None:
    """training-operator with --gang-scheduler-name=volcano made PodGroup <job> (minMember 1,
    its own values): Tephra annotates nothing differently, creates no second group and does not
    correct the operator's spec."""
    ns = cluster.namespace("adopt-kubeflow")
    job = copy.deepcopy(load_workload("pytorch/demo.yaml", "PyTorchJob"))
    job["metadata"]["name"] = "adopted"
    for rspec in job["spec"]["pytorchReplicaSpecs"].values():
        with_scheduler(rspec["template"])
    job = cluster.create(job, ns)
    operator_pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "adopted", "ownerReferences": [owner(job)]},
        "spec": {"minMember": 1, "queue": "default"},
    }
    cluster.co.create_namespaced_custom_object(*PG, ns, "podgroups", operator_pg)
    before = cluster.podgroup("adopted", ns)
    assert before is not None
    for pod in kubeflow_pods(job, "pytorchReplicaSpecs", "pytorchjob-controller"):
        cluster.create_pod(pod, ns)
    wait_for(
        lambda: (
            cluster.annotations("adopted-worker-0", ns).get("scheduling.k8s.io/group-name")
            == "adopted"
        ),
        "worker pod joined the operator's group",
    )
    after = cluster.podgroup("adopted", ns)
    assert after is not None
    assert after["spec"] == before["spec"]
    assert "tephra.io/gang-spec-hash" not in (after["metadata"].get("annotations") or {})
    owned = [
        g["metadata"]["name"]
        for g in cluster.podgroups(ns)
        if any(
            o.get("uid") == job["metadata"]["uid"] for o in g["metadata"].get("ownerReferences", [])
        )
    ]
    assert owned == ["adopted"]


def test_pods_already_in_an_operator_group_are_left_alone(cluster: Cluster) -> None:
    """KubeRay with --batch-scheduler=volcano annotated its pods with its own group."""
    ns = cluster.namespace("adopt-kuberay")
    rc = copy.deepcopy(load_workload("ray/ray-cluster.scheduler-plugins.yaml", "RayCluster"))
    rc["metadata"]["name"] = "kuberay-managed"
    rc = cluster.create(rc, ns)
    operator_pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "ray-kuberay-managed-pg", "ownerReferences": [owner(rc)]},
        "spec": {"minMember": 3, "queue": "default"},
    }
    cluster.co.create_namespaced_custom_object(*PG, ns, "podgroups", operator_pg)
    template = copy.deepcopy(rc["spec"]["headGroupSpec"]["template"])
    with_scheduler(template)
    cluster.create_pod(
        make_pod(
            "kuberay-managed-head",
            template,
            {
                "ray.io/cluster": "kuberay-managed",
                "ray.io/node-type": "head",
                "ray.io/group": "headgroup",
            },
            owner(rc),
            annotations={
                "scheduling.k8s.io/group-name": "ray-kuberay-managed-pg",
                "volcano.sh/task-spec": "headgroup",
            },
        ),
        ns,
    )
    time.sleep(1.0)  # give the controller the chance to do something wrong
    groups = [
        g["metadata"]["name"]
        for g in cluster.podgroups(ns)
        if g["metadata"]["name"].startswith("ray-kuberay-managed")
    ]
    assert groups == ["ray-kuberay-managed-pg"]
    pg = cluster.podgroup("ray-kuberay-managed-pg", ns)
    assert pg is not None and pg["spec"]["minMember"] == 3


def test_namespace_opt_in_injects_the_gang_at_pod_creation(cluster: Cluster) -> None:
    """Way 3: an operator that knows nothing of Volcano, in a namespace that opted in."""
    ns = "opt-in"
    cluster.core.create_namespace(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": ns, "labels": {"tephra.io/gang-injection": "enabled"}},
        }
    )
    job = copy.deepcopy(load_workload("pytorch/simple.yaml", "PyTorchJob"))
    job["metadata"].pop("namespace", None)
    job = cluster.create(job, ns)
    pods = kubeflow_pods(job, "pytorchReplicaSpecs", "pytorchjob-controller")
    for pod in pods:  # the pod templates name no scheduler
        assert "schedulerName" not in pod["spec"]
        cluster.create_pod(pod, ns)
    stored = cluster.pod("pytorch-simple-worker-0", ns)
    assert stored.spec.scheduler_name == "volcano"
    assert (stored.metadata.annotations or {}).get(
        "scheduling.k8s.io/group-name"
    ) == "pytorch-simple"
    pg = wait_for(lambda: cluster.podgroup("pytorch-simple", ns), "PodGroup pytorch-simple")
    assert pg["spec"]["minMember"] == 2
