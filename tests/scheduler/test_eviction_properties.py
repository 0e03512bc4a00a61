"""Property tests: evictions converge; reclaim never takes a queue below its guarantee."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.scheduler import TEPHRA_DEFAULT_CONFIG, Decisions, load_config, run_session

from .evict_util import EVICT_CONF, pending, priorities, running, settle
from .util import NOW

#: Tephra's default without the minimum runtime, so only priority, gang and share hysteresis
#: stand between the scheduler and an eviction loop
NO_MIN_RUNTIME = load_config(TEPHRA_DEFAULT_CONFIG.replace("MinRuntime: 5m", "MinRuntime: 0s"))
TEPHRA = load_config(TEPHRA_DEFAULT_CONFIG)
VOLCANO_RECLAIM = load_config(EVICT_CONF.replace("preempt, reclaim", "reclaim"))

job_st = st.tuples(
    st.sampled_from(["qa", "qb"]),
    st.sampled_from([None, "low", "high"]),
    st.integers(1, 6),  # pods
    st.integers(1, 3),  # cpu per pod
)


def build(running_jobs: list[Any], pending_jobs: list[Any], guarantee: int) -> ClusterCache:
    c = ClusterCache()
    priorities(c)
    c.apply("Queue", "ADDED", f.queue("default"))
    c.apply(
        "Queue", "ADDED", f.queue("qa", guarantee={"cpu": str(guarantee)} if guarantee else None)
    )
    c.apply("Queue", "ADDED", f.queue("qb"))
    for i in range(4):
        c.apply("Node", "ADDED", f.node(f"n{i}", cpu="6"))
    free = [6] * 4
    for k, (q, prio, pods, cpu) in enumerate(running_jobs):
        where = []
        for _ in range(pods):
            i = max(range(4), key=lambda n: free[n])
            if free[i] < cpu:
                break
            free[i] -= cpu
            where.append(f"n{i}")
        if where:
            running(
                c,
                f"r{k}",
                where,
                queue=q,
                priority_class=prio,
                cpu=str(cpu),
                min_member=max(1, len(where) // 2),
            )
    for k, (q, prio, pods, cpu) in enumerate(pending_jobs):
        pending(
            c,
            f"p{k}",
            pods,
            queue=q,
            priority_class=prio,
            cpu=str(cpu),
            min_member=max(1, pods - 1),
        )
    return c


def causes(d: Decisions) -> set[tuple[str, str]]:
    """(victim job, beneficiary job) of each eviction, as the decisions record them (the
    events' wording names workloads as users know them, not PodGroup ids)."""
    return {(e.job_id, e.beneficiary) for e in d.evictions if e.beneficiary}


def recreate(c: ClusterCache, d: Decisions, cycle: int) -> None:
    """The job controller recreates evicted pods (new uid, Pending) once they are gone."""
    for e in d.evictions:
        t = c.tasks.get(e.uid)
        assert t is not None and t.raw is not None
        raw: dict[str, Any] = {**t.raw}
        meta = {**raw["metadata"], "uid": f"{e.uid}-r{cycle}", "name": f"{e.name}-r{cycle}"}
        spec = {k: v for k, v in raw["spec"].items() if k != "nodeName"}
        c.apply(
            "Pod", "ADDED", {**raw, "metadata": meta, "spec": spec, "status": {"phase": "Pending"}}
        )


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    running_jobs=st.lists(job_st, min_size=1, max_size=6),
    pending_jobs=st.lists(job_st, min_size=1, max_size=4),
)
def test_evictions_converge(running_jobs: list[Any], pending_jobs: list[Any]) -> None:
    c = build(running_jobs, pending_jobs, 0)
    seen: dict[tuple[str, str], int] = {}
    for cycle in range(8):
        d = run_session(c, NO_MIN_RUNTIME, now=NOW + cycle)
        for pair in causes(d):
            assert pair not in seen, f"{pair} evicted again in cycle {cycle} (first {seen[pair]})"
            seen[pair] = cycle
        recreate(c, d, cycle)
        settle(c, d)
    # and once nothing changes any more, nothing is evicted
    d = run_session(c, NO_MIN_RUNTIME, now=NOW + 100)
    d2 = run_session(c, NO_MIN_RUNTIME, now=NOW + 100)
    assert {e.uid for e in d.evictions} == {e.uid for e in d2.evictions}


def queue_cpu(c: ClusterCache, queue: str, d: Decisions | None = None) -> int:
    """CPU the queue holds: its running pods, less those the session reclaims, plus those it
    binds (a queue's allocation, as the reclaim guard counts it, includes the session's own)."""
    cpu = c.resources.get("cpu")
    assert cpu is not None
    gone = {e.uid for e in d.evictions if e.reason == "reclaim"} if d is not None else set()
    bound = {b.uid for b in d.binds} if d is not None else set()
    total = 0
    for job in c.jobs.values():
        if job.queue != queue:
            continue
        for t in job.tasks.values():
            running = t.node_name and t.status.name == "RUNNING" and t.uid not in gone
            if running or t.uid in bound:
                total += int(t.req[cpu])
    return total


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    running_jobs=st.lists(job_st, min_size=1, max_size=6),
    pending_jobs=st.lists(job_st, min_size=1, max_size=4),
    guarantee=st.integers(0, 12),
)
def test_reclaim_never_takes_a_queue_below_its_guarantee(
    running_jobs: list[Any], pending_jobs: list[Any], guarantee: int
) -> None:
    for conf in (TEPHRA, VOLCANO_RECLAIM):
        c = build(running_jobs, pending_jobs, guarantee)
        before = queue_cpu(c, "qa")
        d = run_session(c, conf, now=NOW)
        after = queue_cpu(c, "qa", d)
        assert after >= min(before, guarantee * 1000)
