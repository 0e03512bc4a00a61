"""The scheduler exports how many jobs it left pending per reason (`tephra_pending_jobs`), for
the dashboard's "why are jobs pending" panel: the structured reasons of the session."""

from __future__ import annotations

from batch.kube.config import ClusterAccess
from batch.kube.service import SchedulerOptions, SchedulerService
from batch.scheduler.framework.decisions import Decisions, PendingReason


def _pending(kinds: list[str]) -> Decisions:
    decisions = Decisions(session_uid="s")
    for i, kind in enumerate(kinds):
        decisions.pending_reasons[f"ns/j{i}"] = PendingReason(f"ns/j{i}", kind, "why")
    return decisions


def test_pending_jobs_per_reason() -> None:
    service = SchedulerService(SchedulerOptions(), access=ClusterAccess(server="http://x"))
    service.gauges.export(_pending(["Unschedulable", "Unschedulable", "QueueOverused"]))
    text = service.metrics.render().decode()
    assert 'tephra_pending_jobs{reason="Unschedulable"} 2.0' in text
    assert 'tephra_pending_jobs{reason="QueueOverused"} 1.0' in text
    service.gauges.export(_pending(["GangShort"]))  # a reason gone reads 0, not its old count
    text = service.metrics.render().decode()
    assert 'tephra_pending_jobs{reason="Unschedulable"} 0.0' in text
    assert 'tephra_pending_jobs{reason="GangShort"} 1.0' in text
