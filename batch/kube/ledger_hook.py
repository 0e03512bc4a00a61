"""What the scheduler service tells the ledger: evictions and periodic queue usage.

Why this exists: preemption and reclaim decisions exist only inside the scheduler, and so does
the per-queue view (allocated, pending demand, fair share) the fairness report compares over
time. This hook turns a session's decisions into ledger events: evictions keyed by the jobs'
Kubernetes uids, and usage samples of leaf queues with the fair-share plugin's deserved share
(`Decisions.queue_metrics`, the figure the metrics and the Queue's `tephra.io/fair-share`
annotation carry; a queue without one is sampled without a deserved share, never with a figure
of another source).
It is fed on the service's event loop; the usage sampler (an apscheduler thread inside the
recorder) reads only the snapshot taken here, never the live cache, so the two threads never
race.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from batch.ledger import Recorder, usage_samples_from_queues
from batch.ledger.convert import podgroup_job_uid
from batch.ledger.events import LedgerEvent, SchedulingEvent
from batch.model.cache import ClusterCache
from batch.scheduler.framework.decisions import Decisions

__all__ = ["SchedulerLedger"]

log = logging.getLogger(__name__)


class SchedulerLedger:
    """Records evictions and queue usage samples for one scheduler replica."""

    def __init__(self, db_url: str, *, sample_seconds: float = 60.0) -> None:
        # never blocks or fails the scheduler's start: the schema is migrated by the
        # recorder's thread, and records spill while the database cannot take them
        self.recorder = Recorder(db_url, migrate=True)
        self._lock = threading.Lock()
        self._queues: list[dict[str, Any]] = []
        self._pending: dict[str, dict[str, int]] = {}
        self._deserved: dict[str, dict[str, int]] = {}
        self._sampler = self.recorder.start_usage_sampler(
            self._samples, interval_seconds=sample_seconds
        )

    def _samples(self, at: dt.datetime) -> Iterable[LedgerEvent]:
        with self._lock:
            queues, pending, deserved = self._queues, self._pending, self._deserved
        # the scheduler's figures only: a queue without them is sampled without a deserved share
        return usage_samples_from_queues(queues, at=at, pending=pending, deserved=deserved)

    def observe_session(self, cache: ClusterCache, decisions: Decisions, now: float) -> None:
        """Record this session's evictions and refresh the usage snapshot."""
        at = dt.datetime.fromtimestamp(now, tz=dt.UTC)
        events: list[LedgerEvent] = []
        for ev in decisions.evictions:
            job = cache.jobs.get(ev.job_id) if ev.job_id else None
            gainer = cache.jobs.get(ev.beneficiary) if ev.beneficiary else None
            # the ledger keys jobs by Kubernetes uid (the PodGroup's owner, else the PodGroup),
            # not by the scheduler's "<namespace>/<podgroup>" id
            victim_uid = podgroup_job_uid(job.podgroup) if job and job.podgroup else None
            gainer_uid = podgroup_job_uid(gainer.podgroup) if gainer and gainer.podgroup else None
            task = cache.tasks.get(ev.uid)
            amounts = self._amounts(cache, task.req) if task is not None else {}
            events.append(
                SchedulingEvent(
                    action=ev.reason.split(":", 1)[0].strip() or "evict",
                    at=at,
                    victim_pod_uid=ev.uid,
                    victim_namespace=ev.namespace,
                    victim_pod=ev.name,
                    victim_job_uid=victim_uid or None,
                    victim_queue=job.queue if job is not None else None,
                    beneficiary_job_uid=gainer_uid or None,
                    beneficiary_queue=gainer.queue if gainer is not None else None,
                    reason=ev.reason,
                    session_id=decisions.session_uid,
                    cpu_milli=amounts.get("cpu"),
                    memory_bytes=amounts.get("memory"),
                    gpu_milli=amounts.get("nvidia.com/gpu"),
                )
            )
        if events:
            self.recorder.record(events)
        self._snapshot(cache, decisions)

    @staticmethod
    def _amounts(cache: ClusterCache, vec: Any) -> dict[str, int]:
        names = cache.resources.names
        return {names[i]: int(vec[i]) for i in range(min(len(names), len(vec))) if vec[i]}

    def _snapshot(self, cache: ClusterCache, decisions: Decisions) -> None:
        pending: dict[str, dict[str, int]] = {}
        for job in cache.jobs.values():
            amounts = self._amounts(cache, job.pending_req)
            if amounts:
                acc = pending.setdefault(job.queue, {})
                for name, value in amounts.items():
                    acc[name] = acc.get(name, 0) + value
        # Leaf queues only: a parent's allocation is the sum of its children's (session close
        # adds each queue's to its ancestors), so sampling both would count it twice in every
        # "share of all allocated" (root is the parent of every top-level queue).
        parents = {info.parent for info in cache.queues.values() if info.parent}
        queues: list[dict[str, Any]] = []
        for name, info in cache.queues.items():
            if name in parents:
                continue
            raw: Mapping[str, Any] = info.raw or {"metadata": {"name": name}}
            status = dict(raw.get("status") or {})
            desired = decisions.queue_status.get(name)
            if desired and "allocated" in desired:
                status["allocated"] = desired["allocated"]
            queues.append({**raw, "status": status})
        deserved = {q: m.amounts(m.deserved) for q, m in decisions.queue_metrics.items()}
        with self._lock:
            self._queues, self._pending, self._deserved = queues, pending, deserved

    def close(self) -> None:
        try:
            self._sampler.shutdown()
        except Exception:  # pragma: no cover - shutdown best effort
            log.debug("usage sampler stop failed", exc_info=True)
        self.recorder.close()
