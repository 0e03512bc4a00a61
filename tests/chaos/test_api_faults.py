"""Chaos: the controllers and the scheduler under API faults, with create/delete churn.

Every write of any client meets a 500 or a 429 with some probability and watches are cut every
two seconds while gangs are submitted, some deleted at once. Once the faults have done their
work: every kept job Completed, no orphan, no gang partly bound, and at no point a double bind
or an over-committed node.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from batch.controllers.runner import ControllerComponent
from batch.kube.service import SchedulerComponent, SchedulerOptions
from batch.sandbox.nodes import make_nodes
from batch.sandbox.options import FaultOptions
from batch.sandbox.testing import SandboxHandle, run_sandbox
from tests.kube.test_reliability import retry
from tests.waiting import wait_for

from .conftest import B, vcjob
from .invariants import Watchdog

pytestmark = pytest.mark.xdist_group("chaos")

JOBS = 8
FAULTS = FaultOptions(error_rate=0.1, throttle_rate=0.05, drop_watch_every=2.0, seed=30)


@pytest.fixture
def sb() -> Iterator[SandboxHandle]:
    with run_sandbox(
        nodes=make_nodes(count=2, cpu="4", memory="16Gi"),
        components=[
            ControllerComponent(),
            SchedulerComponent(SchedulerOptions(schedule_period=0.2)),
        ],
        faults=FAULTS,
        max_grace_seconds=0.2,
        ready_timeout=120,
    ) as handle:
        yield handle


def _open(co: Any, kept: list[str]) -> list[str]:
    items = retry(lambda: co.list_namespaced_custom_object(*B, "default", "jobs"))["items"]
    phase = {
        j["metadata"]["name"]: ((j.get("status") or {}).get("state") or {}).get("phase")
        for j in items
    }
    return [n for n in kept if phase.get(n) != "Completed"]


@pytest.mark.slow
def test_api_faults_with_churn(sb: SandboxHandle) -> None:
    dog = Watchdog(sb)
    co = client.CustomObjectsApi(sb.api_client())
    kept: list[str] = []
    for i in range(JOBS):
        name = f"f{i}"
        body = vcjob(name, cpu="1")
        retry(lambda body=body: co.create_namespaced_custom_object(*B, "default", "jobs", body))
        if i % 3 == 2:  # deleted while the controller may be creating its objects
            retry(lambda n=name: co.delete_namespaced_custom_object(*B, "default", "jobs", n))
        else:
            kept.append(name)
    wait_for(
        lambda: not _open(co, kept),
        "every kept job Completed",
        timeout=120,
        explain=lambda: _open(co, kept),
    )
    counts = wait_for(
        lambda: c if (c := dog.snapshot()).orphan_pods + c.orphan_podgroups == 0 else None,
        "no orphans",
        timeout=30,
        explain=lambda: dog.snapshot().details[-10:],
    )
    injected = sb.call(lambda: sb.sandbox.http.faults.injected)
    print(f"api faults: {injected} injected, {JOBS} jobs, {len(kept)} kept; {counts.report()}")
    assert injected > 0
    assert counts.double_binds == 0 and counts.over_commits == 0, counts.details
    assert counts.partial_gangs == 0 and counts.unfinished_jobs == 0, counts.details
