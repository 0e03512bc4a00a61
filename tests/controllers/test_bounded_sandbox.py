"""Bounded work end to end (issue 19, item 1), over HTTP against the sandbox with the controllers.

The sandbox runs with small configured limits and pod batch: a job over the limits is refused
(422, the field and the limit named) while the process's RSS stays flat, and a job of three
batches still gets every pod.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from batch.api.admission import AdmissionLimits
from batch.controllers.runner import ControllerComponent
from batch.sandbox.nodes import make_nodes
from batch.sandbox.options import SandboxOptions
from batch.sandbox.testing import run_sandbox
from tests.waiting import wait_for

from .minisched import MiniScheduler

pytestmark = pytest.mark.xdist_group("controllers-sandbox")

LIMITS = AdmissionLimits(pods_per_job=40, replicas_per_task=30)
BATCH = 4
B = ("batch.volcano.sh", "v1alpha1")


@pytest.fixture(scope="module")
def api() -> Iterator[Any]:
    nodes = make_nodes(count=2, cpu="64", memory="256Gi")
    options = SandboxOptions(admission_limits=LIMITS, pod_batch=BATCH)
    comp = ControllerComponent(options)
    with run_sandbox(
        nodes=nodes, components=[comp], options=options, max_grace_seconds=0.5, ready_timeout=120
    ) as sb:
        sched = MiniScheduler(sb.api_client(), nodes=[n["metadata"]["name"] for n in nodes])
        sched.start()
        try:
            yield sb.api_client()
        finally:
            sched.stop()


def _job(name: str, replicas: int) -> dict[str, Any]:
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "10m"}}}
    template = {"spec": {"restartPolicy": "Never", "containers": [container]}}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"tasks": [{"name": "w", "replicas": replicas, "template": template}]},
    }


def _create(api: Any, body: dict[str, Any]) -> Any:
    return client.CustomObjectsApi(api).create_namespaced_custom_object(*B, "default", "jobs", body)


def _refusal(api: Any, body: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(client.ApiException) as info:
        _create(api, body)
    assert info.value.status == 422, info.value.body
    refused: dict[str, Any] = json.loads(info.value.body)
    return refused


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def test_a_job_of_three_batches_gets_every_pod(api: Any) -> None:
    _create(api, _job("batches", 3 * BATCH))
    core = client.CoreV1Api(api)

    def pods() -> list[str]:
        found = core.list_namespaced_pod("default", label_selector="volcano.sh/job-name=batches")
        return sorted(p.metadata.name for p in found.items)

    wait_for(lambda: len(pods()) == 3 * BATCH, "every pod of the job", explain=pods)
    assert pods() == sorted(f"batches-w-{i}" for i in range(3 * BATCH))


def test_the_configured_limit_is_refused_naming_the_field(api: Any) -> None:
    refused = _refusal(api, _job("over", LIMITS.replicas_per_task + 1))
    causes = {c["field"]: c["message"] for c in refused["details"]["causes"]}
    assert "limit of 30 pods per task" in causes["spec.tasks[0].replicas"]
    assert "limit of 30 pods per task" in refused["message"]


def test_rss_stays_flat_while_a_hundred_million_replicas_are_refused(api: Any) -> None:
    before = _rss_mib()
    refused = _refusal(api, _job("huge", 100_000_000))
    assert "replicas 100000000" in refused["message"]
    time.sleep(2)  # anything the controllers would do about it, they would do now
    after = _rss_mib()
    print(f"RSS {before:.1f} MiB before, {after:.1f} MiB 2 s after the refusal")
    assert after - before < 64, f"RSS grew from {before:.1f} to {after:.1f} MiB"
