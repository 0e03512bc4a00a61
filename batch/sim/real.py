"""The simulator's scheduler: Tephra's real session on a real `ClusterCache`.

Why this exists: the point of the simulator is that what it measures is what production runs.
`RealScheduler` feeds the engine's watch events into `batch.model.cache.ClusterCache` and runs
`batch.scheduler.cycle.Scheduler.run_once` (the same cycle the scheduler service runs) at the
virtual time, translating its `Decisions` into the engine's `CycleOutcome`. The cache is
incremental: no session rebuilds it. With proportion's ``usageHalfLife`` it also keeps each
queue's decayed usage from the simulated run itself (what the ledger would hold in production,
``batch.model.usage``) and hands it to the cache as often as the scheduler service would.
"""

from __future__ import annotations

import time
from typing import Any

from batch.model.cache import ClusterCache
from batch.model.usage import REFRESH_SECONDS, UsageAccumulator
from batch.scheduler.config import ConfigError, load_config
from batch.scheduler.cycle import Scheduler
from batch.scheduler.framework.decisions import Decisions
from batch.scheduler.plugins.proportion.usage import configured_decay
from batch.sim.backend import CycleOutcome
from batch.sim.errors import SimInputError

__all__ = ["RealScheduler"]

#: the resources the ledger's usage query sums (batch.ledger.usage.RESOURCES)
USAGE_RESOURCES = ("nvidia.com/gpu", "cpu")
GPU = "nvidia.com/gpu"


class RealScheduler:
    """`SchedulerBackend` over the real cache and session."""

    def __init__(
        self, conf_text: str, *, scheduler_names: tuple[str, ...] = ("volcano",), epoch: float
    ) -> None:
        try:
            self.config = load_config(conf_text)
        except ConfigError as exc:
            raise SimInputError(f"scheduler configuration: {exc}") from None
        self.cache = ClusterCache(scheduler_names=scheduler_names)
        self.scheduler = Scheduler(self.cache, self.config)
        self.epoch = epoch
        self.timings: dict[str, float] = {}
        decay = configured_decay(self.config)
        self.usage = UsageAccumulator(decay.half_life) if decay is not None else None
        self._usage_due = float("-inf")
        self._usage_at = float("-inf")

    def apply(self, kind: str, event: str, obj: dict[str, Any]) -> None:
        self.cache.apply(kind, event, obj)

    def at(self, now: float) -> None:
        if self.usage is not None:
            self._track_usage(self.epoch + now)

    def cycle(self, now: float) -> CycleOutcome:
        t0 = time.perf_counter()
        self.at(now)
        d = self.scheduler.run_once(self.epoch + now)
        for k, v in d.timings.items():
            self.timings[k] = self.timings.get(k, 0.0) + v
        out = CycleOutcome(
            binds=[(b.namespace, b.name, b.node) for b in d.binds],
            evictions=[(e.namespace, e.name, e.reason) for e in d.evictions],
            podgroup_phases=self._phase_changes(d),
            deserved={q: m.amount(m.deserved, GPU) for q, m in d.queue_metrics.items()},
        )
        out.seconds = time.perf_counter() - t0
        return out

    def _track_usage(self, at: float) -> None:
        """What each queue held since the last call (the engine calls before each moment's
        events) joins its decayed usage; the cache gets the figures every
        ``REFRESH_SECONDS``, as from the ledger in production."""
        assert self.usage is not None
        if at <= self._usage_at:
            return
        self._usage_at = at  # called before this moment's events: the holdings since the last
        dims = [(n, self.cache.resources.get(n)) for n in USAGE_RESOURCES]
        holding: dict[str, dict[str, float]] = {}
        for job in self.cache.jobs.values():
            alloc = job.allocated
            for name, i in dims:
                if i is not None and i < len(alloc) and alloc[i]:
                    q = holding.setdefault(job.queue, {})
                    q[name] = q.get(name, 0.0) + float(alloc[i])
        self.usage.advance(at, holding)
        if at >= self._usage_due:
            self._usage_due = at + REFRESH_SECONDS
            self.cache.set_queue_usage(self.usage.snapshot())

    def next_change(self, since: float) -> float | None:
        got = self.scheduler.next_change(self.epoch + since)
        return None if got is None else got - self.epoch

    def _phase_changes(self, d: Decisions) -> dict[tuple[str, str], str]:
        """PodGroup phases that differ from the PodGroup the engine last wrote (which the cache
        holds): the engine would skip every other one. A status the session kept from the
        previous one had its phase written then (the engine writes every phase it is given)."""
        jobs = self.cache.jobs
        out: dict[tuple[str, str], str] = {}
        statuses = d.podgroup_status
        keys = statuses if d.podgroup_status_new is None else d.podgroup_status_new
        for key in keys:
            phase = statuses[key].get("phase")
            if phase is None:
                continue
            job = jobs.get(f"{key[0]}/{key[1]}")
            if job is None or job.phase != phase:
                out[key] = str(phase)
        return out
