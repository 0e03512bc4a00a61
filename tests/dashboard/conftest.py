"""A live sandbox (controllers, scheduler, SQLite ledger) with the dashboard served beside it.

Two nodes of 4 GPUs and 16 cpu, one per rack (rack-0, rack-1); queues team-a (weight 2) and
team-b (weight 1) under root. The dashboard reads the sandbox over HTTP (watches) and the
ledger the components write.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("batch.sandbox.testing")

from kubernetes import client

from batch.controllers.runner import ControllerComponent
from batch.dashboard.history import History
from batch.dashboard.server import Dashboard, DashboardThread
from batch.kube.config import load_access
from batch.kube.service import SchedulerComponent, SchedulerOptions
from batch.ledger.db import make_engine
from batch.sandbox.components import Component
from batch.sandbox.nodes import make_nodes
from batch.sandbox.testing import SandboxHandle, run_sandbox
from tests.controllers.test_integration import B, vcjob
from tests.ledger.conftest import (  # noqa: F401  (fixtures: SQLite and PostgreSQL ledgers)
    backend,
    engine,
    ledger_url,
    pg_session_url,
    sqlite_template,
)

SCHED = ("scheduling.volcano.sh", "v1beta1")


def gpu_job(name: str, *, replicas: int, gpus: int, run: float, queue: str) -> dict[str, Any]:
    """A VCJob of `replicas` pods asking `gpus` GPUs each, running `run` seconds, in `queue`."""
    body = vcjob(name, replicas=replicas, run=run, queue=queue, minAvailable=replicas)
    container = body["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    container["resources"] = {
        "requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)},
        "limits": {"nvidia.com/gpu": str(gpus)},
    }
    return body


def queue(name: str, weight: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": weight, "reclaimable": True},
    }


@dataclass
class Live:
    sb: SandboxHandle
    url: str
    db_url: str
    co: Any

    def get(self, path: str, **headers: str) -> tuple[int, bytes]:
        req = urllib.request.Request(self.url + path, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def api(self, path: str) -> Any:
        status, body = self.get("/api" + path)
        assert status == 200, (path, status, body[:300])
        return json.loads(body)

    def job(self, name: str) -> dict[str, Any]:
        """The job page's model; {} while the dashboard's watch has not brought the job yet."""
        status, body = self.get(f"/api/jobs/default/{name}")
        if status == 404:
            return {}
        assert status == 200, (name, status, body[:300])
        return dict(json.loads(body))

    def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self.co.create_namespaced_custom_object(*B, "default", "jobs", body))


@pytest.fixture(scope="package")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    tmp: Path = tmp_path_factory.mktemp("dashboard")
    db_url = f"sqlite:///{tmp / 'ledger.db'}"
    components: list[Component] = [
        ControllerComponent(db_url=db_url),
        SchedulerComponent(SchedulerOptions(schedule_period=0.2, db_url=db_url)),
    ]
    nodes = make_nodes(count=2, gpus=4, cpu="16", memory="64Gi", racks=2)
    with run_sandbox(
        nodes=nodes, components=components, max_grace_seconds=0.3, ready_timeout=120
    ) as sb:
        sb.apply(queue("team-a", 2), queue("team-b", 1))
        engine = make_engine(db_url)
        dash = Dashboard(load_access(sb.kubeconfig_path), History(engine, ttl=0.5))
        server = DashboardThread(dash).start()
        try:
            yield Live(sb, server.url, db_url, client.CustomObjectsApi(sb.api_client()))
        finally:
            server.stop()
            engine.dispose()
