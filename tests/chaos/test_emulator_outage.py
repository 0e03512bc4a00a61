"""Chaos: the API server unreachable for the node emulator longer than its write retries.

The controllers and the scheduler keep their connection; the emulated kubelets (the HTTP
emulator, as on a real cluster) lose theirs through a TCP forwarder cut while every pod is
Running, and stay cut until each pod's completion has failed and been kept. Once the server
answers again every job must complete (issue 30.9: 7 pods stayed Running for ever), with no
double bind, over-commit, orphan or partly bound gang.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from kubernetes import client

from batch.controllers.runner import ControllerComponent
from batch.kube.config import ClusterAccess
from batch.kube.service import SchedulerComponent, SchedulerOptions
from batch.sandbox.emulator_http import EmulatorThread
from batch.sandbox.options import SandboxOptions
from batch.sandbox.testing import SandboxHandle, run_sandbox
from tests.ledger.test_recorder import _Proxy
from tests.waiting import wait_for

from .conftest import B, vcjob
from .invariants import Watchdog

pytestmark = pytest.mark.xdist_group("chaos")

JOBS = 4
REPLICAS = 2


@pytest.fixture
def sb() -> Iterator[SandboxHandle]:
    with run_sandbox(
        components=[
            ControllerComponent(),
            SchedulerComponent(SchedulerOptions(schedule_period=0.2)),
        ],
        options=SandboxOptions(emulator=False, max_grace_seconds=0.2),
        ready_timeout=120,
    ) as handle:
        yield handle


def _phases(co: Any) -> list[str]:
    items = co.list_namespaced_custom_object(*B, "default", "jobs")["items"]
    return [((j.get("status") or {}).get("state") or {}).get("phase", "") for j in items]


@pytest.mark.slow
def test_pod_completions_survive_an_emulator_outage(sb: SandboxHandle) -> None:
    url = urlsplit(sb.url)
    proxy = _Proxy((str(url.hostname), int(url.port or 80)))
    proxy.start()
    emulator = EmulatorThread(
        ClusterAccess(f"http://127.0.0.1:{proxy.port}"),
        max_grace_seconds=0.2,
        heartbeat_seconds=1.0,
    )
    try:
        emulator.start()
        emulator.create_nodes(2, cpu="8", memory="32Gi")
        assert emulator.emulator is not None
        kubelets = emulator.emulator.kubelets
        dog = Watchdog(sb)
        co = client.CustomObjectsApi(sb.api_client())
        for i in range(JOBS):
            body = vcjob(f"o{i}", replicas=REPLICAS, run=1.0)
            co.create_namespaced_custom_object(*B, "default", "jobs", body)
        wait_for(lambda: _phases(co) == ["Running"] * JOBS, "every job Running", timeout=60)
        proxy.stop()
        kept = wait_for(
            lambda: n if (n := len(kubelets.unsynced)) >= JOBS * REPLICAS else None,
            "every completion failed and kept",
            timeout=60,
        )
        assert set(_phases(co)) == {"Running"}
        proxy.start()
        wait_for(
            lambda: _phases(co) == ["Completed"] * JOBS,
            "every job Completed after the outage",
            timeout=60,
            explain=lambda: _phases(co),
        )
        counts = dog.snapshot()
    finally:
        emulator.stop()
        proxy.stop()
    print(f"emulator outage: {kept} pod completions kept and synced; {counts.report()}")
    assert counts.double_binds == counts.over_commits == counts.partial_gangs == 0
    assert counts.orphan_pods == counts.orphan_podgroups == counts.unfinished_jobs == 0
