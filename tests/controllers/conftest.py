"""Fixtures for the controller tests: a memory cluster, a virtual clock and job factories."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from batch.controllers.memory import MemoryCluster


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def tick(self, seconds: float = 1.0) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


def make_job(
    name: str = "job",
    *,
    tasks: list[dict[str, Any]] | None = None,
    min_available: int | None = None,
    **spec: Any,
) -> dict[str, Any]:
    tasks = tasks if tasks is not None else [task("worker", 2)]
    body: dict[str, Any] = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"queue": "default", "schedulerName": "volcano", "tasks": tasks, **spec},
    }
    if min_available is not None:
        body["spec"]["minAvailable"] = min_available
    return body


def task(name: str, replicas: int, *, cpu: str = "1", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "containers": [
                    {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
                ],
                "restartPolicy": "Never",
            }
        },
        **copy.deepcopy(extra),
    }


class Harness:
    """A memory cluster with one job and helpers to play scheduler and kubelet."""

    def __init__(self, job: dict[str, Any], *, graceful: bool = False) -> None:
        self.clock = Clock()
        self.cluster = MemoryCluster(graceful=graceful)
        self.cluster.now = self.clock.now
        self.job = self.cluster.add(job)
        self.ns = "ns"
        self.name = job["metadata"]["name"]

    def step(self, seconds: float = 0.0) -> Any:
        if seconds:
            self.clock.tick(seconds)
        return self.cluster.step_job(self.ns, self.name, now=self.clock.now)

    @property
    def phase(self) -> str:
        return self.cluster.job_phase(self.ns, self.name)

    @property
    def status(self) -> dict[str, Any]:
        job = self.cluster.get("Job", self.ns, self.name) or {}
        return dict(job.get("status") or {})

    def pods(self) -> list[dict[str, Any]]:
        job = self.cluster.get("Job", self.ns, self.name)
        return self.cluster.job_pods(job) if job else []

    def pod_names(self) -> list[str]:
        return sorted(p["metadata"]["name"] for p in self.pods())

    def podgroup(self) -> dict[str, Any] | None:
        return self.cluster.job_podgroup(self.job)

    def admit(self, phase: str = "Inqueue") -> None:
        """Play the scheduler: move the PodGroup to `phase`, then reconcile."""
        self.cluster.set_podgroup_phase(self.job, phase)
        self.step()

    def run_all(self) -> None:
        self.cluster.set_job_pods(self.job, "Running")
        self.step()

    def pod(self, name: str, phase: str, **kw: Any) -> None:
        self.cluster.set_pod_phase(self.ns, name, phase, **kw)

    def start(self) -> None:
        """Create, admit, run every pod."""
        self.step()
        self.admit()
        self.run_all()


@pytest.fixture
def harness() -> Any:
    return Harness
