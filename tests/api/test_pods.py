"""A pod's effective requests: one rule (batch.api.pods) that every layer counts by."""

from __future__ import annotations

from typing import Any

import pytest

from batch.api.jobview import job_view
from batch.api.pods import PodResourceError, pod_limits, pod_requests, running_requests
from batch.api.resources import CPU, MEMORY, format_resource_list, parse_resource_list
from batch.controllers.jobspec import min_resources
from batch.controllers.podgroup import build_plain_podgroup
from batch.ledger.convert import events_from_pod
from batch.ledger.events import PodAttempt
from batch.model.parse import PodFacts


def _c(name: str, cpu: str, memory: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "resources": {"requests": {"cpu": cpu, "memory": memory}}, **extra}


#: app 1 cpu/1Gi + sidecar 500m/256Mi + overhead 250m/128Mi -> 1750m/1408Mi while running;
#: the plain init container (2 cpu beside no sidecar yet) peaks cpu at 2 -> 2250m with overhead.
SIDECAR_SPEC: dict[str, Any] = {
    "containers": [_c("main", "1", "1Gi")],
    "initContainers": [
        _c("setup", "2", "64Mi"),
        _c("proxy", "500m", "256Mi", restartPolicy="Always"),
    ],
    "overhead": {"cpu": "250m", "memory": "128Mi"},
}
WANT = {CPU: 2250, MEMORY: (1024 + 256 + 128) * 2**20}


def test_pod_requests_counts_sidecars_init_peak_and_overhead() -> None:
    assert pod_requests(SIDECAR_SPEC) == WANT
    assert running_requests(SIDECAR_SPEC) == {CPU: 1750, MEMORY: WANT[MEMORY]}


def test_init_step_includes_the_sidecars_started_before_it() -> None:
    spec = {
        "containers": [_c("main", "100m", "1Mi")],
        "initContainers": [
            _c("proxy", "1", "1Mi", restartPolicy="Always"),
            _c("migrate", "2", "1Mi"),
        ],
    }
    assert pod_requests(spec)[CPU] == 3000  # migrate runs beside the proxy
    assert running_requests(spec)[CPU] == 1100


def test_limits_stand_in_for_missing_requests_and_limits_follow_the_same_rule() -> None:
    spec = {
        "containers": [{"name": "a", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}],
        "initContainers": [{"name": "i", "resources": {"limits": {"cpu": "3"}}}],
        "overhead": {"cpu": "100m", "memory": "1Mi", "pods": "1"},
    }
    assert pod_requests(spec) == {CPU: 3100, MEMORY: 2**30 + 2**20, "pods": 1}
    assert pod_limits(spec) == {CPU: 3100, MEMORY: 2**30 + 2**20}  # no limit on pods


def test_a_bad_quantity_names_the_container() -> None:
    spec = {"containers": [_c("main", "lots", "1Gi")]}
    with pytest.raises(PodResourceError, match=r"^container main: resources: cpu"):
        pod_requests(spec)
    assert pod_requests({}) == {} == pod_requests(None)


def _pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
        "spec": SIDECAR_SPEC,
        "status": {"phase": "Pending"},
    }


def test_scheduler_podgroup_and_ledger_agree_on_a_sidecar_pod() -> None:
    facts = PodFacts(_pod())
    assert facts.init_req == WANT  # what must fit on the node
    assert facts.req == running_requests(SIDECAR_SPEC)  # what the running pod holds
    group = build_plain_podgroup(_pod(), None)
    assert parse_resource_list(group["spec"]["minResources"]) == WANT
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {"tasks": [{"name": "t", "replicas": 2, "template": {"spec": SIDECAR_SPEC}}]},
    }
    vc_min = min_resources(job_view(job))
    doubled = {k: 2 * v for k, v in WANT.items()}
    assert vc_min["requests.cpu"] == format_resource_list(doubled)[CPU]
    assert vc_min["memory"] == format_resource_list(doubled)[MEMORY]
    [attempt] = events_from_pod(None, _pod())
    assert isinstance(attempt, PodAttempt)
    assert (attempt.cpu_milli, attempt.memory_bytes) == (WANT[CPU], WANT[MEMORY])
