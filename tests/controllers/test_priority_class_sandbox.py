"""Issue 30.10, over HTTP against the sandbox with the controllers: a job naming a PriorityClass
that does not exist yet goes on soon after the class is created. The controller's list of
classes was renewed only every 30 s, and the job looked at again only every 30 s, so the job
stayed `PriorityClassNotFound` for up to 30 s after the class existed. Now a missing class is
read again every MISS_RELIST (5) seconds: the wait below allows four times that, and less
than the old 30 s.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from batch.controllers.priorities import MAX_AGE, MISS_RELIST
from batch.controllers.runner import ControllerComponent
from batch.sandbox.nodes import make_nodes
from batch.sandbox.testing import run_sandbox
from tests.waiting import wait_for

from .minisched import MiniScheduler

pytestmark = pytest.mark.xdist_group("controllers-sandbox")

B = ("batch.volcano.sh", "v1alpha1")
CLASS, VALUE = "created-late", 4242


@pytest.fixture(scope="module")
def api() -> Iterator[Any]:
    nodes = make_nodes(count=1, cpu="64", memory="256Gi")
    with run_sandbox(
        nodes=nodes, components=[ControllerComponent()], max_grace_seconds=0.5, ready_timeout=120
    ) as sb:
        sched = MiniScheduler(sb.api_client(), nodes=[n["metadata"]["name"] for n in nodes])
        sched.start()
        try:
            yield sb.api_client()
        finally:
            sched.stop()


def _job(name: str) -> dict[str, Any]:
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "10m"}}}
    template = {"spec": {"restartPolicy": "Never", "containers": [container]}}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "priorityClassName": CLASS,
            "tasks": [{"name": "w", "replicas": 2, "template": template}],
        },
    }


def test_a_priority_class_created_after_the_job_is_found_soon(api: Any) -> None:
    co, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    co.create_namespaced_custom_object(*B, "default", "jobs", _job("late"))

    def reason() -> str:
        job: Any = co.get_namespaced_custom_object(*B, "default", "jobs", "late")
        return str(((job.get("status") or {}).get("state") or {}).get("reason") or "")

    wait_for(lambda: reason() == "PriorityClassNotFound", "the job held for its missing class")
    pc: Any = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
               "metadata": {"name": CLASS}, "value": VALUE}  # fmt: skip
    client.SchedulingV1Api(api).create_priority_class(pc)

    def priorities() -> list[int | None]:
        found = core.list_namespaced_pod("default", label_selector="volcano.sh/job-name=late")
        return [p.spec.priority if p.spec else None for p in found.items]

    assert 4 * MISS_RELIST < MAX_AGE
    wait_for(
        lambda: priorities() == [VALUE, VALUE],
        "the job's pods, with the class's priority",
        timeout=4 * MISS_RELIST,
        explain=lambda: (priorities(), reason()),
    )
