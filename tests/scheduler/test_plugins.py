"""drf, overcommit, sla, capacity, hierarchical drf, nodeorder/binpack and sampling."""

from __future__ import annotations

import numpy as np

from batch.model import fixtures as f
from batch.scheduler import load_config
from batch.scheduler.cycle import open_session
from batch.scheduler.plugins.capacity import CapacityPlugin

from .util import NOW, bound_jobs, cluster, gang, run


def test_drf_orders_smaller_dominant_share_first() -> None:
    c = cluster(1, cpu="10", memory="100Gi")
    # job a already holds 4 cpu (40%); b holds 10Gi (10%) -> b goes first for the last slot
    for name, cpu, mem in (("a", "4", "1Gi"), ("b", "1", "10Gi")):
        c.apply("PodGroup", "ADDED", f.podgroup(name, phase="Running", min_member=1))
        c.apply(
            "Pod",
            "ADDED",
            f.pod(f"{name}-run", group=name, cpu=cpu, memory=mem, node_name="n0", phase="Running"),
        )
        c.apply("Pod", "ADDED", f.pod(f"{name}-new", group=name, cpu="5", memory="1Gi"))
    conf = "actions: allocate\ntiers: [{plugins: [{name: gang}, {name: drf}, {name: predicates}]}]"
    d = run(c, conf)
    assert [b.name for b in d.binds] == ["b-new"]


def test_overcommit_factor_gates_enqueue() -> None:
    c = cluster(1, cpu="10")
    gang(c, "a", 1, phase="Pending", min_resources={"cpu": "7"}, cpu="7")
    gang(
        c,
        "b",
        1,
        phase="Pending",
        min_resources={"cpu": "5"},
        cpu="5",
        created="2026-01-02T00:00:00Z",
    )
    conf = "actions: enqueue\ntiers: [{plugins: [{name: overcommit}]}]"
    d = run(c, conf)
    # 7 + 5 = 12 <= 10 * 1.2: both admitted
    assert d.podgroup_status[("default", "b")]["phase"] == "Inqueue"
    conf2 = (
        "actions: enqueue\ntiers: [{plugins: [{name: overcommit, arguments: "
        "{overcommit-factor: 1.1}}]}]"
    )
    d2 = run(c, conf2)
    assert d2.podgroup_status[("default", "a")]["phase"] == "Inqueue"
    assert d2.podgroup_status[("default", "b")]["phase"] == "Pending"
    assert "overused" in d2.pending_reasons["default/b"].message
    assert any(e.message == "resource in cluster is overused" for e in d2.events)
    conf3 = (
        "actions: enqueue\ntiers: [{plugins: [{name: overcommit, arguments: "
        "{overcommit-factor: 0.5}}]}]"
    )  # < 1 resets to 1.2
    assert run(c, conf3).podgroup_status[("default", "b")]["phase"] == "Inqueue"


def test_sla_permit_overrides_later_rejection_after_waiting_time() -> None:
    c = cluster(1, cpu="10")
    c.apply("PodGroup", "ADDED", f.podgroup("busy", phase="Running"))
    c.apply("Pod", "ADDED", f.pod("busy-0", group="busy", cpu="4", node_name="n0", phase="Running"))
    # 10 cpu fit the node but not overcommit's budget (12 - 4 in use): rejected until the sla
    gang(c, "late", 1, phase="Pending", min_resources={"cpu": "10"}, created="2026-01-01T00:00:00Z")
    c.apply(
        "PodGroup",
        "MODIFIED",
        f.podgroup(
            "late",
            phase="Pending",
            min_resources={"cpu": "10"},
            annotations={"volcano.sh/sla-waiting-time": "1h"},
            created="2026-01-01T00:00:00Z",
        ),
    )
    conf = (
        "actions: enqueue\ntiers: [{plugins: [{name: sla}]}, "
        "{plugins: [{name: overcommit}, {name: proportion}]}]"
    )
    created = 1767225600.0  # 2026-01-01T00:00:00Z
    before = run(c, conf, now=created + 1800)
    assert before.podgroup_status[("default", "late")]["phase"] == "Pending"
    after = run(c, conf, now=created + 3601)
    assert after.podgroup_status[("default", "late")]["phase"] == "Inqueue"


def test_sla_job_order_deadline_first() -> None:
    c = cluster(1, cpu="1")
    gang(c, "plain", 1, cpu="1", created="2026-01-01T00:00:00Z")
    c.apply(
        "PodGroup",
        "ADDED",
        f.podgroup(
            "urgent",
            phase="Inqueue",
            annotations={"volcano.sh/sla-waiting-time": "10m"},
            created="2026-01-02T00:00:00Z",
        ),
    )
    c.apply("Pod", "ADDED", f.pod("urgent-0", group="urgent", cpu="1"))
    conf = "actions: allocate\ntiers: [{plugins: [{name: sla}, {name: gang}, {name: predicates}]}]"
    assert bound_jobs(run(c, conf)) == {"default/urgent": 1}


CAP = (
    "actions: enqueue, allocate\ntiers: [{plugins: [{name: gang}, {name: predicates}, "
    "{name: capacity}]}]"
)


def test_capacity_flat_capability_not_deserved_limits_allocation() -> None:
    c = cluster(2, cpu="8", queues=())
    c.apply("Queue", "ADDED", f.queue("qa", deserved={"cpu": "4"}, capability={"cpu": "6"}))
    c.apply("Queue", "ADDED", f.queue("qb", deserved={"cpu": "12"}))
    gang(c, "a", 8, min_member=1, queue="qa", cpu="1")
    gang(c, "b", 3, queue="qb", cpu="1")
    d = run(c, CAP)
    got = bound_jobs(d)
    assert got["default/a"] == 6  # beyond deserved up to capability
    assert got["default/b"] == 3
    qa = d.queue_metrics["qa"]  # the figures the volcano_queue_* gauges export
    assert qa.amounts(qa.deserved)["cpu"] == 4000 and qa.amounts(qa.real_capacity)["cpu"] == 6000
    assert qa.request is None and qa.share == 1.5 and qa.overused
    ssn = open_session(c, load_config(CAP), now=NOW)
    plugin = next(p for p in ssn.plugins if isinstance(p, CapacityPlugin))
    cpu = c.resources.index("cpu")
    assert plugin.attrs["qa"].deserved[cpu] == 4000
    assert plugin.attrs["qa"].real_capability[cpu] == 6000
    ssn.rollback()


def test_capacity_hierarchy_walks_ancestors() -> None:
    c = cluster(2, cpu="8", queues=())
    c.apply("Queue", "ADDED", f.queue("eng", capability={"cpu": "5"}))
    c.apply("Queue", "ADDED", f.queue("eng-a", parent="eng"))
    c.apply("Queue", "ADDED", f.queue("eng-b", parent="eng"))
    gang(c, "a", 4, min_member=1, queue="eng-a", cpu="1")
    gang(c, "b", 4, min_member=1, queue="eng-b", cpu="1")
    conf = (
        "actions: allocate\ntiers: [{plugins: [{name: gang}, {name: predicates}, "
        "{name: capacity, enableHierarchy: true}]}]"
    )
    d = run(c, conf)
    assert sum(bound_jobs(d).values()) == 5  # eng's capability caps both children together
    # a job in a non-leaf queue makes the plugin refuse the session
    gang(c, "bad", 1, queue="eng", cpu="1")
    d2 = run(c, conf)
    assert not d2.binds


def test_hierarchical_drf_orders_queues_by_weighted_share() -> None:
    c = cluster(1, cpu="10", queues=())
    for q, path, w in (("qa", "root/a", "1/1"), ("qb", "root/b", "1/4")):
        c.apply(
            "Queue",
            "ADDED",
            f.queue(
                q, annotations={"volcano.sh/hierarchy": path, "volcano.sh/hierarchy-weights": w}
            ),
        )
        c.apply("PodGroup", "ADDED", f.podgroup(f"run-{q}", queue=q, phase="Running"))
        c.apply(
            "Pod",
            "ADDED",
            f.pod(
                f"run-{q}", group=f"run-{q}", cpu="2", memory=None, node_name="n0", phase="Running"
            ),
        )
        gang(c, f"new-{q}", 1, queue=q, cpu="1", memory=None)
    conf = (
        "actions: allocate\ntiers: [{plugins: [{name: gang}, {name: predicates}, "
        "{name: drf, enableHierarchy: true}]}]"
    )
    ssn = open_session(c, load_config(conf), now=NOW)
    key = ssn.dispatch.queue_order_key()
    order = sorted((ssn.queues["qa"], ssn.queues["qb"]), key=key)
    assert [q.name for q in order] == ["qb", "qa"]  # same share, qb has 4x the weight
    ssn.rollback()


def test_binpack_packs_and_least_requested_spreads() -> None:
    pack = (
        "actions: allocate\ntiers: [{plugins: [{name: gang}, {name: predicates}, {name: binpack}]}]"
    )
    spread = (
        "actions: allocate\ntiers: [{plugins: [{name: gang}, {name: predicates}, "
        "{name: nodeorder}]}]"
    )
    c = cluster(3, cpu="8")
    gang(c, "g", 3, cpu="2")
    assert len({b.node for b in run(c, pack).binds}) == 1
    assert len({b.node for b in run(c, spread).binds}) == 3


def test_preferred_affinity_and_prefer_no_schedule() -> None:
    c = cluster(0)
    c.apply("Node", "ADDED", f.node("plain", labels={"disk": "hdd"}))
    c.apply("Node", "ADDED", f.node("ssd", labels={"disk": "ssd"}))
    c.apply(
        "Node",
        "ADDED",
        f.node(
            "soft",
            labels={"disk": "ssd"},
            taints=[{"key": "spot", "value": "yes", "effect": "PreferNoSchedule"}],
        ),
    )
    pref = {
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 50,
                        "preference": {
                            "matchExpressions": [
                                {"key": "disk", "operator": "In", "values": ["ssd"]}
                            ]
                        },
                    }
                ]
            }
        }
    }
    gang(c, "g", 1, spec=pref)
    conf = (
        "actions: allocate\ntiers: [{plugins: [{name: gang}, {name: predicates}, "
        "{name: nodeorder}]}]"
    )
    assert run(c, conf).binds[0].node == "ssd"


def test_scalar_and_vector_scores_agree() -> None:
    rng = np.random.default_rng(3)
    c = cluster(0)
    for i in range(40):
        c.apply(
            "Node",
            "ADDED",
            f.node(
                f"n{i}",
                cpu=str(int(rng.integers(1, 64))),
                memory=f"{int(rng.integers(1, 256))}Gi",
                gpu=8,
            ),
        )
        c.apply(
            "Pod",
            "ADDED",
            f.pod(
                f"r{i}",
                node_name=f"n{i}",
                phase="Running",
                cpu=f"{int(rng.integers(0, 900))}m",
                memory=f"{int(rng.integers(0, 900))}Mi",
                scheduler="default-scheduler",
            ),
        )
    gang(c, "g", 1, cpu="700m", memory="3Gi", gpu=1)
    cfg = load_config(
        "actions: allocate\ntiers: [{plugins: [{name: predicates}, {name: nodeorder, "
        "arguments: {mostrequested.weight: 2}}, {name: binpack, arguments: "
        "{binpack.resources: nvidia.com/gpu}}]}]"
    )
    ssn = open_session(c, cfg, now=NOW)
    placer = ssn.placer
    task = next(iter(ssn.jobs["default/g"].tasks.values()))
    st = placer.state(task.template)
    vec = placer._scores(st, slice(None)).copy()
    m_idle = st.m_idle.copy()
    for i in range(ssn.nodes.n):
        placer._one(st, i)  # the per-placement scalar path
        assert st.score[i] == vec[i], i
        assert st.m_idle[i] == m_idle[i], i
    part = placer._scores(st, np.arange(ssn.nodes.n))
    assert np.array_equal(part, vec)
    ssn.rollback()


def test_node_sampling_knobs_limit_candidates() -> None:
    c = cluster(300, cpu="8")
    gang(c, "g", 1, cpu="1")
    sampled = (
        "actions: allocate\ntiers: [{plugins: [{name: gang}, {name: predicates}, "
        "{name: binpack}]}]\nconfigurations: [{name: allocate, arguments: "
        "{minNodesToFind: 10, percentageOfNodesToFind: 2}}]"
    )
    d = run(c, sampled)
    assert len(d.binds) == 1
    cfg = load_config(sampled)
    ssn = open_session(c, cfg, now=NOW)
    from batch.scheduler.actions.allocate import Allocate

    ssn.placer.sample = Allocate(cfg.action_arguments("allocate")).sample
    assert ssn.placer._num_to_find(300) == 10
    assert ssn.placer._num_to_find(5) == 5
    ssn.placer.sample = (100, 5, 0)
    assert ssn.placer._num_to_find(10000) == 500  # kube adaptive: max(5, 50 - 10000/125) %
    ssn.rollback()


def test_overcommit_reason_gives_the_figures() -> None:
    """Issue 15, item 6: "5/0 tasks in gang unschedulable ... exceed 1.2 x cluster capacity
    minus used" said neither how much was asked nor what the cluster has."""
    c = cluster(4, cpu="64", memory="256Gi", gpu=8)  # 32 GPUs
    c.apply("PodGroup", "ADDED", f.podgroup("running", phase="Running"))
    for i in range(2):
        running = f.pod(f"running-{i}", group="running", gpu=8, node_name=f"n{i}", phase="Running")
        c.apply("Pod", "ADDED", running)
    c.apply(
        "PodGroup",
        "ADDED",
        f.podgroup("big", min_member=3, phase="Pending", min_resources={"nvidia.com/gpu": "24"}),
    )
    conf = "actions: enqueue\ntiers: [{plugins: [{name: gang}, {name: overcommit}]}]"
    d = run(c, conf)
    reason = d.pending_reasons["default/big"]
    assert reason.message == (
        "resource in cluster is overused: needs 24 nvidia.com/gpu; cluster has 32, 38.4 with "
        "overcommit factor 1.2; 16 in use"
    )
    assert reason.details["resources"]["nvidia.com/gpu"] == {
        "needs": 24000,
        "admitted": 0,
        "capacity": 32000,
        "overcommitted": 38400,
        "used": 16000,
    }
    [cond] = d.podgroup_status[("default", "big")]["conditions"]
    # the gang's pods do not exist before admission: the gang counts minMember tasks, not 0
    assert cond["message"].startswith("3/3 tasks in gang unschedulable: resource in cluster")


def test_a_gang_that_becomes_ready_turns_its_unschedulable_condition_false() -> None:
    """Issue 34.4: an operator's PodGroup is admitted before its pods exist (Unschedulable
    True, "3/3 tasks in gang unschedulable"); once its pods are placed it is Scheduled, and
    the Unschedulable condition turns False, never True beside Scheduled True."""
    c = cluster(1)
    c.apply("PodGroup", "ADDED", f.podgroup("op", min_member=3, phase="Inqueue"))
    first = run(c)
    status = first.podgroup_status[("default", "op")]
    [cond] = status["conditions"]
    assert (cond["type"], cond["status"]) == ("Unschedulable", "True")
    stored = f.podgroup("op", min_member=3, phase="Inqueue")
    stored["status"] = status
    c.apply("PodGroup", "MODIFIED", stored)
    for i in range(3):
        c.apply("Pod", "ADDED", f.pod(f"op-{i}", group="op"))
    second = run(c)
    assert len(second.binds) == 3
    conds = {c["type"]: c for c in second.podgroup_status[("default", "op")]["conditions"]}
    assert conds["Scheduled"]["status"] == "True"
    assert conds["Unschedulable"]["status"] == "False"
