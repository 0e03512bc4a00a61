"""reclaim action: cross-queue fair-share recovery (docs/volcano-semantics.md#reclaim, #proportion)
and its guards."""

from __future__ import annotations

from batch.model import fixtures as f

from .evict_util import EVICT_CONF, STRICT_CONF, evicted_jobs, pending, running
from .util import cluster, run

RECLAIM_ONLY = EVICT_CONF.replace("preempt, reclaim", "reclaim")
#: no proportion: only gang/conformance choose victims, so the guarantee guard is what protects
NO_SHARES = """
actions: "enqueue, allocate, reclaim"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf, enablePreemptable: false}, {name: predicates}, {name: nodeorder}]
"""


def test_reclaim_takes_from_a_queue_above_its_deserved_share() -> None:
    c = cluster(2, cpu="4", queues=("a", "b"))
    b = running(c, "b-elastic", ["n0", "n1"], per_node=4, queue="b")
    a = pending(c, "a-job", 2, cpu="2", queue="a")
    d = run(c, RECLAIM_ONLY)
    assert evicted_jobs(d) == {b: 4}
    assert {e.reason for e in d.evictions} == {"reclaim"}
    assert sorted(p.job_id for p in d.pipelines) == [a, a]
    assert any(e.reason == "Reclaimed" and a in e.message for e in d.events)


def test_non_reclaimable_queue_is_protected() -> None:
    c = cluster(2, cpu="4", queues=("a",))
    c.apply("Queue", "ADDED", f.queue("b", reclaimable=False))
    running(c, "b-elastic", ["n0", "n1"], per_node=4, queue="b")
    pending(c, "a-job", 2, cpu="2", queue="a")
    for conf in (RECLAIM_ONLY, STRICT_CONF, NO_SHARES):
        assert not run(c, conf).evictions


def test_reclaim_never_takes_a_queue_below_its_guarantee() -> None:
    c = cluster(2, cpu="4", queues=("a",))
    c.apply("Queue", "ADDED", f.queue("b", guarantee={"cpu": "6"}))
    b = running(c, "b-elastic", ["n0", "n1"], per_node=4, queue="b")
    # needs 4 cpu: would take b to 4 < its guarantee of 6 -> nothing at all
    pending(c, "a-big", 2, cpu="2", queue="a")
    assert not run(c, NO_SHARES).evictions
    # 2 cpu: b goes down to exactly its guarantee
    c2 = cluster(2, cpu="4", queues=("a",))
    c2.apply("Queue", "ADDED", f.queue("b", guarantee={"cpu": "6"}))
    b = running(c2, "b-elastic", ["n0", "n1"], per_node=4, queue="b")
    pending(c2, "a-small", 1, cpu="2", queue="a")
    d = run(c2, NO_SHARES)
    assert evicted_jobs(d) == {b: 2}


def test_overused_queue_does_not_reclaim() -> None:
    c = cluster(2, cpu="4", queues=("a", "b"))
    running(c, "a-run", ["n0"], per_node=4, queue="a")
    running(c, "b-run", ["n1"], per_node=4, queue="b")
    pending(c, "a-more", 1, cpu="2", queue="a")  # a already holds its deserved 4 cpu
    assert not run(c, RECLAIM_ONLY).evictions


def test_reclaim_does_not_happen_inside_one_queue() -> None:
    c = cluster(2, cpu="4", queues=("a",))
    running(c, "a-run", ["n0", "n1"], per_node=4, queue="a")
    pending(c, "a-new", 1, cpu="2", queue="a")
    assert not run(c, RECLAIM_ONLY).evictions


def test_hysteresis_keeps_the_victim_queue_at_its_deserved_share() -> None:
    c = cluster(2, cpu="4", queues=("a", "b"))
    running(c, "b-big", ["n0", "n1"], per_node=1, cpu="3", queue="b")
    running(c, "b-small", ["n1"], per_node=1, cpu="1", queue="b")
    pending(c, "a-job", 1, cpu="3", queue="a")
    # deserved: a 3 cpu, b 5 cpu; b holds 7. Taking a 3-cpu pod leaves b at 4 < 5.
    volcano = run(c, RECLAIM_ONLY)
    assert evicted_jobs(volcano) == {"default/b-big": 1}
    tephra = run(c, STRICT_CONF.replace("preempt, reclaim", "reclaim"))
    assert not tephra.evictions
    # with 20 % hysteresis the victim queue may end at 0.8 of its deserved share
    loose = STRICT_CONF.replace("preempt, reclaim", "reclaim").replace(
        "keepVictimQueueAtDeserved: true", "keepVictimQueueAtDeserved: true, reclaimHysteresis: 0.2"
    )
    assert evicted_jobs(run(c, loose)) == {"default/b-big": 1}


def test_a_gang_part_idle_part_reclaimed_is_pipelined_whole() -> None:
    c = cluster(0, queues=("a", "b"))
    c.apply("Node", "ADDED", f.node("n0", cpu="2"))  # idle, nobody to evict there
    for n in ("n1", "n2"):
        c.apply("Node", "ADDED", f.node(n, cpu="4"))
    b = running(c, "b-elastic", ["n1", "n2"], per_node=4, queue="b")
    a = pending(c, "a-gang", 2, cpu="2", queue="a")
    # deserved: a 4, b 6 of 10 cpu; b gives 2 cpu on one node, the other task fits n0 as it is
    d = run(c, RECLAIM_ONLY)
    assert evicted_jobs(d) == {b: 2}
    assert sorted(p.job_id for p in d.pipelines) == [a, a]
    assert "n0" in {p.node for p in d.pipelines}
