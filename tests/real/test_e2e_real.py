"""End to end on a real kube-apiserver: `tephra controller` and two `tephra scheduler` replicas
(leader election) as processes, the HTTP node emulator as the kubelets of four 8-GPU Nodes.

No webhook is registered here (test_webhook_real covers it), so every job is written complete:
queue, minAvailable, schedulerName. The scheduler creates the `root` and `default` queues, the
controller opens them. The scheduler's configuration is Tephra's default without `minruntime`
(its five minutes would protect every victim of the preemption tests).
"""

from __future__ import annotations

import re
import signal
import socket
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from batch.sandbox.control_plane import ControlPlane
from batch.sandbox.real_components import ComponentProcess
from batch.scheduler.config import TEPHRA_DEFAULT_CONFIG
from tests.real.conftest import Api, tephra_process, volcano_crds
from tests.real.kubelets import NODE_LABEL, Cluster

pytestmark = [pytest.mark.real, pytest.mark.xdist_group("real")]

NS = "e2e"
CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "volcano-examples"
EXAMPLES = CORPUS / "volcano" / "example"
VCJOBS = "/apis/batch.volcano.sh/v1alpha1"
SCHED = "/apis/scheduling.volcano.sh/v1beta1"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
RUN = "sandbox.tephra.io/run-seconds"


class Stack:
    """The processes and the API: what every test of this module drives."""

    def __init__(
        self, api: Api, controller: ComponentProcess, schedulers: Sequence[ComponentProcess]
    ):
        self.api = api
        self.controller = controller
        self.schedulers = list(schedulers)
        self.metrics: dict[int, int] = {}  # scheduler pid -> metrics port

    def logs(self) -> str:
        procs = [self.controller, *self.schedulers]
        tails = "\n".join(f"--- {p.label} {p.proc.pid}:\n{p.log()[-2500:]}" for p in procs)
        return f"{self.state()}\n{tails}"

    def state(self) -> str:
        """The namespace's PodGroups and pods as the API server has them, and the leader: what a
        wait that timed out was waiting on (the logs' tails rarely show it)."""
        lines = [f"--- leader: {self.leader()!r}"]
        groups = (self.get(f"{SCHED}/namespaces/{NS}/podgroups") or {}).get("items") or []
        for pg in groups:
            status = pg.get("status") or {}
            conds = [
                (c.get("type"), c.get("reason"), c.get("message"))
                for c in status.get("conditions") or []
            ]
            lines.append(f"PodGroup {pg['metadata']['name']}: {status.get('phase')} {conds}")
        pods = (self.get(f"/api/v1/namespaces/{NS}/pods") or {}).get("items") or []
        for p in pods:
            meta, status = p["metadata"], p.get("status") or {}
            group = (meta.get("annotations") or {}).get("scheduling.k8s.io/group-name")
            conds = [
                (c.get("type"), c.get("status"), c.get("reason"))
                for c in status.get("conditions") or []
            ]
            lines.append(
                f"Pod {meta['name']}: node={p['spec'].get('nodeName')} "
                f"phase={status.get('phase')} group={group} "
                f"deleting={bool(meta.get('deletionTimestamp'))} {conds}"
            )
        return "\n".join(lines)

    def wait(self, what: str, check: Callable[[], Any], timeout: float = 60.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = check()
            if found:
                return found
            time.sleep(0.25)
        pytest.fail(f"{what} not within {timeout:.0f} s\n{self.logs()}")

    def get(self, path: str) -> Any:
        code, body = self.api.request("GET", path)
        return body if code == 200 else None

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        code, answer = self.api.request("POST", path, body)
        assert code == 201, answer
        return dict(answer)

    def job(self, name: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self.get(f"{VCJOBS}/namespaces/{NS}/jobs/{name}")
        return found

    def phase(self, name: str) -> str:
        job = self.job(name) or {}
        return str(((job.get("status") or {}).get("state") or {}).get("phase") or "")

    def pods(self, job: str) -> list[dict[str, Any]]:
        selector = f"volcano.sh/job-name={job}"
        page = self.get(f"/api/v1/namespaces/{NS}/pods?labelSelector={selector}") or {}
        return list(page.get("items") or [])

    def bound(self, job: str) -> dict[str, str]:
        """Pod name -> node of the job's bound pods."""
        out = {}
        for p in self.pods(job):
            node = p["spec"].get("nodeName")
            if node and not p["metadata"].get("deletionTimestamp"):
                out[p["metadata"]["name"]] = node
        return out

    def uids(self, job: str) -> set[str]:
        return {p["metadata"]["uid"] for p in self.pods(job)}

    def delete_job(self, name: str) -> None:
        """Delete the job and its pods. The pods explicitly: kube-controller-manager's garbage
        collector learns of a new CRD's kind at its next discovery, up to 30 s later."""
        self.api.request("DELETE", f"{VCJOBS}/namespaces/{NS}/jobs/{name}")
        selector = f"volcano.sh/job-name={name}"
        self.api.request(
            "DELETE", f"/api/v1/namespaces/{NS}/pods?labelSelector={selector}&gracePeriodSeconds=0"
        )
        gone = f"job {name} and its pods gone"
        self.wait(gone, lambda: not self.job(name) and not self.pods(name))

    def leader(self) -> str:
        lease = self.get(f"{LEASES}/tephra-scheduler")
        return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scheduler_conf(path: Path) -> Path:
    conf = yaml.safe_load(TEPHRA_DEFAULT_CONFIG)
    for tier in conf["tiers"]:
        tier["plugins"] = [p for p in tier["plugins"] if p["name"] != "minruntime"]
    path.write_text(yaml.safe_dump(conf))
    return path


def _namespace(api: Api, name: str) -> None:
    api.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    deadline = time.monotonic() + 60
    while api.request("GET", f"/api/v1/namespaces/{name}/serviceaccounts/default")[0] != 200:
        assert time.monotonic() < deadline, "no default ServiceAccount (kube-controller-manager)"
        time.sleep(0.2)


@pytest.fixture(scope="module", params=["tephra-crds", "volcano-crds"])
def crd_set(request: pytest.FixtureRequest, api: Api, crds: list[str]) -> Iterator[str]:
    """Every test runs on Tephra's CRDs, then on Volcano v1.10's own (issue 34.3: a cluster
    migrating from Volcano keeps its CRDs)."""
    if request.param == "volcano-crds":
        with volcano_crds(api):
            yield request.param
    else:
        yield request.param


@pytest.fixture(scope="module")
def stack(
    real: ControlPlane,
    api: Api,
    crd_set: str,
    kubelets: Cluster,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp(f"e2e-real-{crd_set}")
    _namespace(api, NS)
    for name, value in (("e2e-high", 1000), ("e2e-low", 10)):
        body: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass"}
        body["value"] = value
        body["metadata"] = {"name": name}
        api.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body)
    kubeconfig = str(real.kubeconfig)
    conf = str(_scheduler_conf(tmp / "scheduler.conf"))
    ports = [(_free_port(), _free_port()) for _ in range(2)]
    with (
        tephra_process(tmp / "controller.log", *_controller_args(kubeconfig)) as controller,
        tephra_process(
            tmp / "scheduler-0.log", *_scheduler_args(kubeconfig, conf, ports[0])
        ) as first,
        tephra_process(
            tmp / "scheduler-1.log", *_scheduler_args(kubeconfig, conf, ports[1])
        ) as second,
    ):
        stack = Stack(api, controller, [first, second])
        stack.metrics = {first.proc.pid: ports[0][0], second.proc.pid: ports[1][0]}
        _wait_open(stack, "default")
        yield stack


def _controller_args(kubeconfig: str) -> list[str]:
    return ["controller", "--kubeconfig", kubeconfig, "--metrics-port", "0", "-v"]


def _scheduler_args(kubeconfig: str, conf: str, ports: tuple[int, int]) -> list[str]:
    return [
        "scheduler",
        "--kubeconfig",
        kubeconfig,
        "--scheduler-conf",
        conf,
        "--schedule-period",
        "0.3s",
        "--leader-elect",
        "--metrics-port",
        str(ports[0]),
        "--healthz-port",
        str(ports[1]),
        "-v",
    ]


def _corpus_job(rel: str) -> dict[str, Any]:
    path = EXAMPLES / rel
    if not path.exists():
        pytest.skip(f"corpus not found at {path}")
    doc = next(d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "Job")
    for task in doc["spec"]["tasks"]:
        meta = task["template"].setdefault("metadata", {})
        meta.setdefault("annotations", {})[RUN] = "1"
        spec = task["template"]["spec"]
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **NODE_LABEL}
    doc["metadata"] = {"name": f"cx-{doc['metadata']['name']}", "namespace": NS}
    return dict(doc)


def _job(
    name: str,
    *,
    replicas: int,
    min_available: int,
    gpus: int = 0,
    cpu: str = "100m",
    queue: str = "default",
    priority: str | None = None,
    run_seconds: float | None = None,
) -> dict[str, Any]:
    resources = {"cpu": cpu, **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    template: dict[str, Any] = {
        "metadata": {"annotations": {RUN: str(run_seconds)} if run_seconds is not None else {}},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": dict(NODE_LABEL),  # the capacity the sizes below are made for
            "containers": [
                {
                    "name": "main",
                    "image": "busybox:1.36",
                    "resources": {"requests": resources, "limits": dict(resources)},
                }
            ],
        },
    }
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "queue": queue,
        "minAvailable": min_available,
        "tasks": [{"name": "worker", "replicas": replicas, "template": template}],
    }
    if priority:
        spec["priorityClassName"] = priority
    meta = {"name": name}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": meta,
        "spec": spec,
    }


def _queue(stack: Stack, name: str, weight: int = 1) -> None:
    body = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": weight, "reclaimable": True},
    }
    stack.api.request("POST", f"{SCHED}/queues", body)
    _wait_open(stack, name)


def _wait_open(stack: Stack, name: str) -> None:
    def state() -> str:
        queue = stack.get(f"{SCHED}/queues/{name}") or {}
        return str((queue.get("status") or {}).get("state") or "")

    stack.wait(f"queue {name} Open", lambda: state() == "Open")


# ---------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("rel", ["job.yaml", "job-plugin.yaml", "task-start-dependency/job.yaml"])
def test_corpus_vcjobs_complete(stack: Stack, rel: str) -> None:
    doc = _corpus_job(rel)
    name = doc["metadata"]["name"]
    stack.create(f"{VCJOBS}/namespaces/{NS}/jobs", doc)
    stack.wait(f"{name} Completed", lambda: stack.phase(name) == "Completed", timeout=90)
    job = stack.job(name) or {}
    total = sum(t["replicas"] for t in doc["spec"]["tasks"])
    assert job["status"]["succeeded"] == total, job["status"]
    stack.delete_job(name)


def _occupy_one_node(stack: Stack, name: str) -> None:
    """A running 10-cpu pod: one of the four 16-cpu nodes can take no other 10-cpu pod."""
    stack.create(
        f"{VCJOBS}/namespaces/{NS}/jobs", _job(name, replicas=1, min_available=1, cpu="10")
    )
    stack.wait(f"{name} bound", lambda: stack.bound(name))


def test_gang_larger_than_free_capacity_binds_nothing(stack: Stack) -> None:
    # 10 cpu pods on 16-cpu nodes: one per node; one node is busy, so 3 fit and the gang needs
    # 4 (it fits the cluster, so enqueue admits it; one that could never fit, 5 of them, is
    # never admitted: test_differential_real.py).
    _occupy_one_node(stack, "busy5")
    gang = _job("gang5", replicas=4, min_available=4, cpu="10")
    stack.create(f"{VCJOBS}/namespaces/{NS}/jobs", gang)
    stack.wait("gang5's pods created", lambda: len(stack.pods("gang5")) == 4)

    def unschedulable() -> bool:
        for pg in (stack.get(f"{SCHED}/namespaces/{NS}/podgroups") or {}).get("items") or []:
            if pg["metadata"]["name"].startswith("gang5-"):
                conds = (pg.get("status") or {}).get("conditions") or []
                return any(c["type"] == "Unschedulable" and c["status"] == "True" for c in conds)
        return False

    stack.wait(
        "gang5 Unschedulable (or partly bound)", lambda: unschedulable() or stack.bound("gang5")
    )
    time.sleep(1.5)  # several more sessions
    assert stack.bound("gang5") == {}, stack.pods("gang5")
    stack.delete_job("gang5")
    stack.delete_job("busy5")


def _autoscaler_would_scale_up_for(pod: dict[str, Any]) -> bool:
    """Cluster-autoscaler's rule for an unschedulable pod (its `IsPodUnschedulable` / the
    pod lister's filter): unbound, with PodScheduled False reason Unschedulable."""
    if pod["spec"].get("nodeName"):
        return False
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled":
            return bool(cond.get("status") == "False" and cond.get("reason") == "Unschedulable")
    return False


def test_pods_of_a_gang_that_cannot_fit_trigger_cluster_autoscaler(stack: Stack) -> None:
    """Issue 34.2 on the real apiserver: every pod of a gang that cannot be placed carries the
    condition cluster-autoscaler scales up for; a job that fits is bound, its pods' condition
    turned True by the binding, with kube-scheduler's `Scheduled` event."""
    _occupy_one_node(stack, "ca-busy")
    stack.create(
        f"{VCJOBS}/namespaces/{NS}/jobs", _job("ca-big", replicas=4, min_available=4, cpu="10")
    )
    stack.wait("ca-big's pods created", lambda: len(stack.pods("ca-big")) == 4)
    stack.wait(
        "every ca-big pod unschedulable for cluster-autoscaler",
        lambda: all(_autoscaler_would_scale_up_for(p) for p in stack.pods("ca-big")),
    )
    stack.create(
        f"{VCJOBS}/namespaces/{NS}/jobs", _job("ca-fits", replicas=1, min_available=1, cpu="1")
    )
    [(pod, node)] = stack.wait("ca-fits bound", lambda: list(stack.bound("ca-fits").items()))

    # By uid: the module runs once per CRD set, and a pod of the same name had its own event.
    uid = next(p["metadata"]["uid"] for p in stack.pods("ca-fits") if p["metadata"]["name"] == pod)

    def scheduled() -> list[dict[str, Any]]:
        page = stack.get(f"/api/v1/namespaces/{NS}/events?fieldSelector=reason%3DScheduled") or {}
        return [e for e in page.get("items") or [] if e["involvedObject"].get("uid") == uid]

    [event] = stack.wait("ca-fits' Scheduled event", scheduled)
    assert event["message"] == f"Successfully assigned {NS}/{pod} to {node}"
    assert not any(_autoscaler_would_scale_up_for(p) for p in stack.pods("ca-fits"))
    stack.delete_job("ca-big")
    stack.delete_job("ca-fits")
    stack.delete_job("ca-busy")


def test_preempt_evicts_a_low_priority_job_in_the_same_queue(stack: Stack) -> None:
    _queue(stack, "pq")
    # 6-GPU pods on 8-GPU nodes: one per node; the high pod (8 GPUs) fits nowhere until preempt.
    low = _job("low", replicas=4, min_available=1, gpus=6, queue="pq", priority="e2e-low")
    stack.create(f"{VCJOBS}/namespaces/{NS}/jobs", low)
    stack.wait("low's 4 pods bound", lambda: len(stack.bound("low")) == 4)
    before = stack.uids("low")
    high = _job(
        "high", replicas=1, min_available=1, gpus=8, queue="pq", priority="e2e-high", run_seconds=1
    )
    stack.create(f"{VCJOBS}/namespaces/{NS}/jobs", high)
    stack.wait("high Completed", lambda: stack.phase("high") == "Completed", timeout=90)
    assert stack.uids("low") != before  # a victim was evicted (and recreated)
    stack.delete_job("high")
    stack.delete_job("low")


def test_reclaim_takes_back_a_queue_share(stack: Stack) -> None:
    _queue(stack, "qa")
    _queue(stack, "qb")
    greedy = _job("greedy", replicas=4, min_available=1, gpus=6, queue="qa")
    stack.create(f"{VCJOBS}/namespaces/{NS}/jobs", greedy)
    stack.wait("greedy's 4 pods bound", lambda: len(stack.bound("greedy")) == 4)
    before = stack.uids("greedy")
    # qb asks 16 GPUs: deserved 16 each, qa holds 24; an 8-GPU pod fits only after reclaim.
    fair = _job("fair", replicas=2, min_available=1, gpus=8, queue="qb")
    stack.create(f"{VCJOBS}/namespaces/{NS}/jobs", fair)
    stack.wait("a fair pod bound", lambda: stack.bound("fair"), timeout=90)
    assert stack.uids("greedy") != before  # a victim was evicted (and recreated)
    stack.delete_job("fair")
    stack.delete_job("greedy")


def _binds(stack: Stack, pid: int) -> dict[str, float]:
    """The scheduler's `tephra_binds_total` by result, from its metrics endpoint."""
    url = f"http://127.0.0.1:{stack.metrics[pid]}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    found = re.findall(r'^tephra_binds_total\{result="(\w+)"\} (\S+)$', text, re.MULTILINE)
    return {result: float(value) for result, value in found}


def test_leader_killed_the_other_replica_takes_over(stack: Stack) -> None:
    by_identity = {f"{socket.gethostname()}-{p.proc.pid}": p for p in stack.schedulers}
    leader = stack.wait("a scheduler leads", lambda: by_identity.get(stack.leader()))
    survivor = next(p for p in stack.schedulers if p is not leader)
    # 10-cpu pods, one per node: three waves of four, the last two under the new leader.
    relay = _job("relay", replicas=12, min_available=1, cpu="10", run_seconds=2)
    stack.create(f"{VCJOBS}/namespaces/{NS}/jobs", relay)
    stack.wait("relay partly bound", lambda: stack.bound("relay"))
    first_nodes = stack.bound("relay")
    leader.proc.send_signal(signal.SIGKILL)
    leader.proc.wait(10)
    seen: dict[str, str] = dict(first_nodes)

    def completed() -> bool:
        for name, node in stack.bound("relay").items():
            assert seen.setdefault(name, node) == node, f"{name} bound twice: {seen[name]}, {node}"
        return stack.phase("relay") == "Completed"

    stack.wait("relay Completed under the new leader", completed, timeout=90)
    assert stack.leader() == f"{socket.gethostname()}-{survivor.proc.pid}"
    binds = _binds(stack, survivor.proc.pid)
    assert binds.get("bound", 0) > 0 and binds.get("conflict", 0) == 0, binds
    stack.delete_job("relay")


# ------------------------------------------------------------------- framework adapters
FRAMEWORK_CRDS = Path(__file__).resolve().parents[1] / "integrations" / "fixtures" / "crds"
KF = "training.kubeflow.org/"


def _owner(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    kind, version = obj["kind"], obj["apiVersion"]
    return {
        "apiVersion": version,
        "kind": kind,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
    }


def _operator_pod(name: str, labels: dict[str, str], owner: dict[str, Any]) -> dict[str, Any]:
    """A pod as the operator creates it: its labels, owned by the workload, for Volcano."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels, "ownerReferences": [owner]},
        "spec": {
            "schedulerName": "volcano",
            "restartPolicy": "Never",
            "nodeSelector": dict(NODE_LABEL),
            "containers": [
                {
                    "name": "main",
                    "image": "x",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                }
            ],
        },
    }


def _template() -> dict[str, Any]:
    return {"spec": _operator_pod("t", {}, {})["spec"]}


WORKLOADS: dict[str, tuple[str, dict[str, Any], str, list[tuple[str, dict[str, str]]]]] = {
    # framework: (collection path, object, PodGroup name, [(pod, labels)])
    "pytorch": (
        "/apis/kubeflow.org/v1/namespaces/e2e/pytorchjobs",
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "torch"},
            "spec": {
                "runPolicy": {"schedulingPolicy": {"queue": "default"}},
                "pytorchReplicaSpecs": {
                    "Master": {"replicas": 1, "template": _template()},
                    "Worker": {"replicas": 2, "template": _template()},
                },
            },
        },
        "torch",
        [
            (
                f"torch-{role}-{i}",
                {
                    KF + "operator-name": "pytorchjob-controller",
                    KF + "job-name": "torch",
                    KF + "replica-type": role,
                    KF + "replica-index": str(i),
                },
            )
            for role, i in (("master", 0), ("worker", 0), ("worker", 1))
        ],
    ),
    "mpi": (
        "/apis/kubeflow.org/v2beta1/namespaces/e2e/mpijobs",
        {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": {"name": "allreduce"},
            "spec": {
                "slotsPerWorker": 1,
                "mpiReplicaSpecs": {
                    "Launcher": {"replicas": 1, "template": _template()},
                    "Worker": {"replicas": 2, "template": _template()},
                },
            },
        },
        "allreduce",
        [
            (
                f"allreduce-{role}",
                {
                    KF + "operator-name": "mpi-operator",
                    KF + "job-name": "allreduce",
                    KF + "job-role": role.split("-")[0],
                    **({KF + "replica-index": role[-1]} if "worker" in role else {}),
                },
            )
            for role in ("launcher", "worker-0", "worker-1")
        ],
    ),
    "ray": (
        "/apis/ray.io/v1/namespaces/e2e/rayclusters",
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "metadata": {"name": "tune", "labels": {"volcano.sh/queue-name": "default"}},
            "spec": {
                "headGroupSpec": {"template": _template()},
                "workerGroupSpecs": [
                    {
                        "groupName": "cpu",
                        "replicas": 2,
                        "minReplicas": 2,
                        "maxReplicas": 2,
                        "template": _template(),
                    }
                ],
            },
        },
        "ray-tune-pg",
        [
            (
                name,
                {
                    "ray.io/cluster": "tune",
                    "ray.io/is-ray-node": "yes",
                    "ray.io/node-type": kind,
                    "ray.io/group": group,
                },
            )
            for name, kind, group in (
                ("tune-head", "head", "headgroup"),
                ("tune-worker-cpu-0", "worker", "cpu"),
                ("tune-worker-cpu-1", "worker", "cpu"),
            )
        ],
    ),
}


APPROVAL = "api-approved.kubernetes.io"


def approved(crd: dict[str, Any]) -> dict[str, Any]:
    """The CRD with the approval annotation kube-apiserver requires of a `*.k8s.io` group (the
    operators' real CRDs carry one; the minimal fixtures do not)."""
    out = dict(crd)
    if crd["spec"]["group"].endswith((".k8s.io", ".kubernetes.io")):
        meta = dict(crd["metadata"])
        meta["annotations"] = {**(meta.get("annotations") or {}), APPROVAL: "unapproved, test"}
        out["metadata"] = meta
    return out


@pytest.fixture(scope="module")
def framework_crds(api: Api, tmp_path_factory: pytest.TempPathFactory) -> None:
    directory = tmp_path_factory.mktemp("framework-crds")
    for path in sorted(FRAMEWORK_CRDS.glob("*.yaml")):
        (directory / path.name).write_text(
            yaml.safe_dump(approved(yaml.safe_load(path.read_text())))
        )
    api.kubectl("apply", "--server-side", "-f", str(directory))
    api.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(directory))


def _all_running(stack: Stack, names: list[str]) -> bool:
    pods = [stack.get(f"/api/v1/namespaces/{NS}/pods/{n}") or {} for n in names]
    return all(
        p.get("spec", {}).get("nodeName") and p.get("status", {}).get("phase") == "Running"
        for p in pods
    )


def _delete_all(stack: Stack, collection: str, name: str, pods: list[str]) -> None:
    stack.api.request("DELETE", f"{collection}/{name}")
    for pod in pods:
        stack.api.request("DELETE", f"/api/v1/namespaces/{NS}/pods/{pod}?gracePeriodSeconds=0")
    stack.wait(
        "workload pods gone",
        lambda: not any(stack.get(f"/api/v1/namespaces/{NS}/pods/{p}") for p in pods),
    )


@pytest.mark.parametrize("framework", sorted(WORKLOADS))
def test_operator_workload_runs_as_one_gang(
    stack: Stack, framework_crds: None, framework: str
) -> None:
    collection, obj, pg_name, pods = WORKLOADS[framework]
    created = stack.create(collection, obj)
    for name, labels in pods:
        stack.create(f"/api/v1/namespaces/{NS}/pods", _operator_pod(name, labels, _owner(created)))
    pg = stack.wait(
        f"PodGroup {pg_name}", lambda: stack.get(f"{SCHED}/namespaces/{NS}/podgroups/{pg_name}")
    )
    assert pg["spec"]["minMember"] == len(pods), pg["spec"]
    names = [n for n, _ in pods]
    stack.wait(f"{framework} pods bound and Running", lambda: _all_running(stack, names))
    _delete_all(stack, collection, obj["metadata"]["name"], names)


def test_spark_executors_follow_their_running_driver(stack: Stack, framework_crds: None) -> None:
    collection = "/apis/sparkoperator.k8s.io/v1beta2/namespaces/e2e/sparkapplications"
    app = stack.create(
        collection,
        {
            "apiVersion": "sparkoperator.k8s.io/v1beta2",
            "kind": "SparkApplication",
            "metadata": {"name": "etl"},
            "spec": {
                "type": "Scala",
                "mode": "cluster",
                "driver": {"cores": 1, "memory": "512m"},
                "executor": {"instances": 2, "cores": 1, "memory": "512m"},
            },
        },
    )
    labels = {"spark-app-selector": "spark-etl0001", "sparkoperator.k8s.io/app-name": "etl"}
    driver = stack.create(
        f"/api/v1/namespaces/{NS}/pods",
        _operator_pod("etl-driver", {**labels, "spark-role": "driver"}, _owner(app)),
    )
    stack.wait(
        "PodGroup spark-etl-pg",
        lambda: stack.get(f"{SCHED}/namespaces/{NS}/podgroups/spark-etl-pg"),
    )
    stack.wait("driver Running", lambda: _all_running(stack, ["etl-driver"]))
    owner = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "etl-driver",
        "uid": driver["metadata"]["uid"],
        "controller": True,
    }
    executors = [f"etl-exec-{i}" for i in (1, 2)]
    for i, name in enumerate(executors, start=1):
        pod = _operator_pod(
            name, {**labels, "spark-role": "executor", "spark-exec-id": str(i)}, owner
        )
        stack.create(f"/api/v1/namespaces/{NS}/pods", pod)
    stack.wait("executors bound and Running", lambda: _all_running(stack, executors))
    _delete_all(stack, collection, "etl", ["etl-driver", *executors])
