"""Migrating from Volcano, as docs/deploy.md ("Migrating from Volcano") says, on a real
kube-apiserver (issue 34, item 3).

A control plane of its own runs Volcano v1.10's vc-controller-manager and vc-scheduler on
Volcano's CRDs with the Helm default scheduler configuration, and jobs in flight: one running,
one admitted and waiting for room (its pods made, unbound), one Pending in a second queue.
Volcano is stopped; `tephra controller` and `tephra scheduler` start on the same cluster, CRDs
and configuration. Every job must complete, the running one without being restarted, the
queues keep their weights, no pod is made twice and no job is lost.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from batch.sandbox.control_plane import control_plane
from batch.scheduler.config import HELM_DEFAULT_CONFIG
from tests.real.conftest import Api, kube_bin, oracle_bin, tephra_process
from tests.real.kubelets import emulated
from tests.real.test_differential_real import _volcano
from tests.real.test_e2e_real import NS, SCHED, VCJOBS, Stack, _controller_args, _job, _wait_open
from tests.real.test_volcano_crds_real import _scheduler_args

pytestmark = [pytest.mark.real, pytest.mark.xdist_group("real")]

# Four 16-cpu nodes. RUNNING takes one 10-cpu pod per node; WAITING (2 x 10 cpu) is admitted by
# Volcano's enqueue (overcommit 1.2: 76.8 cpu of room) but cannot bind; QUEUED (2 x 10 cpu, in
# SECOND) is beyond the overcommit budget and stays Pending.
SECOND = "migrate-second"
WEIGHTS = {"default": 1, SECOND: 3}
RUNNING, WAITING, QUEUED = "mig-running", "mig-waiting", "mig-queued"
JOBS = {
    RUNNING: _job(RUNNING, replicas=4, min_available=4, cpu="10", run_seconds=25),
    WAITING: _job(WAITING, replicas=2, min_available=2, cpu="10", run_seconds=1),
    QUEUED: _job(QUEUED, replicas=2, min_available=2, cpu="10", queue=SECOND, run_seconds=1),
}


@pytest.fixture(scope="module")
def volcano(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, ExitStack, Path]]:
    """Volcano running on a control plane of its own, with Volcano's CRDs and the jobs in
    flight; yields the stack, the ExitStack that owns every process and the conf."""
    oracle_bin("volcano")  # skips before any control plane starts when it cannot be built
    tmp = tmp_path_factory.mktemp("migration")
    conf = tmp / "scheduler.conf"
    conf.write_text(HELM_DEFAULT_CONFIG)
    with ExitStack() as stack:
        plane = stack.enter_context(control_plane(kube_bin(), tmp / "plane"))
        stack.enter_context(emulated("migration", plane.server, plane.ssl_context()))
        vc = _volcano(stack, Api(plane), tmp, conf)
        _wait_open(vc, "default")
        _assert_weight(vc, "default", WEIGHTS["default"])
        queue = {"metadata": {"name": SECOND}, "spec": {"weight": WEIGHTS[SECOND]}}
        vc.create(
            f"{SCHED}/queues",
            {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", **queue},
        )
        _wait_open(vc, SECOND)
        yield vc, stack, conf


def _assert_weight(stack: Stack, queue: str, weight: int) -> None:
    found = stack.get(f"{SCHED}/queues/{queue}") or {}
    assert found.get("spec", {}).get("weight") == weight, found


def _podgroup_phase(stack: Stack, job: str) -> str:
    items = (stack.get(f"{SCHED}/namespaces/{NS}/podgroups") or {}).get("items") or []
    uid = (stack.job(job) or {}).get("metadata", {}).get("uid")
    for pg in items:
        if any(o.get("uid") == uid for o in pg["metadata"].get("ownerReferences") or []):
            return str((pg.get("status") or {}).get("phase") or "")
    return ""


def _in_flight(vc: Stack) -> None:
    """The three jobs submitted under Volcano and settled as the module's docstring says."""
    vc.create(f"{VCJOBS}/namespaces/{NS}/jobs", JOBS[RUNNING])
    vc.wait(
        f"{RUNNING} Running", lambda: vc.phase(RUNNING) == "Running" and len(vc.bound(RUNNING)) == 4
    )
    vc.create(f"{VCJOBS}/namespaces/{NS}/jobs", JOBS[WAITING])
    vc.wait(f"{WAITING}'s pods made", lambda: len(vc.pods(WAITING)) == 2)
    vc.create(f"{VCJOBS}/namespaces/{NS}/jobs", JOBS[QUEUED])
    vc.wait(f"{QUEUED}'s PodGroup Pending", lambda: _podgroup_phase(vc, QUEUED) == "Pending")
    assert not vc.bound(WAITING) and not vc.pods(QUEUED)
    assert vc.phase(RUNNING) == "Running", "the running job ended before Volcano was stopped"


def _all_pods(stack: Stack) -> dict[str, set[str]]:
    return {job: stack.uids(job) for job in JOBS}


def test_jobs_in_flight_go_on_when_tephra_replaces_volcano(
    volcano: tuple[Stack, ExitStack, Path],
) -> None:
    vc, processes, conf = volcano
    _in_flight(vc)
    before = _all_pods(vc)
    for process in (vc.controller, *vc.schedulers):  # step 2: stop Volcano's components
        process.stop()
    kubeconfig = str(vc.api.plane.kubeconfig)
    tmp = conf.parent
    controller = processes.enter_context(
        tephra_process(tmp / "controller.log", *_controller_args(kubeconfig))
    )
    scheduler = processes.enter_context(
        tephra_process(tmp / "scheduler.log", *_scheduler_args(kubeconfig, str(conf)))
    )
    tephra = Stack(vc.api, controller, [scheduler])
    seen: dict[str, set[str]] = {job: set(uids) for job, uids in before.items()}

    def completed() -> bool:
        for job, uids in _all_pods(tephra).items():
            seen[job] |= uids
        return all(tephra.phase(job) == "Completed" for job in JOBS)

    tephra.wait("every job Completed", completed, timeout=120)
    assert seen[RUNNING] == before[RUNNING], "the running job's pods were made again"
    assert before[WAITING] <= seen[WAITING]
    for job, spec in JOBS.items():
        replicas = spec["spec"]["tasks"][0]["replicas"]
        assert len(seen[job]) == replicas, (job, seen[job])
        status: dict[str, Any] = (tephra.job(job) or {})["status"]
        assert status["succeeded"] == replicas, (job, status)
    for queue, weight in WEIGHTS.items():
        _assert_weight(tephra, queue, weight)
