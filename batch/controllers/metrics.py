"""Volcano's controller metrics (`volcano-semantics.md#metrics`, controller-manager :8081).

`volcano_job_completed_phase_count` / `volcano_job_failed_phase_count` (counters by job and
queue, incremented when the controller writes the phase), the job-to-pod creation latency
histogram, and the per-queue PodGroup phase gauges. Each ControllerManager has its own registry
so several instances (tests, the sandbox) never clash.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_FACTOR = (60000 / 50) ** (1 / 29)
_BUCKETS = tuple(round(50 * _FACTOR**i, 3) for i in range(30))


class ControllerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        # Gauges that only go up: a prometheus_client Counter would be exposed as `<name>_total`,
        # while Volcano's dashboards query the bare names.
        self.job_completed = Gauge(
            "volcano_job_completed_phase_count",
            "Jobs that entered the Completed phase",
            ["job_name", "queue_name"],
            registry=self.registry,
        )
        self.job_failed = Gauge(
            "volcano_job_failed_phase_count",
            "Jobs that entered the Failed phase",
            ["job_name", "queue_name"],
            registry=self.registry,
        )
        self.pod_creation_latency = Histogram(
            "volcano_controller_job_to_pod_creation_latency_milliseconds",
            "Time from job creation to the creation of each of its pods",
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.queue_podgroups = {
            phase: Gauge(
                f"volcano_queue_pod_group_{phase}_count",
                f"PodGroups in phase {phase} per queue",
                ["queue_name"],
                registry=self.registry,
            )
            for phase in ("inqueue", "pending", "running", "unknown", "completed")
        }
        self.oldest_pending = Gauge(
            "tephra_queue_oldest_pending_podgroup_timestamp_seconds",
            "Creation time of the queue's oldest PodGroup still Pending (0: none is)",
            ["queue_name"],
            registry=self.registry,
        )
        self.status_write_failures = Counter(
            "tephra_status_write_failures",
            "Status writes that failed, by kind (an object deleted meanwhile is no failure)",
            ["kind"],
            registry=self.registry,
        )

        self.dropped_writes = Counter(
            "tephra_controller_dropped_writes",
            "Controller writes dropped unsent because leadership was not current",
            registry=self.registry,
        )

    def serve(self, port: int, addr: str = "0.0.0.0") -> None:
        from prometheus_client import start_http_server

        start_http_server(port, addr=addr, registry=self.registry)
