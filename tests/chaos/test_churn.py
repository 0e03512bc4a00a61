"""Chaos: VCJobs created and deleted fast, with the controllers and the scheduler running.

Some jobs are deleted right after their creation, some while the controller is creating their
PodGroup or pods, some once a pod exists, and some are left to run. Objects the controller
creates for a job it has not yet seen deleted must not outlive it (issue 30, item 7: 98
PodGroups Inqueue and Pending pods of deleted jobs were left after 2,000 jobs and counted
against their queues). Once the churn stops: no orphan PodGroup or pod, every kept job final,
and at no point a double bind or an over-committed node.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from batch.controllers.runner import ControllerComponent
from batch.kube.service import SchedulerComponent, SchedulerOptions
from batch.sandbox.nodes import make_nodes
from batch.sandbox.testing import SandboxHandle, run_sandbox
from tests.waiting import wait_for

from .conftest import B, vcjob
from .invariants import Watchdog

pytestmark = pytest.mark.xdist_group("chaos")

JOBS_PER_THREAD = 40


@pytest.fixture
def sb() -> Iterator[SandboxHandle]:
    with run_sandbox(
        nodes=make_nodes(count=2, cpu="8", memory="32Gi"),
        components=[
            ControllerComponent(),
            SchedulerComponent(SchedulerOptions(schedule_period=0.2)),
        ],
        max_grace_seconds=0.2,
        ready_timeout=120,
    ) as handle:
        yield handle


def _delete(co: Any, name: str) -> None:
    try:
        co.delete_namespaced_custom_object(*B, "default", "jobs", name)
    except ApiException as exc:
        if exc.status != 404:
            raise


def _churn(sb: SandboxHandle, seed: int, kept: list[str]) -> None:
    api = sb.api_client()
    co, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    rng = random.Random(seed)
    for i in range(JOBS_PER_THREAD):
        name = f"churn-{seed}-{i}"
        co.create_namespaced_custom_object(*B, "default", "jobs", vcjob(name))
        kind = i % 4
        if kind == 1:  # while the controller initialises it or creates its PodGroup/pods
            time.sleep(rng.uniform(0.0, 0.3))
        elif kind == 2:  # once the controller has created a pod
            sel = f"volcano.sh/job-name={name}"
            deadline = time.monotonic() + 3
            while (
                time.monotonic() < deadline
                and not core.list_namespaced_pod("default", label_selector=sel).items
            ):
                time.sleep(0.02)
        elif kind == 3:
            kept.append(name)
            continue
        _delete(co, name)
    api.close()


@pytest.mark.slow
def test_create_delete_churn_leaves_no_orphans(sb: SandboxHandle) -> None:
    dog = Watchdog(sb)
    kept: list[str] = []
    threads = [threading.Thread(target=_churn, args=(sb, s, kept)) for s in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    at_stop = dog.snapshot()
    print(f"churn: {2 * JOBS_PER_THREAD} jobs, {len(kept)} kept; at stop: {at_stop.report()}")
    counts = wait_for(
        lambda: (
            c
            if (c := dog.snapshot()).orphan_pods + c.orphan_podgroups + c.unfinished_jobs == 0
            else None
        ),
        "no orphans and every kept job final",
        timeout=90,
        explain=lambda: dog.snapshot().details[-20:],
    )
    print(f"churn settled: {counts.report()}")
    assert counts.double_binds == 0 and counts.over_commits == 0, counts.details
    assert counts.partial_gangs == 0, counts.details
    assert counts.binds >= 3 * len(kept)
