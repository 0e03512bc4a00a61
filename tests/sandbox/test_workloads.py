"""Contract: built-in workload controllers create pods the way kube-controller-manager does."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from batch.sandbox.testing import SandboxHandle
from tests.waiting import wait_for

from .helpers import bind, http


def _template(app: str, **ann: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": app}, "annotations": dict(ann)},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "c", "image": "busybox:1", "resources": {"requests": {"cpu": "10m"}}}
            ],
        },
    }


def _pods(v1: Any, selector: str) -> list[Any]:
    items = v1.list_namespaced_pod("default", label_selector=selector).items
    return [p for p in items if p.metadata.deletion_timestamp is None]


def test_deployment_scale_up_and_down(sb: SandboxHandle, api: Any) -> None:
    apps, v1 = client.AppsV1Api(api), client.CoreV1Api(api)
    tmpl = _template("web")
    tmpl["spec"]["restartPolicy"] = "Always"
    apps.create_namespaced_deployment(
        "default",
        {
            "metadata": {"name": "web"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": tmpl},
        },
    )
    wait_for(lambda: len(_pods(v1, "app=web")) == 3)
    rs = apps.list_namespaced_replica_set("default", label_selector="app=web").items
    assert len(rs) == 1 and rs[0].metadata.owner_references[0].kind == "Deployment"
    pods = _pods(v1, "app=web")
    assert all(p.metadata.owner_references[0].name == rs[0].metadata.name for p in pods)
    for p in pods:  # play the scheduler
        bind(sb.url, "default", p.metadata.name, "node-0")
    wait_for(
        lambda: (apps.read_namespaced_deployment("web", "default").status.ready_replicas or 0) == 3
    )
    apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 5}})
    wait_for(lambda: len(_pods(v1, "app=web")) == 5)
    apps.patch_namespaced_deployment("web", "default", {"spec": {"replicas": 1}})
    wait_for(lambda: len(_pods(v1, "app=web")) == 1)
    apps.delete_namespaced_deployment("web", "default")
    wait_for(
        lambda: not apps.list_namespaced_replica_set("default", label_selector="app=web").items
    )
    wait_for(lambda: not v1.list_namespaced_pod("default", label_selector="app=web").items)


def test_job_runs_to_completion(sb: SandboxHandle, api: Any) -> None:
    batch_api, v1 = client.BatchV1Api(api), client.CoreV1Api(api)
    batch_api.create_namespaced_job(
        "default",
        {
            "metadata": {"name": "count"},
            "spec": {
                "completions": 3,
                "parallelism": 2,
                "template": _template("count", **{"sandbox.tephra.io/run-seconds": "0.1"}),
            },
        },
    )
    bound: set[str] = set()

    def schedule_and_check() -> bool:
        for p in v1.list_namespaced_pod("default", label_selector="app=count").items:
            if not p.spec.node_name and p.metadata.name not in bound:
                bind(sb.url, "default", p.metadata.name, "node-1")
                bound.add(p.metadata.name)
        job = batch_api.read_namespaced_job("count", "default")
        return any(
            c.type == "Complete" and c.status == "True" for c in (job.status.conditions or [])
        )

    wait_for(schedule_and_check, timeout=15)
    job = batch_api.read_namespaced_job("count", "default")
    assert job.status.succeeded == 3 and job.status.completion_time is not None
    assert len(bound) == 3
    assert (job.spec.template.metadata.labels["batch.kubernetes.io/job-name"]) == "count"


def test_job_backoff_limit(sb: SandboxHandle, api: Any) -> None:
    batch_api, v1 = client.BatchV1Api(api), client.CoreV1Api(api)
    batch_api.create_namespaced_job(
        "default",
        {
            "metadata": {"name": "flaky"},
            "spec": {
                "backoffLimit": 1,
                "template": _template(
                    "flaky",
                    **{"sandbox.tephra.io/run-seconds": "0.05", "sandbox.tephra.io/exit-code": "2"},
                ),
            },
        },
    )

    def schedule_and_check() -> bool:
        for p in v1.list_namespaced_pod("default", label_selector="app=flaky").items:
            if not p.spec.node_name:
                bind(sb.url, "default", p.metadata.name, "node-1")
        job = batch_api.read_namespaced_job("flaky", "default")
        return any(c.type == "Failed" and c.status == "True" for c in (job.status.conditions or []))

    wait_for(schedule_and_check, timeout=15)
    job = batch_api.read_namespaced_job("flaky", "default")
    assert job.status.failed == 2
    failed = next(c for c in job.status.conditions if c.type == "Failed")
    assert failed.reason == "BackoffLimitExceeded"


def test_statefulset_and_replication_controller(sb: SandboxHandle, api: Any) -> None:
    apps, v1 = client.AppsV1Api(api), client.CoreV1Api(api)
    tmpl = _template("db")
    tmpl["spec"]["restartPolicy"] = "Always"
    apps.create_namespaced_stateful_set(
        "default",
        {
            "metadata": {"name": "db"},
            "spec": {
                "replicas": 2,
                "serviceName": "db",
                "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": {"app": "db"}},
                "template": tmpl,
            },
        },
    )
    wait_for(lambda: sorted(p.metadata.name for p in _pods(v1, "app=db")) == ["db-0", "db-1"])
    rc_tmpl = _template("rc")
    rc_tmpl["spec"]["restartPolicy"] = "Always"
    code, _ = http(
        sb.url,
        "POST",
        "/api/v1/namespaces/default/replicationcontrollers",
        {
            "metadata": {"name": "rc"},
            "spec": {"replicas": 2, "selector": {"app": "rc"}, "template": rc_tmpl},
        },
    )
    assert code == 201
    wait_for(lambda: len(_pods(v1, "app=rc")) == 2)
