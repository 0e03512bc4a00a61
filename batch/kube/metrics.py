"""Prometheus metrics of the scheduler, under Volcano's names and labels
(volcano-semantics.md#metrics).

Why this exists: dashboards and alerts written for Volcano keep working against Tephra. Each
service gets its own `CollectorRegistry`, so several schedulers can live in one process (the
sandbox, tests) without colliding on the global registry.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest

from batch.api.resources import CPU, MEMORY

__all__ = ["SchedulerMetrics"]


def _exp_buckets(start: float, factor: float, count: int) -> list[float]:
    return [start * factor**i for i in range(count)]


def _buckets_between(low: float, high: float, count: int) -> list[float]:
    """`count` exponential buckets from low to high, as Volcano declares them."""
    factor = (high / low) ** (1 / (count - 1))
    return _exp_buckets(low, factor, count)


class SchedulerMetrics:
    """All scheduler metrics, registered in a private registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        ms = "milliseconds"
        self.e2e_latency = Histogram(
            "volcano_e2e_scheduling_latency_milliseconds",
            "E2e scheduling latency in milliseconds (scheduling algorithm + binding)",
            buckets=_buckets_between(1, 5000, 20),
            registry=r,
        )
        self.open_session = Histogram(
            "volcano_open_session_duration_milliseconds",
            "Time to open a session, in milliseconds",
            buckets=_buckets_between(1, 5000, 20),
            registry=r,
        )
        self.action_latency = Histogram(
            f"volcano_action_scheduling_latency_{ms}",
            "Action scheduling latency in milliseconds",
            ["action"],
            buckets=_buckets_between(1, 2000, 20),
            registry=r,
        )
        self.plugin_latency = Histogram(
            f"volcano_plugin_scheduling_latency_{ms}",
            "Plugin scheduling latency in milliseconds",
            ["plugin", "OnSession"],
            buckets=_buckets_between(0.1, 100, 15),
            registry=r,
        )
        self.task_latency = Histogram(
            f"volcano_task_scheduling_latency_{ms}",
            "Task scheduling latency in milliseconds, from pod creation",
            ["stage"],
            buckets=_buckets_between(50, 60000, 30),
            registry=r,
        )
        self.schedule_attempts = Counter(
            "volcano_schedule_attempts",
            "Number of attempts to schedule pods, by the result",
            ["result"],
            registry=r,
        )
        self.preemption_victims = Gauge(
            "volcano_pod_preemption_victims", "Number of selected preemption victims", registry=r
        )
        # Volcano's Go client exports this counter without a `_total` suffix; prometheus_client
        # would add one to a Counter, so it is a monotonic Gauge here.
        self.preemption_attempts = Gauge(
            "volcano_total_preemption_attempts",
            "Total preemption attempts in the cluster till now",
            registry=r,
        )
        self.eviction_transactions = Counter(
            "volcano_eviction_transactions",
            "Committed statements that contain at least one eviction",
            ["action"],
            registry=r,
        )
        self.unschedule_task_count = Gauge(
            "volcano_unschedule_task_count",
            "Number of tasks that could not be scheduled",
            ["job_id"],
            registry=r,
        )
        self.unschedule_job_count = Gauge(
            "volcano_unschedule_job_count", "Number of jobs that could not be scheduled", registry=r
        )
        self.queue_gauges: dict[str, tuple[Gauge, Gauge, Gauge]] = {}
        #: scalar resources last set per (gauge kind, queue), to zero those that disappear
        self._scalars: dict[tuple[str, str], set[str]] = {}
        # allocated: session close; capacity: the Queue's spec; the others: the fair-share
        # plugin (proportion or capacity) of the session.
        for what in ("allocated", "capacity", "request", "deserved", "real_capacity", "inqueue"):
            words = what.replace("_", " ")
            self.queue_gauges[what] = (
                Gauge(
                    f"volcano_queue_{what}_milli_cpu",
                    f"CPU {words} of the queue, in milli-cores",
                    ["queue_name"],
                    registry=r,
                ),
                Gauge(
                    f"volcano_queue_{what}_memory_bytes",
                    f"Memory {words} of the queue, in bytes",
                    ["queue_name"],
                    registry=r,
                ),
                Gauge(
                    f"volcano_queue_{what}_scalar_resources",
                    f"Scalar resources {words} of the queue, in milli-units",
                    ["queue_name", "resource"],
                    registry=r,
                ),
            )
        self.queue_share = Gauge(
            "volcano_queue_share",
            "Share of the queue: max over resources of allocated / deserved",
            ["queue_name"],
            registry=r,
        )
        self.queue_overused = Gauge(
            "volcano_queue_overused",
            "1 when the queue's allocation has reached its deserved share",
            ["queue_name"],
            registry=r,
        )
        self.queue_weight = Gauge(
            "volcano_queue_weight", "Weight of the queue", ["queue_name"], registry=r
        )
        # Tephra's own, beyond Volcano's set.
        self.binds = Counter("tephra_binds", "Bind requests by result", ["result"], registry=r)
        self.evictions = Counter(
            "tephra_evictions", "Eviction requests by result", ["result"], registry=r
        )
        self.dropped_requests = Counter(
            "tephra_dropped_requests",
            "Binds and evictions dropped unsent because leadership was not current",
            ["kind"],
            registry=r,
        )
        self.status_writes = Counter(
            "tephra_status_writes", "Status writes by kind", ["kind"], registry=r
        )
        self.status_write_failures = Counter(
            "tephra_status_write_failures",
            "Status writes that failed, by kind (an object deleted meanwhile is no failure)",
            ["kind"],
            registry=r,
        )
        self.cache_synced = Gauge(
            "tephra_cache_synced", "1 once every watched kind has been listed", registry=r
        )
        self.is_leader = Gauge("tephra_is_leader", "1 while this replica is the leader", registry=r)
        self.pending_jobs = Gauge(
            "tephra_pending_jobs",
            "Jobs the last session left pending, by reason (QueueOverused, Unschedulable, ...)",
            ["reason"],
            registry=r,
        )
        self.usage_available = Gauge(
            "tephra_queue_usage_available",
            "With proportion's usageHalfLife: 1 while the queues' decayed usage is read from the "
            "ledger, 0 while it cannot be (plain weights decide)",
            registry=r,
        )
        self.queue_effective_weight = Gauge(
            "tephra_queue_effective_weight",
            "The weight the fair share was computed with (usageHalfLife: weight times the usage "
            "factor)",
            ["queue_name"],
            registry=r,
        )
        self.queue_usage_share = Gauge(
            "tephra_queue_usage_share",
            "The queue's share of all queues' decayed usage (usageHalfLife)",
            ["queue_name"],
            registry=r,
        )
        self._reasons: set[str] = set()

    def set_queue_resources(self, what: str, queue: str, amounts: Mapping[str, int]) -> None:
        """Set a queue's gauges of `what`; a scalar resource it no longer lists reads 0."""
        cpu, mem, scalar = self.queue_gauges[what]
        cpu.labels(queue_name=queue).set(amounts.get(CPU, 0))
        mem.labels(queue_name=queue).set(amounts.get(MEMORY, 0))
        names = {name for name in amounts if name not in (CPU, MEMORY)}
        for name in self._scalars.get((what, queue), set()) - names:
            scalar.labels(queue_name=queue, resource=name).set(0)
        for name in names:
            scalar.labels(queue_name=queue, resource=name).set(amounts[name])
        self._scalars[(what, queue)] = names

    def forget_queue_resources(self, what: str, queue: str) -> None:
        """Drop a queue's series of `what` (a figure nobody computes for it any more)."""
        cpu, mem, scalar = self.queue_gauges[what]
        for gauge in (cpu, mem):
            with contextlib.suppress(KeyError):
                gauge.remove(queue)
        for name in self._scalars.pop((what, queue), set()):
            with contextlib.suppress(KeyError):
                scalar.remove(queue, name)

    def set_pending(self, counts: Mapping[str, int]) -> None:
        """Pending jobs per reason; a reason no job has any more reads 0."""
        for reason in self._reasons - set(counts):
            self.pending_jobs.labels(reason=reason).set(0)
        for reason, count in counts.items():
            self.pending_jobs.labels(reason=reason).set(count)
        self._reasons |= set(counts)

    def render(self) -> bytes:
        return generate_latest(self.registry)
