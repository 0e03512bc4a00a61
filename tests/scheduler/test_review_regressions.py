"""Defects a review found against docs/volcano-semantics.md and Kubernetes' rules, one test each.

Each test fails on the code before its fix.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.scheduler import (
    HELM_DEFAULT_CONFIG,
    TEPHRA_DEFAULT_CONFIG,
    Decisions,
    load_config,
    run_session,
)

from .util import NOW, cluster

HELM = load_config(HELM_DEFAULT_CONFIG)
TEPHRA = load_config(TEPHRA_DEFAULT_CONFIG)


def running(c: ClusterCache, name: str, group: str, node: str, **kw: Any) -> None:
    pod = f.pod(name, group=group, node_name=node, phase="Running", **kw)
    pod["status"]["startTime"] = "2026-01-01T00:00:00Z"
    c.apply("Pod", "ADDED", pod)


def placed(d: Decisions) -> dict[str, list[tuple[str, str]]]:
    return {
        "binds": [(b.name, b.node) for b in d.binds],
        "pipelines": [(p.name, p.node) for p in d.pipelines],
    }


def test_idle_promised_to_a_pipelined_task_is_not_free() -> None:
    """docs/volcano-semantics.md#allocate: a node is a candidate only when its FutureIdle holds the
    task. n0 (8 cpu) runs 6, 4 of which are being deleted: A (5 cpu) is pipelined there, after which
    n0's FutureIdle is 1 — B (2 cpu) must not take n0's 2 idle cpus."""
    c = cluster(1, cpu="8")
    # a big node nobody tolerates: raises the queue's deserved share so that only n0 decides
    taint = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}
    c.apply("Node", "ADDED", f.node("big", cpu="100", memory="400Gi", taints=[taint]))
    c.apply("PodGroup", "ADDED", f.podgroup("old", phase="Running"))
    c.apply(
        "Pod",
        "ADDED",
        f.pod("v", group="old", node_name="n0", phase="Running", cpu="4", deleting=True),
    )
    running(c, "w", "old", "n0", cpu="2")
    c.apply("PodGroup", "ADDED", f.podgroup("a", phase="Inqueue", created="2026-01-01T00:00:00Z"))
    c.apply("Pod", "ADDED", f.pod("a-0", group="a", cpu="5", created="2026-01-01T00:00:00Z"))
    c.apply("PodGroup", "ADDED", f.podgroup("b", phase="Inqueue", created="2026-01-02T00:00:00Z"))
    c.apply("Pod", "ADDED", f.pod("b-0", group="b", cpu="2", created="2026-01-02T00:00:00Z"))
    for conf in (HELM, TEPHRA):
        d = run_session(c, conf, now=NOW)
        assert placed(d) == {"binds": [], "pipelines": [("a-0", "n0")]}


def test_preemption_tries_the_next_node_when_the_queue_quota_blocks_one() -> None:
    """docs/volcano-semantics.md#preempt: per-node evictions are isolated and the walk goes on. The
    queue (capability 10 cpu) is full; on nA the only victim (2 cpu) leaves the quota short, on nB a
    4-cpu victim makes room: the preemptor must be pipelined on nB."""
    c = ClusterCache()
    c.apply("Queue", "ADDED", f.queue("root"))
    c.apply("Queue", "ADDED", f.queue("default", capability={"cpu": "10", "memory": "100Gi"}))
    c.apply("PriorityClass", "ADDED", f.priority_class("high", 1000))
    c.apply("PriorityClass", "ADDED", f.priority_class("low", 10))
    for n in ("nA", "nB"):
        c.apply("Node", "ADDED", f.node(n, cpu="8"))
    c.apply("PodGroup", "ADDED", f.podgroup("l", phase="Running", priority_class="low"))
    running(c, "l-0", "l", "nA", cpu="2", priority=10)
    running(c, "l-1", "l", "nB", cpu="4", priority=10)
    running(c, "l-2", "l", "nB", cpu="4", priority=10)
    c.apply("PodGroup", "ADDED", f.podgroup("h", phase="Inqueue", priority_class="high"))
    c.apply("Pod", "ADDED", f.pod("h-0", group="h", cpu="4", priority=1000))
    for selection in ("strict", "volcano"):
        conf = TEPHRA_DEFAULT_CONFIG.replace(
            "victimSelection: strict", f"victimSelection: {selection}"
        )
        d = run_session(c, load_config(conf), now=NOW)
        assert [p.name for p in d.pipelines] == ["h-0"] and d.pipelines[0].node == "nB"
        assert len(d.evictions) == 1 and d.evictions[0].name in ("l-1", "l-2")
        # the job's reason says it waits for the released resources (not "does not fit")
        assert d.pending_reasons["default/h"].kind == "Pipelined"


def test_overcommit_counts_a_running_jobs_unstarted_part_per_resource() -> None:
    """docs/volcano-semantics.md#plugins / #proportion-inputs: a Running job holds max(0,
    minResources - allocated) of each resource. R (minResources 8 cpu, 1Gi) runs 2 cpu and 4Gi: its
    6 unstarted cpus count even though its memory is above minResources, so P (5 cpu) does not fit
    1.2 x 10 cpu - 2 used."""
    c = cluster(1, cpu="10", memory="100Gi", queues=("default", "q2"))
    c.apply(
        "PodGroup",
        "ADDED",
        f.podgroup("r", phase="Running", min_resources={"cpu": "8", "memory": "1Gi"}),
    )
    running(c, "r-0", "r", "n0", cpu="2", memory="4Gi")
    c.apply("Pod", "ADDED", f.pod("r-1", group="r", cpu="6", memory="1Gi"))
    c.apply(
        "PodGroup",
        "ADDED",
        f.podgroup("p", queue="q2", min_resources={"cpu": "5", "memory": "1Gi"}),
    )
    c.apply("Pod", "ADDED", f.pod("p-0", group="p", cpu="5", memory="1Gi"))
    conf = "actions: enqueue\ntiers: [{plugins: [{name: gang}]}, {plugins: [{name: overcommit}]}]"
    d = run_session(c, load_config(conf), now=NOW)
    assert d.podgroup_status[("default", "p")]["phase"] == "Pending"
    assert d.pending_reasons["default/p"].details["rejected_by"] == "overcommit"


def test_a_reservation_does_not_make_jobs_of_one_shape_fail_alike() -> None:
    """The reservation filter differs per job (a job that finishes before the reservation is
    due may use reserved nodes): allocate's "same shape fails the same way" shortcut must not
    reuse X's failure for Y."""

    def iso(t: float) -> str:
        return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    conf = load_config(HELM_DEFAULT_CONFIG.rstrip() + "\n  - name: reservation\n")
    c = cluster(2, cpu="4")
    c.apply(
        "PodGroup",
        "ADDED",
        f.podgroup("r", phase="Running", annotations={"tephra.io/running-estimate": "1h"}),
    )
    for i in range(4):  # fills n0 until now + 50 min
        pod = f.pod(f"r-{i}", group="r", node_name="n0", phase="Running", cpu="1")
        pod["status"]["startTime"] = iso(NOW - 600)
        c.apply("Pod", "ADDED", pod)
    c.apply("PodGroup", "ADDED", f.podgroup("g", min_member=8, phase="Inqueue"))
    for i in range(8):  # reserves n0 and n1
        c.apply("Pod", "ADDED", f.pod(f"g-{i}", group="g", cpu="1"))
    later = "2026-01-02T00:00:00Z"
    c.apply("PodGroup", "ADDED", f.podgroup("x", phase="Inqueue", created=later))
    c.apply("Pod", "ADDED", f.pod("x-0", group="x", cpu="1", created=later))
    c.apply(
        "PodGroup",
        "ADDED",
        f.podgroup(
            "y",
            phase="Inqueue",
            created="2026-01-03T00:00:00Z",
            annotations={"tephra.io/running-estimate": "10m"},
        ),
    )
    c.apply("Pod", "ADDED", f.pod("y-0", group="y", cpu="1", created="2026-01-03T00:00:00Z"))
    d = run_session(c, conf, now=NOW)
    assert [(b.name, b.node) for b in d.binds] == [("y-0", "n1")]
    assert "reserved for gang default/g" in d.pending_reasons["default/x"].message


def test_a_podgroup_without_queue_goes_to_the_configured_default_queue() -> None:
    """docs/volcano-semantics.md#default-queue: the scheduler maps an empty PodGroup queue to
    --default-queue."""
    c = ClusterCache(default_queue="batch")
    c.apply("Queue", "ADDED", f.queue("root"))
    c.apply("Queue", "ADDED", f.queue("batch"))
    c.apply("Node", "ADDED", f.node("n0"))
    pg = f.podgroup("j", phase="Inqueue")
    del pg["spec"]["queue"]
    c.apply("PodGroup", "ADDED", pg)
    c.apply("Pod", "ADDED", f.pod("j-0", group="j"))
    assert c.jobs["default/j"].queue == "batch"
    d = run_session(c, HELM, now=NOW)
    assert [b.name for b in d.binds] == ["j-0"]


def test_required_pod_affinity_counts_pods_matching_all_terms() -> None:
    """kube-scheduler's InterPodAffinity: only existing pods matching every required term
    count, and the first-pod exception needs that no pod matches them all *and* the pod
    matches all its own terms. web-0 wants role=db and tier=web in its zone: the pod in zone a
    matches one term only and web-0 itself only the other, so web-0 stays pending — until a pod
    matching both runs in zone b."""
    c = cluster(0)
    for n, zone in (("n0", "a"), ("n1", "b")):
        c.apply("Node", "ADDED", f.node(n, labels={"kubernetes.io/hostname": n, "zone": zone}))

    def other(name: str, node: str, labels: dict[str, str]) -> dict[str, Any]:
        return f.pod(
            name, node_name=node, phase="Running", scheduler="default-scheduler", labels=labels
        )

    c.apply("Pod", "ADDED", other("db", "n0", {"role": "db"}))
    terms = [
        {"labelSelector": {"matchLabels": labels}, "topologyKey": "zone"}
        for labels in ({"role": "db"}, {"tier": "web"})
    ]
    required = {"requiredDuringSchedulingIgnoredDuringExecution": terms}
    c.apply("PodGroup", "ADDED", f.podgroup("web", phase="Inqueue"))
    c.apply(
        "Pod",
        "ADDED",
        f.pod(
            "web-0",
            group="web",
            labels={"tier": "web"},
            spec={"affinity": {"podAffinity": required}},
        ),
    )
    d = run_session(c, HELM, now=NOW)
    assert d.binds == []
    assert "pod affinity" in d.pending_reasons["default/web"].message
    c.apply("Pod", "ADDED", other("both", "n1", {"role": "db", "tier": "web"}))
    d = run_session(c, HELM, now=NOW)
    assert [(b.name, b.node) for b in d.binds] == [("web-0", "n1")]
