"""Adding a framework touches only its own package: a toy adapter, published through the
``tephra.integrations`` entry point of a distribution Tephra knows nothing about, has its
workload ganged (PodGroup), scheduled all-or-nothing, and recorded in the ledger."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from batch.api.integration import GROUP_NAME_ANNOTATION, TASK_SPEC_ANNOTATION, load_adapters
from batch.controllers.effects import CreateObject
from batch.controllers.podgroup import reconcile_adapter_pod
from batch.ledger.convert import events_from_job
from batch.ledger.events import JobObserved, JobPhaseChanged
from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.scheduler import Bind, apply_decisions, load_config, run_session
from batch.scheduler.config import TEPHRA_DEFAULT_CONFIG

TOY = """
from batch.api.integration import GangSpec, WorkloadKind, WorkloadObservation, WorkloadRef
from batch.api.integration import labels_of, pod_requests
from batch.api.timestamps import parse_time

KIND = WorkloadKind("toy.example/v1", "ToyJob", "toyjobs")


def _workers(job):
    return int((job.get("spec") or {}).get("workers") or 1)


def _pod_spec(job):
    return ((job.get("spec") or {}).get("template") or {}).get("spec") or {}


class ToyAdapter:
    name = "toy"
    kinds = (KIND,)

    def gang_for_workload(self, job):
        if not KIND.matches(job):
            return None
        meta = job["metadata"]
        ref = WorkloadRef(KIND.api_version, "ToyJob", meta["namespace"], meta["name"],
                          "toy-" + meta["name"], meta.get("uid"))
        n = _workers(job)
        return GangSpec(name=ref.gang_name, namespace=ref.namespace, min_member=n, workload=ref,
                        adapter=self.name, min_task_member={"worker": n},
                        min_resources=pod_requests(_pod_spec(job)).scale(n).to_list())

    def workload_ref_for_pod(self, pod):
        job = labels_of(pod).get("toy.example/job")
        if not job:
            return None
        ns = pod["metadata"]["namespace"]
        return WorkloadRef(KIND.api_version, "ToyJob", ns, job, "toy-" + job)

    def existing_podgroup_name(self, job):
        return None

    def role_of_pod(self, pod):
        return "worker" if self.workload_ref_for_pod(pod) else None

    def observe(self, job):
        if job.get("kind") != "ToyJob":
            return None
        n = _workers(job)
        status = job.get("status") or {}
        at = parse_time(status.get("since"))
        phases = [(status["phase"], at)] if status.get("phase") and at else []
        return WorkloadObservation(replicas={"worker": n},
                                   requests=dict(pod_requests(_pod_spec(job)).scale(n)),
                                   phases=phases)


TOY = ToyAdapter()
"""


@pytest.fixture
def toy_distribution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An installed distribution ``toy-tephra`` publishing ``toy = toy_tephra:TOY``."""
    (tmp_path / "toy_tephra.py").write_text(textwrap.dedent(TOY))
    info = tmp_path / "toy_tephra-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-tephra\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[tephra.integrations]\ntoy = toy_tephra:TOY\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("toy_tephra", None)


def _job() -> dict[str, Any]:
    container = {"name": "w", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}
    return {
        "apiVersion": "toy.example/v1",
        "kind": "ToyJob",
        "metadata": {
            "name": "t1",
            "namespace": "ns",
            "uid": "toy-uid",
            "creationTimestamp": "2026-12-01T10:00:00Z",
        },
        "spec": {"workers": 3, "template": {"spec": {"containers": [container]}}},
        "status": {"phase": "Running", "since": "2026-12-01T10:05:00Z"},
    }


def _pod(i: int, job: dict[str, Any]) -> dict[str, Any]:
    pod = f.pod(f"t1-{i}", namespace="ns", cpu="2")
    pod["metadata"].setdefault("labels", {})["toy.example/job"] = "t1"
    pod["spec"]["containers"] = job["spec"]["template"]["spec"]["containers"]
    return pod


def _binds(cache: ClusterCache, *, now: float) -> list[Bind]:
    """The binds of a few sessions (enqueue admits the gang, allocate places it)."""
    config = load_config(TEPHRA_DEFAULT_CONFIG)
    out: list[Bind] = []
    for i in range(3):
        decisions = run_session(cache, config, now=now + i)
        apply_decisions(cache, decisions)
        out += decisions.binds
    return out


def test_a_toy_adapter_is_ganged_scheduled_and_recorded(toy_distribution: Path) -> None:
    adapters = load_adapters()
    [toy] = [a for a in adapters if a.name == "toy"]
    job = _job()
    pods = [_pod(i, job) for i in range(3)]
    gang = toy.gang_for_workload(job)
    assert gang is not None
    result = reconcile_adapter_pod(
        pods[0], adapter=toy, gang=gang, podgroup=None, now=datetime.now(UTC), workload=job
    )
    [create] = [a for a in result.actions if isinstance(a, CreateObject)]
    podgroup = create.body
    assert podgroup["spec"]["minMember"] == 3
    assert podgroup["spec"]["minResources"] == {"cpu": "6", "memory": "3Gi"}

    cache = ClusterCache()
    cache.apply("Queue", "ADDED", f.queue("default"))
    for name in ("n1", "n2"):  # one worker per node: 2 of 3 fit, only the gang rule holds them
        cache.apply("Node", "ADDED", f.node(name, cpu="3"))
    podgroup["metadata"]["uid"] = "pg-uid"
    podgroup["metadata"]["creationTimestamp"] = "2026-12-01T10:00:00Z"
    cache.apply("PodGroup", "ADDED", podgroup)
    for pod in pods:  # as the controller's patch annotates each pod it sees
        annotations = pod["metadata"].setdefault("annotations", {})
        annotations[GROUP_NAME_ANNOTATION] = gang.name
        annotations[TASK_SPEC_ANNOTATION] = toy.role_of_pod(pod)
        cache.apply("Pod", "ADDED", pod)
    assert _binds(cache, now=100.0) == []
    cache.apply("Node", "ADDED", f.node("n3", cpu="3"))
    binds = _binds(cache, now=200.0)
    assert sorted(b.name for b in binds) == ["t1-0", "t1-1", "t1-2"]

    events = events_from_job(None, job, adapters=adapters)
    [observed] = [e for e in events if isinstance(e, JobObserved)]
    assert observed.kind == "ToyJob" and observed.replicas == {"worker": 3}
    assert (observed.requested_cpu_milli, observed.requested_memory_bytes) == (6000, 3 * 2**30)
    assert [e.to_phase for e in events if isinstance(e, JobPhaseChanged)] == ["Running"]
