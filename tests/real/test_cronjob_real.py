"""The CronJob controller against a real kube-apiserver: the oracle for what the sandbox accepts.

The controllers run in this process (their CronJob clock injected and moved past minute
boundaries, as in tests/controllers/test_cronjob_integration.py). What only a real control plane
shows: the stored `status.active` keeps every ObjectReference field (the CRD's schema would
prune others), and deleting the CronJob makes kube-controller-manager's garbage collector delete
its Jobs through their controller ownerReference.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from batch.controllers.cronjob import job_name
from batch.controllers.runner import ControllerComponent
from batch.sandbox.control_plane import ControlPlane
from tests.real.conftest import Api

pytestmark = [pytest.mark.real, pytest.mark.xdist_group("real")]

NS = "default"
CRONJOBS = f"/apis/batch.volcano.sh/v1alpha1/namespaces/{NS}/cronjobs"
JOBS = f"/apis/batch.volcano.sh/v1alpha1/namespaces/{NS}/jobs"


class Clock:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._now = datetime.now(UTC)

    def __call__(self) -> datetime:
        with self._lock:
            return self._now

    def set(self, when: datetime) -> None:
        with self._lock:
            self._now = when


@pytest.fixture(scope="module")
def controllers(real: ControlPlane, crds: list[str]) -> Iterator[tuple[ControllerComponent, Clock]]:
    comp = ControllerComponent(workers=2)
    comp.start(kubeconfig=real.kubeconfig)
    try:
        assert comp.wait_ready(120), comp.failed
        assert comp.manager is not None
        clock = Clock()
        comp.manager.cronjobs.clock = clock
        yield comp, clock
    finally:
        comp.stop()


def wait(what: str, check: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    pytest.fail(f"{what} not within {timeout:.0f} s")


def cronjob_body(name: str, **spec: Any) -> dict[str, Any]:
    task = {
        "name": "w",
        "replicas": 1,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox"}],
            }
        },
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {
            "schedule": "* * * * *",
            "jobTemplate": {
                "metadata": {"labels": {"team": "a"}},
                "spec": {
                    "queue": "default",
                    "schedulerName": "volcano",
                    "minAvailable": 1,
                    "tasks": [task],
                },
            },
            **spec,
        },
    }


def children(api: Api, cronjob: str) -> list[str]:
    code, page = api.request("GET", JOBS)
    assert code == 200, page
    return sorted(
        j["metadata"]["name"]
        for j in page["items"]
        if any(o.get("name") == cronjob for o in j["metadata"].get("ownerReferences") or [])
    )


def test_replace_and_garbage_collection_on_a_real_apiserver(
    api: Api, controllers: tuple[ControllerComponent, Clock]
) -> None:
    _comp, clock = controllers
    code, created = api.request(
        "POST", CRONJOBS, cronjob_body("real-cron", concurrencyPolicy="Replace")
    )
    assert code == 201, created
    stamp = datetime.fromisoformat(created["metadata"]["creationTimestamp"])
    first = stamp.replace(second=0) + timedelta(minutes=1)

    def tick(when: datetime, n: int) -> None:
        clock.set(when)
        patch = json.dumps({"metadata": {"annotations": {"test/nudge": str(n)}}})
        api.kubectl(
            "-n", NS, "patch", "cronjobs.batch.volcano.sh", "real-cron", "--type=merge", "-p", patch
        )

    tick(first + timedelta(seconds=1), 1)
    name1 = job_name("real-cron", first)
    wait(f"job {name1}", lambda: children(api, "real-cron") == [name1])

    def active() -> list[dict[str, Any]]:
        code, cj = api.request("GET", f"{CRONJOBS}/real-cron")
        assert code == 200, cj
        return list((cj.get("status") or {}).get("active") or [])

    refs = wait("status.active", active)
    code, job = api.request("GET", f"{JOBS}/{name1}")
    assert code == 200, job
    assert refs == [
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "namespace": NS,
            "name": name1,
            "uid": job["metadata"]["uid"],
            "resourceVersion": refs[0]["resourceVersion"],
        }
    ], "the real apiserver kept every ObjectReference field"
    second = first + timedelta(minutes=1)
    tick(second + timedelta(seconds=1), 2)
    name2 = job_name("real-cron", second)
    wait("the running job replaced", lambda: children(api, "real-cron") == [name2])
    code, body = api.request("DELETE", f"{CRONJOBS}/real-cron")
    assert code == 200, body
    wait(
        "the garbage collector deleting the CronJob's Jobs", lambda: not children(api, "real-cron")
    )
