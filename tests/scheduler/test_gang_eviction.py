"""gangpreempt and gangreclaim: whole-gang victim selection
(docs/volcano-semantics.md#gang-eviction)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.scheduler import ConfigError, Decisions, Scheduler, load_config

from .evict_util import evicted_jobs, pending, priorities, running
from .util import NOW, cluster, run, stamp

TIERS = """
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
"""
GANG_PREEMPT = 'actions: "enqueue, allocate, gangpreempt"\n' + TIERS
GANG_RECLAIM = 'actions: "enqueue, allocate, gangreclaim"\n' + TIERS
BOTH = 'actions: "enqueue, allocate, backfill, gangreclaim, gangpreempt"\n' + TIERS


def test_a_configuration_naming_the_gang_actions_is_accepted() -> None:
    cfg = load_config(
        BOTH
        + """
configurations:
- name: gangpreempt
  arguments: {maxDomains: 4, allowWholeBundle: false}
- name: gangreclaim
  arguments: {maxDomains: 0}
"""
    )
    assert cfg.actions == ("enqueue", "allocate", "backfill", "gangreclaim", "gangpreempt")


def test_volcanos_gang_eviction_e2e_configuration_loads() -> None:
    load_config(
        """
actions: "allocate, backfill, gangreclaim, gangpreempt"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
  - name: sla
  - name: capacity
    enableHierarchy: false
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: nodeorder
  - name: binpack
  - name: network-topology-aware
"""
    )


@pytest.mark.parametrize(
    ("conf", "action", "arguments", "key"),
    [
        (GANG_PREEMPT, "gangpreempt", "{allowWholeBundle: maybe}", "allowWholeBundle"),
        (GANG_PREEMPT, "gangpreempt", "{timeBudgetSeconds: -1}", "timeBudgetSeconds"),
        (GANG_RECLAIM, "gangreclaim", "{reclaimHysteresis: 1.5}", "reclaimHysteresis"),
        (GANG_RECLAIM, "gangreclaim", "{keepVictimQueueAtDeserved: 2}", "keepVictimQueue"),
    ],
)
def test_a_bad_gang_action_argument_names_the_key(
    conf: str, action: str, arguments: str, key: str
) -> None:
    with pytest.raises(ConfigError, match=key):
        load_config(conf + f"configurations:\n- name: {action}\n  arguments: {arguments}\n")


def _two_victims(c: ClusterCache) -> tuple[str, str]:
    """n0: an elastic job with 2 tasks above its minimum; n1: a strict gang of 4."""
    elastic = running(c, "elastic", ["n0"], per_node=4, min_member=2, priority_class="low")
    strict = running(c, "strict", ["n1"], per_node=4, min_member=4, priority_class="low")
    return elastic, strict


def test_surplus_tasks_are_taken_before_any_gang_is_broken() -> None:
    c = cluster(2, cpu="4")
    priorities(c)
    elastic, _ = _two_victims(c)
    high = pending(c, "high", 2, priority_class="high")
    d = run(c, GANG_PREEMPT)
    assert evicted_jobs(d) == {elastic: 2}  # the elastic job keeps its minimum of 2
    assert {e.reason for e in d.evictions} == {"gangpreempt"}
    assert sorted(p.job_id for p in d.pipelines) == [high, high]
    assert any(e.reason == "Preempted" and high in e.message for e in d.events)


def test_a_gang_is_evicted_whole_when_surplus_is_not_enough() -> None:
    c = cluster(2, cpu="4")
    priorities(c)
    elastic, strict = _two_victims(c)
    high = pending(c, "high", 6, priority_class="high")
    d = run(c, GANG_PREEMPT)
    # 2 surplus tasks do not hold 6; breaking a gang costs it all of its tasks, never part
    # the surplus first, then the whole gang that orders last in JobOrder (same priority, share
    # and age: the larger uid); the elastic job keeps its minimum
    assert evicted_jobs(d) == {elastic: 2, strict: 4}
    assert len([p for p in d.pipelines if p.job_id == high]) == 6


def test_allow_whole_bundle_false_never_breaks_a_gang() -> None:
    c = cluster(2, cpu="4")
    priorities(c)
    _two_victims(c)
    pending(c, "high", 6, priority_class="high")
    conf = GANG_PREEMPT + (
        "configurations:\n- name: gangpreempt\n  arguments: {allowWholeBundle: false}\n"
    )
    d = run(c, conf)
    assert not d.evictions and not d.pipelines


def test_gangpreempt_stays_inside_the_queue_and_below_the_preemptors_priority() -> None:
    c = cluster(2, cpu="4", queues=("default", "other"))
    priorities(c)
    running(c, "elsewhere", ["n0"], per_node=4, min_member=1, queue="other", priority_class="low")
    running(c, "peer", ["n1"], per_node=4, min_member=1, priority_class="high")
    pending(c, "high", 2, priority_class="high")
    d = run(c, GANG_PREEMPT)
    assert not d.evictions


def test_gangreclaim_takes_from_other_reclaimable_queues_only() -> None:
    c = cluster(2, cpu="4", queues=("a", "b"))
    c.apply("Queue", "ADDED", f.queue("locked", reclaimable=False))
    b = running(c, "b-gang", ["n0"], per_node=4, min_member=4, queue="b")
    running(c, "locked-gang", ["n1"], per_node=4, min_member=4, queue="locked")
    a = pending(c, "a-job", 2, queue="a")
    d = run(c, GANG_RECLAIM)
    assert evicted_jobs(d) == {b: 4}  # a whole gang, from the reclaimable queue
    assert {e.reason for e in d.evictions} == {"gangreclaim"}
    assert sorted(p.job_id for p in d.pipelines) == [a, a]
    assert any(e.reason == "Reclaimed" and a in e.message for e in d.events)


@pytest.mark.parametrize("keep", [False, True])
def test_gangreclaim_never_takes_from_a_queue_within_its_share(keep: bool) -> None:
    """Issue 34.8: b holds 2 cpus, its whole deserved share (a 2, b 2, locked 4 of 8), the
    unreclaimable queue holds the rest. a's 2-cpu gang is Preemptive but no queue is above its
    share that may give: nothing is evicted, as Volcano reclaims only from a queue whose
    allocated does not fit its deserved (with or without keepVictimQueueAtDeserved)."""
    c = cluster(2, cpu="4", queues=("a", "b"))
    c.apply("Queue", "ADDED", f.queue("locked", reclaimable=False))
    running(c, "b-gang", ["n0"], per_node=2, min_member=2, queue="b")
    running(c, "locked-0", ["n0"], per_node=2, min_member=2, queue="locked")
    running(c, "locked-1", ["n1"], per_node=4, min_member=4, queue="locked")
    pending(c, "a-job", 2, queue="a")
    arg = "{keepVictimQueueAtDeserved: true}" if keep else "{}"
    d = run(c, GANG_RECLAIM + f"configurations:\n- name: gangreclaim\n  arguments: {arg}\n")
    assert evicted_jobs(d) == {}
    assert d.pipelines == []


@pytest.mark.parametrize(
    ("action", "ran_s", "evicted"),
    [
        ("gangreclaim", 86400, True),
        ("gangreclaim", 60, False),
        ("gangpreempt", 86400, True),
        ("gangpreempt", 60, False),
    ],
)
def test_minruntime_guards_the_gang_actions_victims(action: str, ran_s: int, evicted: bool) -> None:
    """minruntime's guard is hard for every evicting action: a gang that started running
    less than its minimum runtime ago is no victim of gangreclaim or gangpreempt either."""
    c = cluster(2, cpu="4", queues=("a", "b"))
    priorities(c)
    queue = "b" if action == "gangreclaim" else "a"
    victim = running(
        c,
        "victim",
        ["n0", "n1"],
        per_node=4,
        min_member=8,
        queue=queue,
        start=stamp(ran_s),
        priority_class="low",
    )
    pending(c, "starving", 2, queue="a", priority_class="high")
    conf = (GANG_RECLAIM if action == "gangreclaim" else GANG_PREEMPT).replace(
        "  - name: conformance\n",
        "  - name: conformance\n  - name: minruntime\n"
        "    arguments: {preemptMinRuntime: 1h, reclaimMinRuntime: 1h}\n",
    )
    d = run(c, conf)
    assert evicted_jobs(d) == ({victim: 8} if evicted else {})


@pytest.mark.parametrize(("ran_h", "evicted"), [(5, True), (20, False)])
def test_reclaim_lost_work_ratio_spares_a_run_longer_than_ratio_times_the_wait(
    ran_h: int, evicted: bool
) -> None:
    """reclaimLostWorkRatio 10, the reclaiming pod has waited 1 h: a victim gang that has run
    5 h may go, one that has run 20 h (more than 10 x 1 h of work lost) may not."""
    c = cluster(2, cpu="4", queues=("a", "b"))
    victim = running(
        c, "victim", ["n0", "n1"], per_node=4, min_member=8, queue="b", start=stamp(ran_h * 3600)
    )
    pending(c, "starving", 2, queue="a", created=stamp(3600))
    conf = GANG_RECLAIM.replace(
        "  - name: conformance\n",
        "  - name: conformance\n  - name: minruntime\n    arguments: {reclaimLostWorkRatio: 10}\n",
    )
    d = run(c, conf)
    assert evicted_jobs(d) == ({victim: 8} if evicted else {})


def test_a_lost_work_ratio_makes_the_cycle_time_sensitive_while_pods_wait() -> None:
    """The bound loosens as a pod waits: ``Scheduler.run_once`` must not reuse a decision made
    when the pod had waited too little (and may, once nothing is pending)."""
    c = cluster(2, cpu="4", queues=("a", "b"))
    running(c, "victim", ["n0", "n1"], per_node=4, min_member=8, queue="b", start=stamp(5 * 3600))
    pending(c, "starving", 2, queue="a", created=stamp(600))
    conf = GANG_RECLAIM.replace(
        "  - name: conformance\n",
        "  - name: conformance\n  - name: minruntime\n    arguments: {reclaimLostWorkRatio: 10}\n",
    )
    sched = Scheduler(c, load_config(conf))
    assert not sched.run_once(NOW).evictions  # waited 10 min: at most 100 min of work lost
    assert sched.run_once(NOW + 3600).evictions  # waited 70 min: 5 h of work may go
    assert sched.memo_hits == 0


def test_a_bad_lost_work_ratio_names_the_key() -> None:
    conf = GANG_RECLAIM.replace(
        "  - name: conformance\n",
        "  - name: conformance\n  - name: minruntime\n    arguments: {preemptLostWorkRatio: -1}\n",
    )
    with pytest.raises(ConfigError, match="preemptLostWorkRatio"):
        load_config(conf)


@pytest.mark.parametrize(("gang", "keep", "evicted"), [(2, True, 1), (4, True, 0), (4, False, 1)])
def test_keep_victim_queue_at_deserved_takes_only_what_is_above_the_share(
    gang: int, keep: bool, evicted: int
) -> None:
    """b (weight 1) holds all 8 cpus, a (weight 1) waits for 2: a deserves 2, b 6. With
    keepVictimQueueAtDeserved a 2-task gang of b may go (b keeps 6), a 4-task one may not (b
    would fall to 4, below its share); without it the 4-task gang goes."""
    c = cluster(2, cpu="4", queues=("a", "b"))
    for i in range(8 // gang):
        nodes = ["n0"] if i < 4 // gang else ["n1"]
        running(c, f"b{i}", nodes, per_node=gang, min_member=gang, queue="b")
    a = pending(c, "a-job", 2, queue="a")
    arg = "{keepVictimQueueAtDeserved: true}" if keep else "{}"
    d = run(c, GANG_RECLAIM + f"configurations:\n- name: gangreclaim\n  arguments: {arg}\n")
    assert sum(1 for _ in evicted_jobs(d)) == evicted
    assert sum(evicted_jobs(d).values()) == evicted * gang
    assert len([p for p in d.pipelines if p.job_id == a]) == (2 if evicted else 0)


def test_what_an_earlier_plan_released_serves_the_next_job_without_new_victims() -> None:
    """Two one-cpu jobs of a starving queue: the first evicts a 4-task gang, the second is
    pipelined on what that gang releases instead of breaking the other gang."""
    c = cluster(2, cpu="4", queues=("a", "b"))
    running(c, "b0", ["n0"], per_node=4, min_member=4, queue="b")
    running(c, "b1", ["n1"], per_node=4, min_member=4, queue="b")
    first = pending(c, "a-first", 1, queue="a")
    second = pending(c, "a-second", 1, queue="a")
    d = run(c, GANG_RECLAIM)
    assert sum(evicted_jobs(d).values()) == 4
    assert sorted(p.job_id for p in d.pipelines) == sorted([first, second])


def test_no_eviction_when_the_whole_gang_cannot_fit() -> None:
    c = cluster(2, cpu="4")
    priorities(c)
    _two_victims(c)
    pending(c, "huge", 9, priority_class="high")  # 9 cpu on an 8-cpu cluster
    d = run(c, GANG_PREEMPT)
    assert not d.evictions and not d.pipelines


def _left_running(c: ClusterCache, d: Decisions) -> dict[str, int]:
    gone = {e.uid for e in d.evictions}
    out: dict[str, int] = {}
    for job in c.jobs.values():
        out[job.uid] = sum(
            1 for t in job.tasks.values() if t.status.name == "RUNNING" and t.uid not in gone
        )
    return out


victim_jobs = st.lists(
    st.tuples(
        st.integers(1, 4),  # running tasks per node (500m each: 4 fill a 2-cpu node)
        st.integers(1, 3),  # nodes
        st.integers(1, 8),  # minMember (capped at the job's size)
        st.sampled_from(["low", "high"]),
        st.sampled_from(["a", "b"]),
    ),
    min_size=1,
    max_size=5,
)


def _with_victims(
    victims: list[tuple[int, int, int, str, str]], start: str = "2026-01-01T00:00:00Z"
) -> ClusterCache:
    """Six 2-cpu nodes, queues a and b, and the running victim jobs drawn by ``victim_jobs``
    (laid out on consecutive nodes)."""
    c = cluster(6, cpu="2", queues=("a", "b"))
    priorities(c)
    node = 0
    for i, (per_node, nodes, min_member, prio, queue) in enumerate(victims):
        names = [f"n{(node + k) % 6}" for k in range(nodes)]
        node += nodes
        running(
            c,
            f"v{i}",
            names,
            per_node=per_node,
            min_member=min(min_member, per_node * nodes),
            priority_class=prio,
            queue=queue,
            cpu="500m",
            start=start,
        )
    return c


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    victims=victim_jobs,
    preemptors=st.lists(
        st.tuples(st.integers(1, 6), st.sampled_from(["a", "b"])), min_size=1, max_size=3
    ),
    allow_whole=st.booleans(),
)
def test_no_partial_gang_is_left_running_after_a_gang_eviction(
    victims: list[tuple[int, int, int, str, str]],
    preemptors: list[tuple[int, str]],
    allow_whole: bool,
) -> None:
    """Volcano's bundles: a victim job keeps its gang minimum or loses all its running tasks,
    and a preemptor gang is pipelined whole or not at all."""
    c = _with_victims(victims)
    for i, (size, queue) in enumerate(preemptors):
        pending(c, f"p{i}", size, priority_class="high", queue=queue)
    conf = BOTH + (
        "configurations:\n"
        f"- name: gangpreempt\n  arguments: {{allowWholeBundle: {str(allow_whole).lower()}}}\n"
        f"- name: gangreclaim\n  arguments: {{allowWholeBundle: {str(allow_whole).lower()}}}\n"
    )
    d = run(c, conf)
    hit = evicted_jobs(d)
    left = _left_running(c, d)
    for job_id in hit:
        job = c.jobs[job_id]
        assert left[job_id] == 0 or left[job_id] >= job.min_available, (job_id, left[job_id])
        if not allow_whole:
            assert left[job_id] >= job.min_available
    pipelined: dict[str, int] = {}
    for p in d.pipelines:
        pipelined[p.job_id] = pipelined.get(p.job_id, 0) + 1
    for job_id, n in pipelined.items():
        assert n >= c.jobs[job_id].min_available


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    victims=victim_jobs,
    preemptors=st.lists(
        st.tuples(st.integers(1, 3), st.sampled_from(["a", "b"]), st.integers(0, 4)),
        min_size=1,
        max_size=6,
    ),
    ran_h=st.integers(1, 8),
)
def test_the_failed_plan_memo_changes_no_decision(
    victims: list[tuple[int, int, int, str, str]],
    preemptors: list[tuple[int, str, int]],
    ran_h: int,
) -> None:
    """Jobs of one queue, shape and priority that waited no longer than one whose plan failed
    are skipped: every eviction and pipeline is the same as planning each of them."""
    from batch.scheduler.actionlib.gang_victims import GangEviction

    def build() -> ClusterCache:
        c = _with_victims(victims, start=stamp(ran_h * 3600))
        for i, (size, queue, waited_h) in enumerate(preemptors):
            pending(
                c,
                f"p{i}",
                size,
                priority_class="high",
                queue=queue,
                created=stamp(waited_h * 3600 + i),
            )
        return c

    conf = BOTH.replace(
        "  - name: conformance\n",
        "  - name: conformance\n  - name: minruntime\n"
        "    arguments: {reclaimLostWorkRatio: 2, preemptLostWorkRatio: 2}\n",
    )
    memo = run(build(), conf)
    GangEviction.use_memo = False
    try:
        plain = run(build(), conf)
    finally:
        GangEviction.use_memo = True
    assert memo.evictions == plain.evictions
    assert memo.pipelines == plain.pipelines


def test_a_topology_gang_is_planned_inside_one_hypernode_domain() -> None:
    from .test_topology import racked

    conf = GANG_PREEMPT.replace(
        "  - name: nodeorder\n", "  - name: nodeorder\n  - name: network-topology-aware\n"
    )
    c = racked(racks=2, per_rack=2, spines=1)
    priorities(c)
    running(c, "r0-job", ["r0n0", "r0n1"], per_node=4, min_member=1, priority_class="low")
    running(c, "r1-job", ["r1n0", "r1n1"], per_node=4, min_member=1, priority_class="low")
    g = pending(
        c,
        "g",
        2,
        cpu="4",
        priority_class="high",
        network_topology={"mode": "hard", "highestTierAllowed": 1},
    )
    assert not run(c, GANG_PREEMPT).evictions  # no topology plugin: no domain for a hard job
    d = run(c, conf)
    evicted_on = {c.tasks[e.uid].node_name[:2] for e in d.evictions}
    pipelined_on = {p.node[:2] for p in d.pipelines if p.job_id == g}
    assert len([p for p in d.pipelines if p.job_id == g]) == 2
    assert len(evicted_on | pipelined_on) == 1  # one rack: victims and the whole gang
