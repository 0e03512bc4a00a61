"""Cluster builders for the preempt/reclaim/topology/reservation tests (running jobs on nodes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.model.status import TaskStatus
from batch.scheduler import Decisions

EVICT_CONF = """
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
"""

STRICT_CONF = (
    EVICT_CONF
    + """
configurations:
- name: preempt
  arguments: {victimSelection: strict}
- name: reclaim
  arguments: {victimSelection: strict, keepVictimQueueAtDeserved: true}
"""
)


def priorities(c: ClusterCache) -> None:
    c.apply("PriorityClass", "ADDED", f.priority_class("low", 10))
    c.apply("PriorityClass", "ADDED", f.priority_class("high", 1000))


def running(
    c: ClusterCache,
    name: str,
    nodes: Sequence[str],
    *,
    per_node: int = 1,
    min_member: int = 1,
    queue: str = "default",
    priority_class: str | None = None,
    namespace: str = "default",
    cpu: str = "1",
    memory: str = "1Gi",
    start: str = "2026-01-01T00:00:00Z",
    annotations: dict[str, str] | None = None,
    pod_annotations: dict[str, str] | None = None,
    **pod_kw: Any,
) -> str:
    """A Running job with ``per_node`` pods on each of ``nodes``."""
    c.apply(
        "PodGroup",
        "ADDED",
        f.podgroup(
            name,
            namespace=namespace,
            min_member=min_member,
            queue=queue,
            phase="Running",
            priority_class=priority_class,
            annotations=annotations,
        ),
    )
    prio = {"low": 10, "high": 1000}.get(priority_class or "")
    k = 0
    for n in nodes:
        for _ in range(per_node):
            p = f.pod(
                f"{name}-{k}",
                namespace=namespace,
                group=name,
                cpu=cpu,
                memory=memory,
                node_name=n,
                phase="Running",
                priority=prio,
                priority_class=priority_class,
                annotations=pod_annotations,
                **pod_kw,
            )
            p["status"]["startTime"] = start
            c.apply("Pod", "ADDED", p)
            k += 1
    return f"{namespace}/{name}"


def pending(
    c: ClusterCache,
    name: str,
    size: int,
    *,
    min_member: int | None = None,
    queue: str = "default",
    priority_class: str | None = None,
    namespace: str = "default",
    cpu: str = "1",
    memory: str = "1Gi",
    annotations: dict[str, str] | None = None,
    network_topology: dict[str, Any] | None = None,
    created: str = "2026-01-01T00:00:00Z",
    **pod_kw: Any,
) -> str:
    """An admitted (Inqueue) job with ``size`` pending pods."""
    pg = f.podgroup(
        name,
        namespace=namespace,
        min_member=size if min_member is None else min_member,
        queue=queue,
        phase="Inqueue",
        priority_class=priority_class,
        annotations=annotations,
        created=created,
    )
    if network_topology is not None:
        pg["spec"]["networkTopology"] = network_topology
    c.apply("PodGroup", "ADDED", pg)
    prio = {"low": 10, "high": 1000}.get(priority_class or "")
    for i in range(size):
        c.apply(
            "Pod",
            "ADDED",
            f.pod(
                f"{name}-{i}",
                namespace=namespace,
                group=name,
                cpu=cpu,
                memory=memory,
                priority=prio,
                priority_class=priority_class,
                created=created,
                **pod_kw,
            ),
        )
    return f"{namespace}/{name}"


def evicted_jobs(d: Decisions) -> dict[str, int]:
    out: dict[str, int] = {}
    for e in d.evictions:
        out[e.job_id] = out.get(e.job_id, 0) + 1
    return out


def settle(c: ClusterCache, d: Decisions, *, now_iso: str = "2026-06-01T00:00:00Z") -> None:
    """Apply a cycle's decisions as the cluster would: evicted pods deleted, binds running."""
    for e in d.evictions:
        t = c.tasks.get(e.uid)
        if t is not None and t.raw is not None:
            c.apply("Pod", "DELETED", t.raw)
    for pl in d.pipelines:  # the shell nominates pipelined pods (status.nominatedNodeName)
        t = c.tasks.get(pl.uid)
        if t is None or t.raw is None or t.status.name != "PENDING":
            continue
        raw = {**t.raw, "status": {**t.raw.get("status", {}), "nominatedNodeName": pl.node}}
        c.apply("Pod", "MODIFIED", raw)
    for b in d.binds:
        t = c.tasks.get(b.uid)
        if t is None or t.raw is None:
            continue
        raw: dict[str, Any] = {**t.raw}
        raw["spec"] = {**raw["spec"], "nodeName": b.node}
        raw["status"] = {"phase": "Running", "startTime": now_iso}
        c.apply("Pod", "MODIFIED", raw)


def statuses(c: ClusterCache, job_id: str) -> dict[TaskStatus, int]:
    out: dict[TaskStatus, int] = {}
    for t in c.jobs[job_id].tasks.values():
        out[t.status] = out.get(t.status, 0) + 1
    return out
