"""Issue 30.5 over HTTP against the sandbox with the controllers: a VCJob with the svc plugin
whose ConfigMap `<job>-svc` and Service `<job>` already exist, made by someone else, leaves both
unchanged and fails, saying which object and why."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from batch.controllers.runner import ControllerComponent
from batch.sandbox.nodes import make_nodes
from batch.sandbox.testing import run_sandbox
from tests.waiting import wait_for

pytestmark = pytest.mark.xdist_group("controllers-sandbox")

B = ("batch.volcano.sh", "v1alpha1")
FOREIGN = {"owner": "someone else", "worker.host": "not-a-job-host"}


@pytest.fixture(scope="module")
def api() -> Iterator[Any]:
    nodes = make_nodes(count=1, cpu="8", memory="16Gi")
    with run_sandbox(
        nodes=nodes, components=[ControllerComponent()], max_grace_seconds=0.5, ready_timeout=120
    ) as sb:
        yield sb.api_client()


def _job(name: str) -> dict[str, Any]:
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "10m"}}}
    template = {"spec": {"restartPolicy": "Never", "containers": [container]}}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "plugins": {"svc": []},
            "tasks": [{"name": "worker", "replicas": 2, "template": template}],
        },
    }


def test_foreign_svc_objects_are_left_alone_and_the_job_says_why(api: Any) -> None:
    co, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    cm: Any = {"metadata": {"name": "taken-svc"}, "data": dict(FOREIGN)}
    core.create_namespaced_config_map("default", cm)
    svc: Any = {"metadata": {"name": "taken"},
                "spec": {"selector": {"app": "theirs"}, "ports": [{"port": 80}]}}  # fmt: skip
    core.create_namespaced_service("default", svc)
    co.create_namespaced_custom_object(*B, "default", "jobs", _job("taken"))

    def state() -> dict[str, Any]:
        job: Any = co.get_namespaced_custom_object(*B, "default", "jobs", "taken")
        return dict((job.get("status") or {}).get("state") or {})

    wait_for(lambda: state().get("phase") == "Failed", "the job failed", explain=state)
    assert state()["reason"] == "PluginObjectNotOwned"
    assert "is not owned by job taken" in state()["message"]
    got_cm = core.read_namespaced_config_map("taken-svc", "default")
    assert got_cm.data == FOREIGN and not got_cm.metadata.owner_references
    got_svc = core.read_namespaced_service("taken", "default")
    assert got_svc.spec.selector == {"app": "theirs"} and not got_svc.metadata.owner_references
    assert not core.list_namespaced_pod("default", label_selector="volcano.sh/job-name=taken").items
    events = core.list_namespaced_event("default", field_selector="involvedObject.name=taken")
    assert any(e.reason == "PluginObjectNotOwned" and e.type == "Warning" for e in events.items)
