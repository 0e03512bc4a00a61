"""The scheduler's Prometheus gauges from each session's decisions (Volcano's metric names).

Why this exists: what a session decided (queue allocations and weights, the fair-share plugin's
figures, pending reasons, evictions) becomes gauges and counters; a queue that has no figure any
more loses its series rather than keeping the last value. The service calls `export` and
`count_evictions` after each session.
"""

from __future__ import annotations

import contextlib
from collections import Counter

from batch.api.constants import is_preemption
from batch.api.resources import parse_resource_list
from batch.kube.metrics import SchedulerMetrics
from batch.model.cache import ClusterCache
from batch.scheduler.framework.decisions import Decisions

__all__ = ["SHARE_GAUGES", "SessionGauges"]

#: the `volcano_queue_<what>_*` gauges a fair-share plugin's figures set
SHARE_GAUGES = ("request", "deserved", "real_capacity", "inqueue")


class SessionGauges:
    """The gauges of one scheduler's sessions."""

    def __init__(self, metrics: SchedulerMetrics, cache: ClusterCache) -> None:
        self.metrics = metrics
        self.cache = cache
        #: queues that had fair-share figures at the last export
        self._shared: set[str] = set()

    def count_evictions(self, decisions: Decisions) -> None:
        """Volcano's preemption metrics: one transaction per (action, beneficiary)."""
        m = self.metrics
        transactions = {(e.reason, e.beneficiary) for e in decisions.evictions}
        for action, _job in transactions:
            m.eviction_transactions.labels(action=action).inc()
        preemptors = {job for action, job in transactions if is_preemption(action)}
        m.preemption_attempts.inc(len(preemptors))
        m.preemption_victims.set(sum(1 for e in decisions.evictions if is_preemption(e.reason)))

    def export(self, decisions: Decisions) -> None:
        """Queue and job gauges of the session just run (Volcano's metric names)."""
        m = self.metrics
        for name, status in decisions.queue_status.items():
            allocated = status.get("allocated")
            if isinstance(allocated, dict):
                m.set_queue_resources("allocated", name, parse_resource_list(allocated))
            info = self.cache.queues.get(name)
            if info is not None:
                m.queue_weight.labels(queue_name=name).set(info.weight)
                if info.capability:
                    m.set_queue_resources("capacity", name, info.capability)
        self._shares(decisions)
        m.unschedule_job_count.set(len(decisions.pending_reasons))
        m.set_pending(Counter(r.kind for r in decisions.pending_reasons.values()))
        m.unschedule_task_count.clear()
        for job_id, reason in decisions.pending_reasons.items():
            if reason.short_by:
                m.unschedule_task_count.labels(job_id=job_id).set(reason.short_by)

    def _shares(self, decisions: Decisions) -> None:
        """The fair-share plugin's figures per queue; a queue it has none for any more (as its
        fair-share annotation, `batch.kube.fairshare`) loses its series rather than keeping
        the last figure."""
        m = self.metrics
        for name, qm in decisions.queue_metrics.items():
            for what in SHARE_GAUGES:  # QueueMetrics' vectors, by the gauges' names
                vector = getattr(qm, what)
                if vector is not None:
                    m.set_queue_resources(what, name, qm.amounts(vector))
            m.queue_share.labels(queue_name=name).set(qm.share)
            m.queue_overused.labels(queue_name=name).set(1 if qm.overused else 0)
            self._usage(name, qm.effective_weight, qm.usage_share)
        for name in self._shared - set(decisions.queue_metrics):
            for what in SHARE_GAUGES:
                m.forget_queue_resources(what, name)
            self._usage(name, None, None)
            for gauge in (m.queue_share, m.queue_overused):
                with contextlib.suppress(KeyError):
                    gauge.remove(name)
        self._shared = set(decisions.queue_metrics)

    def _usage(self, queue: str, weight: float | None, share: float | None) -> None:
        """A queue's usage-decayed weight and usage share; no series without them."""
        m = self.metrics
        for gauge, value in ((m.queue_effective_weight, weight), (m.queue_usage_share, share)):
            if value is not None:
                gauge.labels(queue_name=queue).set(value)
            else:
                with contextlib.suppress(KeyError):
                    gauge.remove(queue)

    def usage_state(self, available: bool | None) -> None:
        self.metrics.usage_available.set(1 if available else 0)
