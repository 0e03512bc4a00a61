"""Helpers for simulator tests: tiny clusters and workloads built by hand."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from batch.sim.cluster import ClusterSpec, NodeGroup, QueueSpec
from batch.sim.engine import EngineOptions
from batch.sim.policies import Policy, policies_for
from batch.sim.runner import PolicyRun, run_policy
from batch.sim.workload import SimJob, TaskShape, Workload, sort_jobs

GIB = 1 << 30


def cluster(nodes: int, gpus: int = 8, queues: Sequence[QueueSpec] = ()) -> ClusterSpec:
    return ClusterSpec(
        node_groups=(NodeGroup("n", nodes, 64_000, 512 * GIB, gpus * 1000),),
        queues=tuple(queues) or (QueueSpec("default"),),
    )


def job(
    name: str,
    *,
    submit: float,
    run: float,
    pods: int = 1,
    gpus_per_pod: int = 1,
    queue: str = "default",
    gang: int | None = None,
) -> SimJob:
    task = TaskShape("worker", pods, 1000, 0, gpus_per_pod * 1000)
    return SimJob(name, queue, submit, run, (task,), gang if gang is not None else pods)


def workload(jobs: Sequence[SimJob], c: ClusterSpec) -> Workload:
    return Workload(name="test", jobs=sort_jobs(jobs), cluster=c)


def policy(name: str, *, lifecycle: str = "fast", horizon: float | None = None) -> Policy:
    compare = [] if name == "tephra" else [name]
    p = {x.name: x for x in policies_for(conf=None, compare=compare, lifecycle=lifecycle)}[name]
    return replace(p, options=replace(p.options, horizon=horizon))


def run(w: Workload, name: str = "tephra", **kw: object) -> PolicyRun:
    return run_policy(w, policy(name, **kw))  # type: ignore[arg-type]


def times(r: PolicyRun) -> dict[str, tuple[float | None, float | None]]:
    """name -> (queueing delay, JCT)."""
    return {j.name: (j.queue_delay, j.jct) for j in r.result.jobs}


__all__ = ["EngineOptions", "cluster", "job", "policy", "run", "times", "workload"]
