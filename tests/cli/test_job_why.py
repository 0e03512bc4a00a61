"""`tephra job why/list/view` on a sandbox with the controllers and the scheduler (issue 31.3,
issue 34.5): the first line of `job why` names the blocker as the scheduler judged it, for
VCJobs and for other workloads' gangs, found by the workload's own name."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from batch.cli.main import main
from batch.controllers.runner import ControllerComponent
from batch.kube.config import load_access
from batch.kube.resource import RESOURCES, ApiError, Resource
from batch.kube.rest import RestClient
from batch.kube.service import SchedulerComponent
from batch.sandbox.demo import PYTORCHJOB_CRD
from batch.sandbox.nodes import make_nodes
from batch.sandbox.testing import SandboxHandle, run_sandbox
from tests.waiting import wait_for

pytestmark = pytest.mark.xdist_group("controllers-scheduler")

JOBS = Resource("batch.volcano.sh/v1alpha1", "jobs", "Job")
GPU = "nvidia.com/gpu"


def _task(name: str, gpus: int, replicas: int = 1, node: str = "", **ann: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {"name": "main", "image": "busybox", "resources": {"requests": {GPU: str(gpus)}}}
        ],
    }
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    template = {"metadata": {"annotations": ann}, "spec": spec}
    return {"name": name, "replicas": replicas, "template": template}


def _vcjob(name: str, *tasks: dict[str, Any], min_available: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"schedulerName": "volcano", "minAvailable": min_available, "tasks": list(tasks)},
    }


CRDS = Resource(
    "apiextensions.k8s.io/v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
PYTORCHJOBS = Resource("kubeflow.org/v1", "pytorchjobs", "PyTorchJob")
MERGE = "application/merge-patch+json"


def _pytorchjob(rest: RestClient, namespace: str, name: str) -> dict[str, Any]:
    """A PyTorchJob (its CRD installed first); no operator runs, so it makes no pods."""
    rest.create(CRDS, PYTORCHJOB_CRD)
    wait_for(lambda: rest.list(PYTORCHJOBS, namespace=namespace), tolerate=(ApiError,))
    body = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name}}
    return rest.create(PYTORCHJOBS, {**body, "spec": {}}, namespace)


def _operator_gang(namespace: str, workload: dict[str, Any]) -> dict[str, Any]:
    """The PodGroup the Kubeflow training-operator makes for PyTorchJob `workload` (named after
    it, owned by it)."""
    name = workload["metadata"]["name"]
    owner = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "name": name,
        "uid": workload["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace, "ownerReferences": [owner]},
        "spec": {"minMember": 4, "queue": "default", "minResources": {GPU: "32"}},
    }


@pytest.fixture(scope="module")
def sb() -> Iterator[SandboxHandle]:
    with run_sandbox(
        nodes=make_nodes(count=2, gpus=8, cpu="64", memory="256Gi"),
        components=[ControllerComponent(), SchedulerComponent()],
        max_grace_seconds=0.3,
        ready_timeout=120,
    ) as handle:
        rest = RestClient(load_access(handle.kubeconfig_path))
        # 2 GPUs busy on node-0, 6 on node-1: 8 free, at most 6 on one node
        rest.create(
            JOBS,
            _vcjob(
                "hog", _task("a", 2, node="node-0"), _task("b", 6, node="node-1"), min_available=2
            ),
            "default",
        )
        wait_for(lambda: _phase(rest, "hog") == "Running", timeout=60, what="hog Running")
        rest.create(JOBS, _vcjob("big", _task("w", 8)), "default")
        rest.create(JOBS, _vcjob("wide", _task("w", 5, replicas=3), min_available=3), "default")
        crash = _task(
            "w", 0, **{"sandbox.tephra.io/run-seconds": "0.2", "sandbox.tephra.io/exit-code": "3"}
        )
        rest.create(JOBS, _vcjob("crash", crash), "default")
        rest.create(RESOURCES["Namespace"], {"metadata": {"name": "kf"}})
        workload = _pytorchjob(rest, "kf", "pt-big")
        rest.create(RESOURCES["PodGroup"], _operator_gang("kf", workload), "kf")
        yield handle


def _phase(rest: RestClient, name: str) -> str:
    job = rest.get(JOBS, name, "default")
    return str(((job.get("status") or {}).get("state") or {}).get("phase") or "")


def tephra(sb: SandboxHandle, *args: str) -> str:
    res = CliRunner().invoke(main, [*args, "--kubeconfig", str(sb.kubeconfig_path)])
    assert res.exit_code == 0, res.output
    return res.stdout


def _first_line(sb: SandboxHandle, *args: str, says: str) -> str:
    def first() -> str:
        return tephra(sb, "job", "why", *args).splitlines()[0]

    wait_for(
        lambda: says in first(),
        timeout=60,
        what=f"job why {' '.join(args)}: {says}",
        explain=lambda: tephra(sb, "job", "why", *args),
    )
    return first()


def test_fragmented_gpus_are_named_not_insufficient(sb: SandboxHandle) -> None:
    assert _first_line(sb, "big", says="room on one node") == (
        "Job default/big waits for room on one node: 8 GPUs are free but at most 6 on one node; "
        "each pod needs 8."
    )


def test_a_gang_too_big_for_the_nodes_can_never_run(sb: SandboxHandle) -> None:
    assert _first_line(sb, "wide", says="can never run") == (
        "Job default/wide can never run on this cluster as it stands: 3 pods of 5 "
        "nvidia.com/gpu each are needed at once, the nodes hold at most 2 of them."
    )


def test_a_failed_job_names_its_pod_node_and_exit_code(sb: SandboxHandle) -> None:
    line = _first_line(sb, "crash", says="failed")
    assert line.startswith("Job default/crash failed: pod crash-w-0 on node node-"), line
    assert line.endswith("exited with code 3 (Error)."), line


def test_an_operators_gang_is_found_by_the_workloads_name(sb: SandboxHandle) -> None:
    """Issue 34.5: "job kf/pt-big not found" for a PyTorchJob's gang."""
    line = _first_line(sb, "pt-big", "-n", "kf", says="can never run")
    assert line.startswith("PyTorchJob kf/pt-big can never run on this cluster"), line
    listed = tephra(sb, "job", "list", "-n", "kf").splitlines()
    assert listed[0].split()[-1] == "Kind", listed
    assert listed[1].split()[0] == "pt-big" and listed[1].split()[-1] == "PyTorchJob", listed
    everywhere = tephra(sb, "job", "list", "-A").splitlines()
    kinds = {row.split()[1]: row.split()[-1] for row in everywhere[1:]}
    assert kinds["pt-big"] == "PyTorchJob" and kinds["big"] == "VCJob", everywhere
    assert not any(name.startswith("big-") for name in kinds)  # a VCJob's PodGroup is the VCJob
    names = tephra(sb, "job", "list", "-A", "-o", "name").split()
    assert "podgroup.scheduling.volcano.sh/pt-big" in names and "job.batch.volcano.sh/big" in names
    view = tephra(sb, "job", "view", "pt-big", "-n", "kf")
    assert "Kind: PyTorchJob" in view and "PodGroup: pt-big" in view, view
    assert "kind: PyTorchJob" in tephra(sb, "job", "view", "pt-big", "-n", "kf", "-o", "yaml")


def test_a_finished_operator_job_without_its_gang_says_how_it_ended(sb: SandboxHandle) -> None:
    """Issue 34.5: the training-operator deletes a finished job's PodGroup, and `job why` said
    "not found"; the workload itself says how it ended."""
    rest = RestClient(load_access(sb.kubeconfig_path))
    body = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pt-done"}}
    done = rest.create(PYTORCHJOBS, {**body, "spec": {}}, "kf")  # its CRD: the fixture's
    cond = {
        "type": "Succeeded",
        "status": "True",
        "lastTransitionTime": "2026-12-06T08:00:00Z",
        "reason": "PyTorchJobSucceeded",
        "message": "PyTorchJob kf/pt-done successfully completed.",
    }
    status = {"conditions": [{**cond, "type": "Running", "status": "False"}, cond]}
    path = PYTORCHJOBS.path(namespace="kf", name=done["metadata"]["name"]) + "/status"
    rest.request("PATCH", path, body={"status": status}, content_type=MERGE)
    lines = tephra(sb, "job", "why", "pt-done", "-n", "kf").splitlines()
    assert lines[0] == (
        "PyTorchJob kf/pt-done is Succeeded since 2026-12-06T08:00:00Z: PyTorchJob kf/pt-done "
        "successfully completed."
    ), lines
    res = CliRunner().invoke(
        main, ["job", "why", "nothing", "-n", "kf", "--kubeconfig", str(sb.kubeconfig_path)]
    )
    assert res.exit_code != 0 and "not found" in res.output
