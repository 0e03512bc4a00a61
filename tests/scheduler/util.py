"""Small helpers to build in-memory clusters for scheduler tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.scheduler import Decisions, SchedulerConfig, load_config, run_session

NOW = 1_800_000_000.0


def stamp(seconds_before_now: float) -> str:
    """An RFC 3339 timestamp ``seconds_before_now`` before ``NOW`` (whole seconds)."""
    return datetime.fromtimestamp(NOW - seconds_before_now, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


BASIC = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def cluster(
    nodes: int = 0,
    *,
    cpu: str = "8",
    memory: str = "32Gi",
    gpu: int | None = None,
    queues: tuple[str, ...] = ("default",),
    **kw: Any,
) -> ClusterCache:
    c = ClusterCache()
    c.apply("Queue", "ADDED", f.queue("root"))
    for q in queues:
        c.apply("Queue", "ADDED", f.queue(q))
    for i in range(nodes):
        c.apply("Node", "ADDED", f.node(f"n{i}", cpu=cpu, memory=memory, gpu=gpu, **kw))
    return c


def gang(
    c: ClusterCache,
    name: str,
    size: int,
    *,
    min_member: int | None = None,
    queue: str = "default",
    phase: str = "Inqueue",
    namespace: str = "default",
    min_resources: dict[str, str] | None = None,
    priority_class: str | None = None,
    created: str = "2026-01-01T00:00:00Z",
    **pod_kw: Any,
) -> str:
    c.apply(
        "PodGroup",
        "ADDED",
        f.podgroup(
            name,
            namespace=namespace,
            min_member=size if min_member is None else min_member,
            queue=queue,
            phase=phase,
            min_resources=min_resources,
            priority_class=priority_class,
            created=created,
        ),
    )
    for i in range(size):
        c.apply(
            "Pod",
            "ADDED",
            f.pod(f"{name}-{i}", namespace=namespace, group=name, created=created, **pod_kw),
        )
    return f"{namespace}/{name}"


def run(c: ClusterCache, conf: str | SchedulerConfig = BASIC, now: float = NOW) -> Decisions:
    cfg = load_config(conf) if isinstance(conf, str) else conf
    return run_session(c, cfg, now=now)


def bound_jobs(d: Decisions) -> dict[str, int]:
    out: dict[str, int] = {}
    for b in d.binds:
        out[b.job_id] = out.get(b.job_id, 0) + 1
    return out


@contextmanager
def switched(value: object, *switches: tuple[object, str]) -> Iterator[None]:
    """Every ``(owner, name)`` switch of ``switches`` set to ``value`` inside the block, each
    back to what it was after it (a module's or a class's shortcut, to compare its paths)."""
    was = [getattr(owner, name) for owner, name in switches]
    for owner, name in switches:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for (owner, name), v in zip(switches, was, strict=True):
            setattr(owner, name, v)
