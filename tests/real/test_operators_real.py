"""The real operators end to end (issue 34, item 5): Kubeflow's training-operator v1.8.1 and
KubeRay's ray-operator v1.5.0, built by scripts/build-oracle.sh, run beside `tephra controller`
(with a SQLite ledger) and `tephra scheduler` on the session's real control plane and emulated
kubelets. The operators make the Volcano PodGroups themselves; Tephra must schedule them as
gangs, keep out of their way once they finish, and its ledger and CLI must follow the framework
objects by their own names.

Without a Go toolchain to build the operators these tests skip, saying so.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from batch.sandbox.control_plane import ControlPlane
from batch.sandbox.pod_annotations import EXIT_CODE
from tests.real.conftest import (
    CRD_PATH,
    Api,
    TephraProcess,
    install_crds,
    oracle_bin,
    tephra_process,
)
from tests.real.kubelets import NODE_LABEL, Cluster
from tests.real.test_e2e_real import (
    RUN,
    SCHED,
    Stack,
    _controller_args,
    _free_port,
    _namespace,
    _queue,
    _scheduler_args,
    _scheduler_conf,
    _wait_open,
)

pytestmark = [pytest.mark.real, pytest.mark.xdist_group("real")]

NS = "ops"
KF = "/apis/kubeflow.org/v1"
RAY = "/apis/ray.io/v1"
PODS = f"/api/v1/namespaces/{NS}/pods"


class Operators(Stack):
    """Tephra's processes, the two operators and the ledger file."""

    def __init__(
        self,
        api: Api,
        controller: TephraProcess,
        schedulers: list[TephraProcess],
        operators: list[TephraProcess],
        db: Path,
        tmp: Path,
    ) -> None:
        super().__init__(api, controller, schedulers)
        self.operators = operators
        self.db = db
        self.tmp = tmp

    def logs(self) -> str:
        own = super().logs()
        return own + "\n".join(f"--- {p.label}:\n{p.log()[-2500:]}" for p in self.operators)

    def podgroups(self) -> list[dict[str, Any]]:
        return list((self.get(f"{SCHED}/namespaces/{NS}/podgroups") or {}).get("items") or [])

    def pods_of(self, selector: str) -> list[dict[str, Any]]:
        return list((self.get(f"{PODS}?labelSelector={selector}") or {}).get("items") or [])

    def ledger(self, name: str) -> dict[str, Any] | None:
        with sqlite3.connect(self.db) as conn:
            conn.row_factory = sqlite3.Row
            row = conn.execute(
                "SELECT * FROM jobs WHERE namespace = ? AND name = ? AND kind != 'PodGroup'",
                (NS, name),
            ).fetchone()
        return dict(row) if row else None

    def tephra(self, *args: str) -> str:
        cmd = [
            sys.executable,
            "-m",
            "batch.cli.main",
            *args,
            "--kubeconfig",
            str(self.api.plane.kubeconfig),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr + done.stdout
        return done.stdout

    def restart_controller(self) -> None:
        self.controller.stop()
        kubeconfig = str(self.api.plane.kubeconfig)
        log = self.tmp / "controller-2.log"
        self.controller = TephraProcess(log, *_controller_args(kubeconfig), "--db", self._url())

    def _url(self) -> str:
        return f"sqlite:///{self.db}"

    def ledger_jobs(self, *names: str) -> list[tuple[str, str]]:
        """(kind, name) of every ledger row of these names (PodGroup rows too)."""
        marks = ",".join("?" * len(names))
        with sqlite3.connect(self.db) as conn:
            found = conn.execute(
                f"SELECT kind, name FROM jobs WHERE namespace = ? AND name IN ({marks})",
                (NS, *names),
            ).fetchall()
        return sorted((str(k), str(n)) for k, n in found)

    def report(self, name: str, queue: str) -> list[dict[str, Any]]:
        """`tephra report NAME` of one queue, from the ledger, as JSON rows."""
        cmd = [sys.executable, "-m", "batch.cli.main", "report", name, "--db", self._url()]
        cmd += ["--queue", queue, "--since", "1d", "-o", "json"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr + done.stdout
        rows: list[dict[str, Any]] = json.loads(done.stdout)
        return rows


def _drop_foreign_mpijob_crd(api: Api) -> None:
    """mpi-operator's MPIJob CRD (kubeflow.org/v2beta1, stored), which an earlier test of the
    shared control plane installs, cannot be replaced by training-operator's v1 one: the API
    server refuses to drop a stored version. Delete it first (no MPIJob is left by then)."""
    name = f"{CRD_PATH}/mpijobs.kubeflow.org"
    api.request("DELETE", name)
    deadline = time.monotonic() + 60
    while api.request("GET", name)[0] != 404:
        assert time.monotonic() < deadline, "the MPIJob CRD was not deleted"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def ops(
    real: ControlPlane,
    api: Api,
    crds: list[str],
    kubelets: Cluster,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Operators]:
    training, kuberay = oracle_bin("training-operator"), oracle_bin("kuberay")
    tmp = tmp_path_factory.mktemp("operators-real")
    _drop_foreign_mpijob_crd(api)
    install_crds(api, training / "crds")
    install_crds(api, kuberay / "crds")
    _namespace(api, NS)
    kubeconfig = str(real.kubeconfig)
    conf = str(_scheduler_conf(tmp / "scheduler.conf"))
    db = tmp / "ledger.db"
    probe = lambda: f"127.0.0.1:{_free_port()}"  # noqa: E731
    kf_args = [
        f"--kubeconfig={kubeconfig}",
        "--gang-scheduler-name=volcano",
        f"--metrics-bind-address={probe()}",
        f"--health-probe-bind-address={probe()}",
        f"--webhook-server-port={_free_port()}",
    ]
    ray_args = [
        f"--kubeconfig={kubeconfig}",
        "--batch-scheduler=volcano",
        "--enable-leader-election=false",
        f"--metrics-addr={probe()}",
        f"--health-probe-bind-address={probe()}",
    ]
    _webhook_secret(api)
    with (
        tephra_process(
            tmp / "controller.log", *_controller_args(kubeconfig), "--db", f"sqlite:///{db}"
        ) as controller,
        tephra_process(
            tmp / "scheduler.log", *_scheduler_args(kubeconfig, conf, (_free_port(), _free_port()))
        ) as scheduler,
        tephra_process(
            tmp / "training-operator.log", *kf_args, program=training / "training-operator"
        ) as kf,
        tephra_process(
            tmp / "ray-operator.log", *ray_args, program=kuberay / "ray-operator"
        ) as ray,
    ):
        _webhook_cert_files(api)
        stack = Operators(api, controller, [scheduler], [kf, ray], db, tmp)
        try:
            _wait_open(stack, "default")
            yield stack
        finally:
            stack.controller.stop()


KF_NS = "kubeflow"  # where training-operator looks for its webhook Secret out of a cluster
KF_SECRET = "training-operator-webhook-cert"
# controller-runtime's default webhook cert dir; v1.8.1 has no flag to move it.
CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")


def _webhook_secret(api: Api) -> None:
    """training-operator v1.8.1 exits at start without its webhook Secret (there is no flag to
    turn the webhook off); given an empty one, its cert rotator fills it."""
    _namespace(api, KF_NS)
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": KF_SECRET}}
    api.request("POST", f"/api/v1/namespaces/{KF_NS}/secrets", body)


def _webhook_cert_files(api: Api) -> None:
    """Its controllers start only once the certs are on disk where a Pod would mount the
    Secret: copy them there."""
    deadline = time.monotonic() + 60
    while True:
        code, secret = api.request("GET", f"/api/v1/namespaces/{KF_NS}/secrets/{KF_SECRET}")
        data = (secret or {}).get("data") or {} if code == 200 else {}
        if data.get("tls.crt"):
            break
        assert time.monotonic() < deadline, f"training-operator never filled {KF_SECRET}"
        time.sleep(0.25)
    CERT_DIR.mkdir(parents=True, exist_ok=True)
    for key, value in data.items():
        (CERT_DIR / key).write_bytes(base64.b64decode(value))


# ------------------------------------------------------------------------------ manifests
def _pod_template(cpu: str, run_seconds: float) -> dict[str, Any]:
    return {
        "metadata": {"annotations": {RUN: str(run_seconds)}},
        "spec": {
            "nodeSelector": dict(NODE_LABEL),
            "containers": [
                {
                    "name": "pytorch",
                    "image": "busybox:1.36",
                    "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}},
                }
            ],
        },
    }


def pytorchjob(
    name: str,
    *,
    workers: int,
    cpu: str = "100m",
    run_seconds: float = 2,
    queue: str = "default",
    priority: str | None = None,
) -> dict[str, Any]:
    policy: dict[str, Any] = {"queue": queue, "minAvailable": workers + 1}
    if priority:
        policy["priorityClass"] = priority
    replica = lambda n: {  # noqa: E731
        "replicas": n,
        "restartPolicy": "Never",
        "template": _pod_template(cpu, run_seconds),
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "runPolicy": {"schedulingPolicy": policy},
            "pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(workers)},
        },
    }


def _job_phase(stack: Operators, path: str) -> str:
    """The last True condition's type of a training-operator job (Created/Running/Succeeded)."""
    job = stack.get(path) or {}
    true = [
        c["type"]
        for c in (job.get("status") or {}).get("conditions") or []
        if c.get("status") == "True"
    ]
    return true[-1] if true else ""


def _podgroup_of(stack: Operators, uid: str) -> dict[str, Any] | None:
    for pg in stack.podgroups():
        if any(o.get("uid") == uid for o in pg["metadata"].get("ownerReferences") or []):
            return pg
    return None


# ---------------------------------------------------------------------------------- tests
def test_pytorchjob_that_fits_runs_as_one_gang_and_completes(ops: Operators) -> None:
    path = f"{KF}/namespaces/{NS}/pytorchjobs"
    job = ops.create(path, pytorchjob("pt-fit", workers=2, run_seconds=3))
    uid = job["metadata"]["uid"]
    pods = "training.kubeflow.org/job-name=pt-fit"
    pg = ops.wait("the operator's PodGroup", lambda: _podgroup_of(ops, uid))
    assert pg["spec"]["minMember"] == 3 and pg["spec"]["queue"] == "default"

    def all_bound() -> bool:
        found = ops.pods_of(pods)
        return len(found) == 3 and all(p["spec"].get("nodeName") for p in found)

    ops.wait("3 pods bound", all_bound)
    ops.wait(
        "PyTorchJob Succeeded", lambda: _job_phase(ops, f"{path}/pt-fit") == "Succeeded", timeout=90
    )
    row = ops.wait(
        "ledger finished", lambda: (r := ops.ledger("pt-fit")) and r["finished_at"] and r
    )
    assert row["kind"] == "PyTorchJob" and row["queue"] == "default", row
    assert row["final_phase"] == "Completed", row
    assert row["submitted_at"] <= row["first_started_at"] <= row["finished_at"], row


def _deleted(stack: Operators, path: str) -> None:
    stack.api.request("DELETE", path)
    stack.wait(f"{path} gone", lambda: stack.get(path) is None)


def _barrier(stack: Operators) -> None:
    """Wait until the controller has handled a pod created now: its pod watch lists the pods
    that were there first, so it has passed over every one of them."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "barrier-", "annotations": {RUN: "1"}},
        "spec": {
            "schedulerName": "volcano",
            "restartPolicy": "Never",
            "nodeSelector": dict(NODE_LABEL),
            "containers": [{"name": "c", "image": "busybox:1.36"}],
        },
    }
    uid = stack.create(PODS, pod)["metadata"]["uid"]
    group = f"{SCHED}/namespaces/{NS}/podgroups/podgroup-{uid}"
    stack.wait("the barrier pod's PodGroup", lambda: stack.get(group))


def test_pytorchjob_restart_of_tephra_controller_recreates_no_podgroup(ops: Operators) -> None:
    """The finished pt-fit's PodGroup was deleted by the operator; Tephra's controller, started
    again, must not make one for the finished pods (issue 34.5)."""
    job = ops.get(f"{KF}/namespaces/{NS}/pytorchjobs/pt-fit")
    if job is None or _job_phase(ops, f"{KF}/namespaces/{NS}/pytorchjobs/pt-fit") != "Succeeded":
        pytest.skip("needs test_pytorchjob_that_fits_runs_as_one_gang_and_completes first")
    uid = job["metadata"]["uid"]
    ops.wait("the operator deletes the finished job's PodGroup", lambda: not _podgroup_of(ops, uid))
    ops.restart_controller()
    _barrier(ops)
    assert _podgroup_of(ops, uid) is None, ops.logs()
    row = ops.ledger("pt-fit")
    assert row and row["final_phase"] == "Completed", row


def test_pytorchjob_too_big_binds_nothing_queue_priority_and_deletion(ops: Operators) -> None:
    """Five 10-cpu pods on four 16-cpu Nodes: no pod is bound; the PodGroup carries the queue
    and priority of runPolicy.schedulingPolicy; deleting the waiting job ends it in the ledger
    as Deleted, never started."""
    _queue(ops, "ops-q")
    body: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass"}
    body.update(metadata={"name": "ops-high"}, value=1000)
    ops.api.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body)
    path = f"{KF}/namespaces/{NS}/pytorchjobs"
    doc = pytorchjob("pt-big", workers=4, cpu="10", queue="ops-q", priority="ops-high")
    uid = ops.create(path, doc)["metadata"]["uid"]
    pg = ops.wait("the operator's PodGroup", lambda: _podgroup_of(ops, uid))
    assert pg["spec"]["queue"] == "ops-q" and pg["spec"]["minMember"] == 5, pg
    assert pg["spec"].get("priorityClassName") == "ops-high", pg
    ops.wait("the ledger row", lambda: ops.ledger("pt-big"))

    def unschedulable() -> bool:
        found = _podgroup_of(ops, uid) or {}
        conds = (found.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Unschedulable" and c.get("status") == "True" for c in conds)

    ops.wait("PodGroup Unschedulable", unschedulable)
    assert not [
        p for p in ops.pods_of("training.kubeflow.org/job-name=pt-big") if p["spec"].get("nodeName")
    ]
    row = ops.ledger("pt-big")
    assert row and row["kind"] == "PyTorchJob" and row["queue"] == "ops-q", row
    assert row["first_started_at"] is None and row["final_phase"] is None, row
    why = ops.tephra("job", "why", "pt-big", "-n", NS)
    assert "pt-big" in why, why
    listed = ops.tephra("job", "list", "-A")
    assert any("pt-big" in line and "PyTorchJob" in line for line in listed.splitlines()), listed
    _deleted(ops, f"{path}/pt-big")
    row = ops.wait("ledger Deleted", lambda: (r := ops.ledger("pt-big")) and r["final_phase"] and r)
    assert row["final_phase"] == "Deleted" and row["first_started_at"] is None, row


def _ray_template(container: str) -> dict[str, Any]:
    res = {"cpu": "200m", "memory": "256Mi"}
    return {
        "spec": {
            "nodeSelector": dict(NODE_LABEL),
            "containers": [
                {
                    "name": container,
                    "image": "rayproject/ray:2.9.0",
                    "resources": {"requests": res, "limits": res},
                }
            ],
        }
    }


def _ray_cluster_spec(workers: int) -> dict[str, Any]:
    return {
        "headGroupSpec": {"rayStartParams": {}, "template": _ray_template("ray-head")},
        "workerGroupSpecs": [
            {
                "groupName": "workers",
                "replicas": workers,
                "minReplicas": workers,
                "maxReplicas": workers,
                "rayStartParams": {},
                "template": _ray_template("ray-worker"),
            }
        ],
    }


def raycluster(name: str, *, workers: int, queue: str) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {"ray.io/scheduler-name": "volcano", "volcano.sh/queue-name": queue},
        },
        "spec": _ray_cluster_spec(workers),
    }


def test_raycluster_runs_as_the_operators_gang_in_its_queue(ops: Operators) -> None:
    _queue(ops, "ray-q")
    path = f"{RAY}/namespaces/{NS}/rayclusters"
    uid = ops.create(path, raycluster("rc", workers=2, queue="ray-q"))["metadata"]["uid"]
    pg = ops.wait("KubeRay's PodGroup", lambda: _podgroup_of(ops, uid))
    assert pg["spec"]["queue"] == "ray-q" and pg["spec"]["minMember"] == 3, pg

    def all_bound() -> bool:
        found = ops.pods_of("ray.io/cluster=rc")
        return len(found) == 3 and all(p["spec"].get("nodeName") for p in found)

    ops.wait("3 Ray pods bound", all_bound)
    row = ops.wait(
        "ledger Running", lambda: (r := ops.ledger("rc")) and r["first_started_at"] and r
    )
    assert row["kind"] == "RayCluster" and row["queue"] == "ray-q", row
    listed = ops.tephra("job", "list", "-A")
    assert any(" rc " in f" {line} " and "RayCluster" in line for line in listed.splitlines())
    _deleted(ops, f"{path}/rc")
    row = ops.wait("ledger end", lambda: (r := ops.ledger("rc")) and r["final_phase"] and r)
    assert row["final_phase"] == "Deleted" and row["finished_at"], row


def tfjob(name: str, *, workers: int, run_seconds: float) -> dict[str, Any]:
    template = _pod_template("100m", run_seconds)
    template["spec"]["containers"][0]["name"] = "tensorflow"
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "runPolicy": {"schedulingPolicy": {"queue": "default", "minAvailable": workers}},
            "tfReplicaSpecs": {
                "Worker": {"replicas": workers, "restartPolicy": "Never", "template": template}
            },
        },
    }


def test_tfjob_survives_a_controller_restart_mid_run_with_its_times(ops: Operators) -> None:
    """A TFJob whose pods run 6 s, Tephra's controller restarted while they run: it completes,
    and the ledger keeps its own start (a restart once rewrote a run's start, issue 34.5)."""
    path = f"{KF}/namespaces/{NS}/tfjobs"
    uid = ops.create(path, tfjob("tf-run", workers=2, run_seconds=6))["metadata"]["uid"]
    pg = ops.wait("the operator's PodGroup", lambda: _podgroup_of(ops, uid))
    assert pg["spec"]["minMember"] == 2, pg

    def all_bound() -> bool:
        found = ops.pods_of("training.kubeflow.org/job-name=tf-run")
        return len(found) == 2 and all(p["spec"].get("nodeName") for p in found)

    ops.wait("2 pods bound", all_bound)
    started = ops.wait(
        "ledger start", lambda: (r := ops.ledger("tf-run")) and r["first_started_at"]
    )
    ops.restart_controller()
    ops.wait("TFJob Succeeded", lambda: _job_phase(ops, f"{path}/tf-run") == "Succeeded", 90)
    row = ops.wait("ledger end", lambda: (r := ops.ledger("tf-run")) and r["finished_at"] and r)
    assert row["kind"] == "TFJob" and row["final_phase"] == "Completed", row
    assert row["first_started_at"] == started, row
    ran = dt.datetime.fromisoformat(row["finished_at"]) - dt.datetime.fromisoformat(started)
    assert dt.timedelta(seconds=5) <= ran <= dt.timedelta(seconds=60), row
    ops.wait("the finished TFJob's PodGroup gone", lambda: not _podgroup_of(ops, uid))


def mpijob(name: str, *, workers: int, queue: str, run_seconds: float) -> dict[str, Any]:
    """training-operator's MPIJob kubeflow.org/v1: one launcher and `workers` workers; the
    workers outlive the launcher by a second (mpirun needs its hosts until it ends)."""

    def replica(n: int, container: str, seconds: float) -> dict[str, Any]:
        template = _pod_template("100m", seconds)
        template["spec"]["containers"][0]["name"] = container
        return {"replicas": n, "restartPolicy": "Never", "template": template}

    policy = {"queue": queue, "minAvailable": workers + 1}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "runPolicy": {"schedulingPolicy": policy},
            "mpiReplicaSpecs": {
                "Launcher": replica(1, "mpi-launcher", run_seconds),
                "Worker": replica(workers, "mpi-worker", run_seconds + 1),
            },
        },
    }


def test_mpijob_v1_launcher_and_workers_run_as_one_gang_and_complete(ops: Operators) -> None:
    """training-operator's MPIJob v1 (launcher + 2 workers, all created at once): one gang of
    3 in the queue of runPolicy.schedulingPolicy, bound together; it completes and the ledger
    row is the MPIJob's own, found by its name."""
    _queue(ops, "mpi-q")
    path = f"{KF}/namespaces/{NS}/mpijobs"
    doc = mpijob("mpi-fit", workers=2, queue="mpi-q", run_seconds=5)
    uid = ops.create(path, doc)["metadata"]["uid"]
    pg = ops.wait("the operator's PodGroup", lambda: _podgroup_of(ops, uid))
    assert pg["spec"]["minMember"] == 3 and pg["spec"]["queue"] == "mpi-q", pg
    pods = "training.kubeflow.org/job-name=mpi-fit"

    def all_bound() -> bool:
        found = ops.pods_of(pods)
        return len(found) == 3 and all(p["spec"].get("nodeName") for p in found)

    ops.wait("launcher and 2 workers bound", all_bound)
    roles = sorted(
        p["metadata"]["labels"].get("training.kubeflow.org/replica-type") for p in ops.pods_of(pods)
    )
    assert roles == ["launcher", "worker", "worker"], roles
    # While it runs (the operator deletes the finished job's PodGroup, which the CLI reads).
    why = ops.tephra("job", "why", "mpi-fit", "-n", NS)
    assert "mpi-fit" in why, why
    listed = ops.tephra("job", "list", "-A")
    assert any("mpi-fit" in line and "MPIJob" in line for line in listed.splitlines()), listed
    ops.wait("MPIJob Succeeded", lambda: _job_phase(ops, f"{path}/mpi-fit") == "Succeeded", 90)
    row = ops.wait(
        "ledger finished", lambda: (r := ops.ledger("mpi-fit")) and r["finished_at"] and r
    )
    assert row["kind"] == "MPIJob" and row["queue"] == "mpi-q", row
    assert row["final_phase"] == "Completed", row
    assert row["submitted_at"] <= row["first_started_at"] <= row["finished_at"], row


def rayjob(name: str, *, workers: int, queue: str, submitter_exit: int) -> dict[str, Any]:
    """A RayJob in K8sJobMode whose RayCluster KubeRay deletes once it finishes. The emulated
    kubelets run no Ray, so the dashboard KubeRay asks for the job's status never answers: the
    only end the operator reaches is through its submitter Job, whose one pod (no retry) exits
    with `submitter_exit` after a second."""
    submitter = _ray_template("ray-job-submitter")
    submitter["metadata"] = {"annotations": {RUN: "1", EXIT_CODE: str(submitter_exit)}}
    submitter["spec"]["restartPolicy"] = "Never"
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {"ray.io/scheduler-name": "volcano", "volcano.sh/queue-name": queue},
        },
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "submissionMode": "K8sJobMode",
            "shutdownAfterJobFinishes": True,
            "ttlSecondsAfterFinished": 0,
            "submitterPodTemplate": submitter,
            "submitterConfig": {"backoffLimit": 0},
            "rayClusterSpec": _ray_cluster_spec(workers),
        },
    }


def _owned_podgroups(stack: Operators, *uids: str) -> list[str]:
    return sorted(
        pg["metadata"]["name"]
        for pg in stack.podgroups()
        if any(o.get("uid") in uids for o in pg["metadata"].get("ownerReferences") or [])
    )


def test_rayjob_gang_runs_in_its_queue_and_the_ledger_follows_the_rayjob(ops: Operators) -> None:
    """A RayJob's cluster (head + 2 workers) runs as KubeRay's gang `ray-<job>-pg` in the
    queue of the RayJob's label; the RayJob ends (Failed: its submitter exits 1, see rayjob())
    and KubeRay deletes the cluster. The ledger row is the RayJob's own, ended with it:
    KubeRay v1.5.0 leaves the finished RayJob's PodGroup behind, never completed (KubeRay
    #4473), so its phases cannot stand in for the RayJob's. Tephra's controller, restarted,
    makes no PodGroup of its own for the job or its cluster."""
    _queue(ops, "rayjob-q")
    path = f"{RAY}/namespaces/{NS}/rayjobs"
    doc = rayjob("rj", workers=2, queue="rayjob-q", submitter_exit=1)
    uid = ops.create(path, doc)["metadata"]["uid"]
    pg = ops.wait("KubeRay's PodGroup of the RayJob", lambda: _podgroup_of(ops, uid))
    assert pg["metadata"]["name"] == "ray-rj-pg", pg
    assert pg["spec"]["minMember"] == 3 and pg["spec"]["queue"] == "rayjob-q", pg
    cluster = ops.wait(
        "the RayJob's cluster",
        lambda: ((ops.get(f"{path}/rj") or {}).get("status") or {}).get("rayClusterName"),
    )
    cluster_uid = ops.wait(
        "the cluster object",
        lambda: (
            (ops.get(f"{RAY}/namespaces/{NS}/rayclusters/{cluster}") or {}).get("metadata") or {}
        ).get("uid"),
    )

    def all_bound() -> bool:
        found = ops.pods_of(f"ray.io/cluster={cluster}")
        return len(found) == 3 and all(p["spec"].get("nodeName") for p in found)

    ops.wait("3 Ray pods bound", all_bound)
    cluster_ready = ops.wait("the cluster ready", lambda: _ready_time(ops, cluster))
    why = ops.tephra("job", "why", "rj", "-n", NS)
    assert "rj" in why, why
    listed = ops.tephra("job", "list", "-A")
    assert any(" rj " in f" {line} " and "RayJob" in line for line in listed.splitlines())

    def deployment() -> str:
        return str(((ops.get(f"{path}/rj") or {}).get("status") or {}).get("jobDeploymentStatus"))

    ops.wait("RayJob Failed", lambda: deployment() == "Failed")
    row = ops.wait("ledger end", lambda: (r := ops.ledger("rj")) and r["finished_at"] and r)
    assert row["kind"] == "RayJob" and row["queue"] == "rayjob-q", row
    assert row["final_phase"] == "Failed", row
    assert row["submitted_at"] <= row["first_started_at"] <= row["finished_at"], row
    assert _as_time(cluster_ready) <= _as_time(row["first_started_at"]), (cluster_ready, row)
    # one job, one row: the cluster the RayJob created is part of its job (no row of its own)
    assert ops.ledger_jobs("rj", cluster) == [("RayJob", "rj")]
    assert [r["jobs"] for r in ops.report("wait-times", "rayjob-q")] == [1]
    clusters = f"{RAY}/namespaces/{NS}/rayclusters/{cluster}"
    ops.wait("KubeRay deletes the finished job's cluster", lambda: ops.get(clusters) is None)
    assert _owned_podgroups(ops, uid, cluster_uid) == ["ray-rj-pg"]  # KubeRay #4473
    ops.restart_controller()
    _barrier(ops)
    assert _owned_podgroups(ops, uid, cluster_uid) == ["ray-rj-pg"], ops.logs()
    row = ops.ledger("rj")
    assert row and row["final_phase"] == "Failed" and row["finished_at"], row


def _ready_time(stack: Operators, cluster: str) -> str | None:
    """When KubeRay says RayCluster `cluster` became ready (None while it is not)."""
    found = stack.get(f"{RAY}/namespaces/{NS}/rayclusters/{cluster}") or {}
    status = found.get("status") or {}
    return (
        (status.get("stateTransitionTimes") or {}).get("ready")
        if status.get("state") == "ready"
        else None
    )


def _as_time(value: str) -> dt.datetime:
    """A ledger (SQLite text) or Kubernetes time, in UTC."""
    parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def rayservice(name: str, *, workers: int, queue: str) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {"ray.io/scheduler-name": "volcano", "volcano.sh/queue-name": queue},
        },
        "spec": {
            "serveConfigV2": "applications: []\n",
            "rayClusterConfig": _ray_cluster_spec(workers),
        },
    }


def test_rayservice_is_one_ledger_job_run_as_its_clusters_gang(ops: Operators) -> None:
    """A RayService's cluster (head + 1 worker) runs as KubeRay's gang `ray-<cluster>-pg` (owned
    by the cluster) in the queue of the RayService's label. The ledger keeps one row, the
    RayService's: submitted when created, running since its cluster was ready, though KubeRay
    never writes the RayService's status (the emulated kubelets run no Ray, so its dashboard
    never answers and every reconcile stops there), Deleted when deleted. The cluster and its
    PodGroup make no row of their own, and the wait-times report counts one job."""
    _queue(ops, "raysvc-q")
    path = f"{RAY}/namespaces/{NS}/rayservices"
    created = ops.create(path, rayservice("svc", workers=1, queue="raysvc-q"))
    uid = created["metadata"]["uid"]

    def cluster_of() -> dict[str, Any] | None:
        found = ops.get(f"{RAY}/namespaces/{NS}/rayclusters") or {}
        return next(
            (
                c
                for c in found.get("items") or []
                if any(o.get("uid") == uid for o in c["metadata"].get("ownerReferences") or [])
            ),
            None,
        )

    made = ops.wait("the RayService's cluster", cluster_of)
    cluster, cluster_uid = made["metadata"]["name"], made["metadata"]["uid"]
    pg = ops.wait("KubeRay's PodGroup of the cluster", lambda: _podgroup_of(ops, cluster_uid))
    assert pg["metadata"]["name"] == f"ray-{cluster}-pg", pg
    assert pg["spec"]["minMember"] == 2 and pg["spec"]["queue"] == "raysvc-q", pg

    def all_bound() -> bool:
        found = ops.pods_of(f"ray.io/cluster={cluster}")
        return len(found) == 2 and all(p["spec"].get("nodeName") for p in found)

    ops.wait("2 Ray pods bound", all_bound)
    ready = ops.wait("the cluster ready", lambda: _ready_time(ops, cluster))
    row = ops.wait(
        "ledger Running", lambda: (r := ops.ledger("svc")) and r["first_started_at"] and r
    )
    assert row["kind"] == "RayService" and row["queue"] == "raysvc-q", row
    assert _as_time(row["first_started_at"]) == _as_time(ready), (row, ready)
    assert _as_time(row["submitted_at"]) == _as_time(created["metadata"]["creationTimestamp"])
    assert row["podgroup"] == f"ray-{cluster}-pg", row  # its cluster's PodGroup is its own
    assert row["final_phase"] is None, row
    assert _podgroup_of(ops, uid) is None  # KubeRay makes no PodGroup for the RayService
    _deleted(ops, f"{path}/svc")
    row = ops.wait("ledger end", lambda: (r := ops.ledger("svc")) and r["finished_at"] and r)
    assert row["final_phase"] == "Deleted", row
    assert row["first_started_at"] <= row["finished_at"], row
    assert ops.ledger_jobs("svc", cluster) == [("RayService", "svc")]
    assert [r["jobs"] for r in ops.report("wait-times", "raysvc-q")] == [1]
