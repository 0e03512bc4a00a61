"""Workloads: VCJob-equivalents with an arrival time, a gang shape and a run time.

Why this exists: every trace format (Philly, ElasticFlow/ITP, Alibaba openb, Tephra's own
ledger) is reduced to the same small description of a job — when it was submitted, to which
queue, which pods it needs (tasks x replicas x per-pod requests), how many must run together
(minAvailable) and how long it runs once all of them run. The engine turns each into a
PodGroup and pods exactly as the job controller would.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from batch.sim.cluster import ClusterSpec, QueueSpec
from batch.sim.errors import SimInputError

__all__ = ["SimJob", "TaskShape", "Workload"]


@dataclass(frozen=True, slots=True)
class TaskShape:
    """`replicas` identical pods; requests as internal integers (milli-cpu, bytes, milli-GPU)."""

    name: str
    replicas: int
    cpu_milli: int
    memory_bytes: int
    gpu_milli: int


@dataclass(frozen=True, slots=True)
class SimJob:
    """One submitted job. `run_time` is service time once the whole gang runs (seconds)."""

    name: str
    queue: str
    submit: float
    run_time: float
    tasks: tuple[TaskShape, ...]
    min_available: int
    priority: int = 0
    max_retry: int = 3

    @property
    def pods(self) -> int:
        return sum(t.replicas for t in self.tasks)

    @property
    def gpu_milli(self) -> int:
        return sum(t.replicas * t.gpu_milli for t in self.tasks)


@dataclass(frozen=True, slots=True)
class Workload:
    """Jobs sorted by submit time, the cluster they ran on and how it was derived."""

    name: str
    jobs: tuple[SimJob, ...]
    cluster: ClusterSpec
    notes: tuple[str, ...] = ()
    #: what the workload assumes or leaves out of what it was read from (one line per
    #: assumption or reason, with its count): a result from it is stated with these
    assumptions: tuple[str, ...] = ()
    capacity_scale: float = 1.0
    time_compress: float = 1.0
    origin: float = 0.0  # wall-clock epoch seconds of submit == 0 (for timestamps in reports)
    extra: dict[str, str] = field(default_factory=dict)

    def limited(self, limit: int | None) -> Workload:
        if limit is None or limit >= len(self.jobs):
            return self
        if limit <= 0:
            raise SimInputError(f"--limit: must be > 0, got {limit}")
        jobs = self.jobs[:limit]
        return replace(self, jobs=jobs, notes=(*self.notes, f"first {limit} jobs by submit time"))

    def transformed(self, *, capacity_scale: float = 1.0, time_compress: float = 1.0) -> Workload:
        """Scale every node group's count and divide inter-arrival times by `time_compress`."""
        if time_compress <= 0:
            raise SimInputError(f"--time-compress: must be > 0, got {time_compress}")
        cluster = self.cluster.scaled(capacity_scale)
        jobs = self.jobs
        if time_compress != 1.0:
            jobs = tuple(replace(j, submit=j.submit / time_compress) for j in jobs)
        return replace(
            self,
            jobs=jobs,
            cluster=cluster,
            capacity_scale=self.capacity_scale * capacity_scale,
            time_compress=self.time_compress * time_compress,
        )

    def with_queues(self, queues: Sequence[QueueSpec]) -> Workload:
        return replace(self, cluster=self.cluster.with_queues(queues))


def sort_jobs(jobs: Sequence[SimJob]) -> tuple[SimJob, ...]:
    """Stable order by submit time (ties keep trace order), which is also FIFO order."""
    return tuple(sorted(jobs, key=lambda j: j.submit))
