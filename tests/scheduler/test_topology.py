"""network-topology-aware: gangs inside one HyperNode domain (hard/soft, tiers, bin-packing)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings, strategies as st

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.scheduler import Decisions

from .evict_util import pending, running
from .util import NOW, bound_jobs, run

RACK = "topology.tephra.io/rack"
SPINE = "topology.tephra.io/spine"
CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder},
            {name: network-topology-aware}]
"""


def racked(racks: int = 4, per_rack: int = 2, spines: int = 2, cpu: str = "4") -> ClusterCache:
    c = ClusterCache()
    c.apply("Queue", "ADDED", f.queue("default"))
    for r in range(racks):
        for k in range(per_rack):
            name = f"r{r}n{k}"
            labels = {
                "kubernetes.io/hostname": name,
                RACK: f"rack-{r}",
                SPINE: f"spine-{r % spines}",
            }
            c.apply("Node", "ADDED", f.node(name, cpu=cpu, labels=labels))
    return c


def racks_of(c: ClusterCache, d: Decisions, job: str, key: str = RACK) -> set[str]:
    out = set()
    for b in d.binds:
        if b.job_id == job:
            meta = c.nodes.meta[c.nodes.by_name[b.node]]
            assert meta is not None
            out.add(meta.labels[key])
    return out


def test_hard_gang_goes_to_the_fullest_rack_that_fits() -> None:
    c = racked()
    running(c, "busy", ["r1n0"], per_node=1, cpu="1")
    job = pending(c, "g", 3, cpu="2", network_topology={"mode": "hard", "highestTierAllowed": 1})
    d = run(c, CONF)
    assert bound_jobs(d) == {job: 3}
    assert racks_of(c, d, job) == {"rack-1"}


def test_hard_mode_never_spans_two_domains_of_the_allowed_tier() -> None:
    c = racked()
    tier1 = pending(c, "g1", 5, cpu="2", network_topology={"mode": "hard", "highestTierAllowed": 1})
    d = run(c, CONF)
    assert tier1 not in bound_jobs(d)  # 5 x 2 cpu never fit in one 8-cpu rack
    r = d.pending_reasons[tier1]
    assert r.details["networkTopology"] == {"mode": "hard", "highestTier": 1, "hyperNode": None}
    assert "no HyperNode up to tier 1 can hold the job's tasks" in r.message
    c2 = racked()
    tier2 = pending(
        c2, "g2", 5, cpu="2", network_topology={"mode": "hard", "highestTierAllowed": 2}
    )
    d2 = run(c2, CONF)
    assert bound_jobs(d2) == {tier2: 5}
    assert len(racks_of(c2, d2, tier2, SPINE)) == 1
    # highestTierName works like the tier number
    c3 = racked()
    by_name = pending(
        c3, "g3", 5, cpu="2", network_topology={"mode": "hard", "highestTierName": SPINE}
    )
    assert len(racks_of(c3, run(c3, CONF), by_name, SPINE)) == 1


def test_soft_mode_prefers_a_domain_but_may_span() -> None:
    c = racked()
    soft = pending(c, "s", 5, cpu="2", network_topology={"mode": "soft", "highestTierAllowed": 1})
    d = run(c, CONF)
    assert bound_jobs(d) == {soft: 5}
    c2 = racked()
    soft2 = pending(
        c2, "s2", 3, cpu="2", network_topology={"mode": "soft", "highestTierAllowed": 1}
    )
    d2 = run(c2, CONF)
    assert len(racks_of(c2, d2, soft2)) == 1


def hypernode(name: str, tier: int, members: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "members": members},
    }


def test_hypernode_objects_exact_regex_label_and_nested_members() -> None:
    c = ClusterCache()
    c.apply("Queue", "ADDED", f.queue("default"))
    for i in range(6):
        c.apply("Node", "ADDED", f.node(f"node-{i}", cpu="4", labels={"zone": "z" + str(i // 4)}))
    c.apply(
        "HyperNode",
        "ADDED",
        hypernode(
            "s0",
            1,
            [
                {"type": "Node", "selector": {"exactMatch": {"name": "node-0"}}},
                {"type": "Node", "selector": {"exactMatch": {"name": "node-1"}}},
            ],
        ),
    )
    c.apply(
        "HyperNode",
        "ADDED",
        hypernode(
            "s1",
            1,
            [
                {"type": "Node", "selector": {"regexMatch": {"pattern": "node-[23]"}}},
            ],
        ),
    )
    c.apply(
        "HyperNode",
        "ADDED",
        hypernode(
            "s2",
            1,
            [
                {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"zone": "z1"}}}},
            ],
        ),
    )
    c.apply(
        "HyperNode",
        "ADDED",
        hypernode(
            "top",
            2,
            [
                {"type": "HyperNode", "selector": {"regexMatch": {"pattern": "s[01]"}}},
            ],
        ),
    )
    running(c, "busy", ["node-0"], per_node=1, cpu="3")
    # 3 x 2 cpu: s0 has 5 free (2 tasks), s1 8 free, s2 8 free -> s1 or s2 (tier 1)
    g = pending(c, "g", 3, cpu="2", network_topology={"mode": "hard", "highestTierAllowed": 1})
    d = run(c, CONF)
    nodes = {b.node for b in d.binds if b.job_id == g}
    assert len(d.binds) == 3
    assert nodes <= {"node-2", "node-3"} or nodes <= {"node-4", "node-5"}
    # 5 x 2 cpu: only the tier-2 HyperNode "top" (node-0..3, 13 free) can hold it
    c.apply("PodGroup", "DELETED", f.podgroup("g"))
    for i in range(3):
        c.apply("Pod", "DELETED", f.pod(f"g-{i}", group="g"))
    c.apply(
        "HyperNode",
        "ADDED",
        hypernode(
            "s2",
            1,
            [
                {
                    "type": "Node",
                    "selector": {
                        "labelMatch": {
                            "matchExpressions": [
                                {"key": "zone", "operator": "In", "values": ["z1"]}
                            ]
                        }
                    },
                },
            ],
        ),
    )
    g5 = pending(c, "g5", 5, cpu="2", network_topology={"mode": "hard", "highestTierAllowed": 2})
    d = run(c, CONF)
    nodes5 = {b.node for b in d.binds if b.job_id == g5}
    assert nodes5 and nodes5 <= {"node-0", "node-1", "node-2", "node-3"}


def test_hard_job_waits_when_no_domain_exists() -> None:
    c = ClusterCache()
    c.apply("Queue", "ADDED", f.queue("default"))
    c.apply("Node", "ADDED", f.node("plain", cpu="8"))
    g = pending(c, "g", 2, cpu="1", network_topology={"mode": "hard", "highestTierAllowed": 1})
    assert g not in bound_jobs(run(c, CONF))
    soft = pending(c, "s", 2, cpu="1", network_topology={"mode": "soft", "highestTierAllowed": 1})
    assert bound_jobs(run(c, CONF)).get(soft) == 2


@settings(max_examples=25, deadline=None)
@given(
    used=st.lists(st.integers(0, 4), min_size=8, max_size=8),
    sizes=st.lists(st.integers(1, 6), min_size=1, max_size=4),
)
def test_property_hard_tier1_jobs_stay_in_one_rack(used: list[int], sizes: list[int]) -> None:
    c = racked()
    for i, u in enumerate(used):
        if u:
            running(c, f"bg{i}", [f"r{i // 2}n{i % 2}"], per_node=u, cpu="1")
    jobs = [
        pending(c, f"g{k}", s, cpu="1", network_topology={"mode": "hard", "highestTierAllowed": 1})
        for k, s in enumerate(sizes)
    ]
    d = run(c, CONF)
    for j in jobs:
        assert len(racks_of(c, d, j)) <= 1


def test_topology_aware_preemption_frees_one_domain() -> None:
    from .evict_util import evicted_jobs, priorities

    conf = """
actions: "enqueue, allocate, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf, enablePreemptable: false}, {name: predicates}, {name: proportion},
            {name: nodeorder}, {name: network-topology-aware}]
"""
    topo_on = (
        conf
        + """configurations:
- name: preempt
  arguments: {enableTopologyAwarePreemption: true}
"""
    )
    c = racked(racks=2, per_rack=2, spines=1)
    priorities(c)
    low = running(c, "low", ["r0n0", "r0n1", "r1n0", "r1n1"], per_node=4, priority_class="low")
    g = pending(
        c,
        "g",
        2,
        cpu="4",
        priority_class="high",
        network_topology={"mode": "hard", "highestTierAllowed": 1},
    )
    assert not run(c, conf).evictions  # Volcano: jobs with a network topology do not preempt
    d = run(c, topo_on)
    assert evicted_jobs(d) == {low: 8}
    nodes = {c.tasks[e.uid].node_name for e in d.evictions}
    pipes = {p.node for p in d.pipelines if p.job_id == g}
    assert len(pipes) == 2 and {n[:2] for n in nodes | pipes} in ({"r0"}, {"r1"})


def test_kept_auto_domains_follow_node_labels_and_membership() -> None:
    """The plugin keeps its auto domains across sessions while the nodes' labels and
    membership are unchanged; a relabelled, added or removed node gives new ones, as a new
    plugin would build them."""
    from batch.scheduler import Scheduler, load_config
    from batch.scheduler.framework.nodes import SessionNodes
    from batch.scheduler.plugins.network_topology import NetworkTopologyPlugin, auto_domains

    cache = racked(racks=2, per_rack=2)
    sched = Scheduler(cache, load_config(CONF))
    plugin = next(
        p for tier in sched.kit.plugins for p in tier if isinstance(p, NetworkTopologyPlugin)
    )

    def said(domains: list[Any]) -> list[tuple[str, list[bool]]]:
        return [(d.name, d.mask.tolist()) for d in domains]

    def moved_to(rack: str) -> dict[str, Any]:
        labels = {"kubernetes.io/hostname": "r0n0", RACK: rack, SPINE: "spine-0"}
        return f.node("r0n0", cpu="4", labels=labels)

    changes: list[tuple[str, str, dict[str, Any]]] = [
        ("Node", "MODIFIED", moved_to("rack-9")),
        ("Node", "ADDED", f.node("x", cpu="4", labels={RACK: "rack-1", SPINE: "spine-1"})),
        ("Node", "DELETED", f.node("r1n1", cpu="4")),
        ("Node", "MODIFIED", moved_to("rack-0")),
    ]
    for i, change in enumerate([None, *changes]):
        if change is not None:
            cache.apply(*change)
        sched.run_once(NOW + i)
        fresh = sorted(
            auto_domains(plugin.auto_keys, SessionNodes(cache)), key=lambda d: (d.tier, d.name)
        )
        assert said(plugin.domains) == said(fresh), change
