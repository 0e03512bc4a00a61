"""Job.spec.runningEstimate reaches the PodGroup, where the reservation plugin reads it."""

from __future__ import annotations

from batch.api.jobview import job_view
from batch.controllers.jobspec import build_podgroup
from batch.scheduler.plugins.minruntime import parse_duration


def _job(estimate: str | None) -> dict[str, object]:
    spec: dict[str, object] = {
        "minAvailable": 1,
        "tasks": [{"name": "t", "replicas": 1, "template": {"spec": {"containers": []}}}],
    }
    if estimate is not None:
        spec["runningEstimate"] = estimate
    return {"metadata": {"name": "j", "namespace": "ns", "uid": "u1"}, "spec": spec}


def test_running_estimate_is_copied_to_the_podgroup() -> None:
    pg = build_podgroup(job_view(_job("1h30m0s")), version=0)
    value = pg["metadata"]["annotations"]["tephra.io/running-estimate"]
    assert value == "1h30m0s"
    assert parse_duration(value) == 5400


def test_no_estimate_no_annotation() -> None:
    pg = build_podgroup(job_view(_job(None)), version=0)
    assert "tephra.io/running-estimate" not in pg["metadata"]["annotations"]
