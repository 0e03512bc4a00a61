"""Volcano's preemption metrics count every preemption, task by task (``preempt``) or gang by
gang (``gangpreempt``); reclaim evictions are transactions but not preemptions."""

from __future__ import annotations

from batch.api.constants import PREEMPTION_REASONS, RECLAIM_REASONS, is_preemption
from batch.kube.config import ClusterAccess
from batch.kube.service import SchedulerOptions, SchedulerService
from batch.scheduler.framework.decisions import Decisions, Eviction


def _evict(name: str, reason: str, beneficiary: str) -> Eviction:
    return Eviction("ns", name, f"uid-{name}", reason, "ns/victim", beneficiary)


def test_gang_preemption_victims_are_counted() -> None:
    service = SchedulerService(SchedulerOptions(), access=ClusterAccess(server="http://x"))
    decisions = Decisions(session_uid="s")
    decisions.evictions = [
        _evict("a", "preempt", "ns/hi"),
        _evict("b", "gangpreempt", "ns/gang"),
        _evict("c", "gangpreempt", "ns/gang"),
        _evict("d", "gangreclaim", "ns/other-queue"),
    ]
    service.gauges.count_evictions(decisions)
    text = service.metrics.render().decode()
    assert "volcano_pod_preemption_victims 3.0" in text
    assert "volcano_total_preemption_attempts 2.0" in text
    assert 'volcano_eviction_transactions_total{action="gangreclaim"} 1.0' in text


def test_one_mapping_of_reasons() -> None:
    assert {"preempt", "gangpreempt"} == PREEMPTION_REASONS
    assert {"reclaim", "gangreclaim"} == RECLAIM_REASONS
    assert not PREEMPTION_REASONS & RECLAIM_REASONS
    assert is_preemption("gangpreempt") and not is_preemption("shuffle")
