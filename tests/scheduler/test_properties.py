"""Property tests over random clusters and workloads (hypothesis).

For every generated cluster and every configuration: no partial gang is bound, no node is
over-committed, no queue exceeds its capability, every job left short of its gang has a pending
reason, and the cycle is deterministic for the same input (and leaves the cache unchanged).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.model.status import READY_STATUS
from batch.scheduler import TEPHRA_DEFAULT_CONFIG, apply_decisions, load_config, run_session

CONFIGS = [
    load_config(TEPHRA_DEFAULT_CONFIG),
    load_config(
        "actions: enqueue, allocate, backfill\ntiers:\n- plugins: [{name: priority}, "
        "{name: gang}, {name: conformance}, {name: sla}]\n- plugins: [{name: overcommit}, "
        "{name: drf}, {name: predicates}, {name: capacity}, {name: nodeorder}, {name: binpack}]"
    ),
]
NOW = 1_800_000_000.0

nodes_st = st.lists(
    st.tuples(
        st.integers(1, 8),  # cpu
        st.integers(0, 4),  # gpu
        st.booleans(),  # tainted
        st.integers(2, 12),  # max pods
    ),
    min_size=1,
    max_size=6,
)
jobs_st = st.lists(
    st.tuples(
        st.integers(1, 5),  # tasks
        st.integers(1, 5),  # min member (clamped to tasks + 1 at most)
        st.integers(0, 3),  # cpu per task (0 = best effort)
        st.integers(0, 2),  # gpu per task
        st.integers(0, 2),  # queue index
        st.booleans(),  # pending (needs enqueue) or inqueue
        st.booleans(),  # with minResources
        st.booleans(),  # tolerates the taint
    ),
    min_size=1,
    max_size=7,
)
queues_st = st.lists(
    st.tuples(st.integers(1, 4), st.one_of(st.none(), st.integers(1, 10))),
    min_size=3,
    max_size=3,
)


def build(nodes: list[Any], jobs: list[Any], queues: list[Any]) -> ClusterCache:
    c = ClusterCache()
    c.apply("Queue", "ADDED", f.queue("root"))
    for i, (w, cap) in enumerate(queues):
        capability = {"cpu": str(cap)} if cap is not None else None
        c.apply(
            "Queue",
            "ADDED",
            f.queue(f"q{i}", weight=w, capability=capability, deserved={"cpu": str(cap or 4)}),
        )
    for i, (cpu, gpu, tainted, pods) in enumerate(nodes):
        taints = [{"key": "t", "value": "v", "effect": "NoSchedule"}] if tainted else None
        c.apply("Node", "ADDED", f.node(f"n{i}", cpu=str(cpu), gpu=gpu, pods=pods, taints=taints))
    for j, (n, mm_raw, cpu, gpu, qi, pending, minres, tol) in enumerate(jobs):
        mm = min(mm_raw, n + 1)
        mr = {"cpu": str(cpu * mm)} if (minres and cpu) else None
        c.apply(
            "PodGroup",
            "ADDED",
            f.podgroup(
                f"j{j}",
                min_member=mm,
                queue=f"q{qi}",
                phase="Pending" if pending else "Inqueue",
                min_resources=mr,
                created=f"2026-01-01T00:00:{j:02d}Z",
            ),
        )
        spec = {"tolerations": [{"key": "t", "operator": "Exists"}]} if tol else None
        for t in range(n):
            c.apply(
                "Pod",
                "ADDED",
                f.pod(
                    f"j{j}-{t}",
                    group=f"j{j}",
                    cpu=str(cpu) if cpu else None,
                    memory="1Gi" if cpu else None,
                    gpu=gpu or None,
                    spec=spec,
                    created=f"2026-01-01T00:00:{j:02d}Z",
                ),
            )
    return c


def snapshot(c: ClusterCache) -> tuple[Any, ...]:
    return (
        c.nodes.used.copy(),
        sorted((u, int(t.status), t.node_name) for u, t in c.tasks.items()),
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=nodes_st, jobs=jobs_st, queues=queues_st)
def test_failed_attempt_memo_is_exact(nodes: list[Any], jobs: list[Any], queues: list[Any]) -> None:
    from batch.scheduler.actions.allocate import Allocate

    c = build(nodes, jobs, queues)
    with_memo = run_session(c, CONFIGS[0], now=NOW)
    Allocate.use_memo = False
    try:
        without = run_session(c, CONFIGS[0], now=NOW)
    finally:
        Allocate.use_memo = True
    assert with_memo.binds == without.binds and with_memo.pipelines == without.pipelines
    assert with_memo.podgroup_status == without.podgroup_status
    assert {k: (v.kind, v.message, v.short_by) for k, v in with_memo.pending_reasons.items()} == {
        k: (v.kind, v.message, v.short_by) for k, v in without.pending_reasons.items()
    }


@settings(max_examples=70, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=nodes_st, jobs=jobs_st, queues=queues_st, which=st.integers(0, 1))
def test_cycle_invariants(nodes: list[Any], jobs: list[Any], queues: list[Any], which: int) -> None:
    cfg = CONFIGS[which]
    c = build(nodes, jobs, queues)
    before = snapshot(c)
    d = run_session(c, cfg, now=NOW)
    after = snapshot(c)
    assert np.array_equal(before[0], after[0]) and before[1] == after[1]
    d2 = run_session(c, cfg, now=NOW)
    assert d.binds == d2.binds and d.pipelines == d2.pipelines
    assert d.podgroup_status == d2.podgroup_status
    assert {k: (v.kind, v.message) for k, v in d.pending_reasons.items()} == {
        k: (v.kind, v.message) for k, v in d2.pending_reasons.items()
    }
    binds: dict[str, int] = {}
    for b in d.binds:
        binds[b.job_id] = binds.get(b.job_id, 0) + 1
    apply_decisions(c, d)
    # no partial gang: every job that got binds is ready (counting pending best-effort pods)
    for job_id, n in binds.items():
        job = c.jobs[job_id]
        ready = sum(job.counts[s] for s in READY_STATUS)
        assert ready + job.pending_best_effort >= job.min_available, (job_id, n)
    # no node over-committed
    n = c.nodes
    k = n.count
    assert (n.used[:, :k] <= n.alloc[:, :k]).all()
    # no queue above its capability
    cpu = c.resources.index("cpu")
    for i, (_, cap) in enumerate(queues):
        if cap is None:
            continue
        alloc = sum(int(j.allocated[cpu]) for j in c.jobs.values() if j.queue == f"q{i}")
        assert alloc <= cap * 1000
    # every job short of its gang has a reason
    for job in c.jobs.values():
        ready = sum(job.counts[s] for s in READY_STATUS) + job.pending_best_effort
        if ready < job.min_available:
            assert job.uid in d.pending_reasons, job.uid
            assert d.pending_reasons[job.uid].message
