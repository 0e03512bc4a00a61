"""predicates plugin and the kube-scheduler style "0/N nodes are available" explanations."""

from __future__ import annotations

from typing import Any

import numpy as np

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.model.nodes import BoolVec
from batch.scheduler import load_config
from batch.scheduler.cycle import open_session
from batch.scheduler.plugins.predicates.podaffinity import (
    R_EXISTING_ANTI,
    R_POD_AFFINITY,
    R_POD_ANTI,
    PodAffinity,
)

from .util import NOW, bound_jobs, cluster, gang, run

HOST = "kubernetes.io/hostname"


def only_pod(c: ClusterCache, name: str = "p", **kw: Any) -> str:
    c.apply("PodGroup", "ADDED", f.podgroup(name, phase="Inqueue"))
    c.apply("Pod", "ADDED", f.pod(f"{name}-0", group=name, **kw))
    return f"default/{name}"


def test_issue_example_message_gpu_and_taints() -> None:
    c = cluster(0)
    for i in range(12):
        c.apply("Node", "ADDED", f.node(f"cpu-{i}", cpu="32"))
    for i in range(28):
        c.apply(
            "Node",
            "ADDED",
            f.node(
                f"gpu-{i}",
                cpu="32",
                gpu=8,
                taints=[{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}],
            ),
        )
    job = only_pod(c, gpu=1)
    d = run(c)
    assert d.pending_reasons[job].message == (
        "0/40 nodes are available: 12 Insufficient nvidia.com/gpu, "
        "28 node(s) had untolerated taint {dedicated: ml}."
    )
    assert d.pending_reasons[job].details["fit"] == {
        "Insufficient nvidia.com/gpu": 12,
        "node(s) had untolerated taint {dedicated: ml}": 28,
    }
    # with a toleration it lands on a GPU node
    tol = {
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
        ]
    }
    c2 = cluster(0)
    c2.apply(
        "Node",
        "ADDED",
        f.node(
            "gpu-0", gpu=8, taints=[{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
        ),
    )
    only_pod(c2, gpu=1, spec=tol)
    assert run(c2).binds[0].node == "gpu-0"


def test_node_selector_and_required_affinity() -> None:
    c = cluster(0)
    c.apply("Node", "ADDED", f.node("a", labels={"zone": "z1", "gen": "3"}))
    c.apply("Node", "ADDED", f.node("b", labels={"zone": "z2", "gen": "5"}))
    c.apply("Node", "ADDED", f.node("c", labels={"zone": "z3"}))
    only_pod(c, "sel", spec={"nodeSelector": {"zone": "z2"}})
    aff = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["4"]}]},
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["c"]}
                            ]
                        },
                    ]
                }
            }
        }
    }
    c.apply("PodGroup", "ADDED", f.podgroup("aff", phase="Inqueue", min_member=2))
    for i in range(2):
        c.apply("Pod", "ADDED", f.pod(f"aff-{i}", group="aff", cpu="5", spec=aff))
    notin = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "zone", "operator": "NotIn", "values": ["z1", "z2", "z3"]}
                            ]
                        }
                    ]
                }
            }
        }
    }
    nowhere = only_pod(c, "nowhere", spec=notin)
    d = run(c)
    nodes = {b.name: b.node for b in d.binds}
    assert nodes["sel-0"] == "b"
    assert {nodes["aff-0"], nodes["aff-1"]} == {"b", "c"}
    assert d.pending_reasons[nowhere].message == (
        "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
    )


def test_unschedulable_nodes_pod_count_and_not_ready() -> None:
    c = cluster(0)
    c.apply("Node", "ADDED", f.node("cordoned", unschedulable=True))
    c.apply("Node", "ADDED", f.node("full", pods=0))
    c.apply("Node", "ADDED", f.node("down", ready=False))
    job = only_pod(c)
    d = run(c)
    assert d.pending_reasons[job].message == (
        "0/2 nodes are available: 1 Too many pods, 1 node(s) were unschedulable."
    )
    tol = {
        "tolerations": [
            {
                "key": "node.kubernetes.io/unschedulable",
                "operator": "Exists",
                "effect": "NoSchedule",
            }
        ]
    }
    only_pod(c, "tolerant", spec=tol)
    assert {b.node for b in run(c).binds} == {"cordoned"}


def test_host_ports_conflict_in_session_and_with_existing_pods() -> None:
    c = cluster(2)
    ports = {
        "containers": [
            {
                "name": "m",
                "ports": [{"containerPort": 80, "hostPort": 8080}],
                "resources": {"requests": {"cpu": "100m"}},
            }
        ]
    }
    c.apply("PodGroup", "ADDED", f.podgroup("web", phase="Inqueue", min_member=2))
    for i in range(3):
        c.apply("Pod", "ADDED", f.pod(f"web-{i}", group="web", spec=ports))
    d = run(c)
    assert len(d.binds) == 2 and {b.node for b in d.binds} == {"n0", "n1"}
    assert d.pending_reasons["default/web"].message == (
        "0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod ports."
    )


def anti(label: str, key: str = "kubernetes.io/hostname") -> dict[str, Any]:
    return {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": label}}, "topologyKey": key}
                ]
            }
        }
    }


def test_gang_with_self_anti_affinity_spreads_or_fails_whole() -> None:
    c = cluster(3)
    gang(c, "spread", 3, labels={"app": "s"}, spec=anti("s"))
    d = run(c)
    assert sorted(b.node for b in d.binds) == ["n0", "n1", "n2"]
    c2 = cluster(2)
    gang(c2, "spread", 3, labels={"app": "s"}, spec=anti("s"))
    d2 = run(c2)
    assert not d2.binds
    assert "pod anti-affinity" in d2.pending_reasons["default/spread"].message


def test_pod_affinity_and_existing_pods_anti_affinity() -> None:
    c = cluster(0)
    for i, zone in enumerate(("z1", "z1", "z2")):
        c.apply(
            "Node",
            "ADDED",
            f.node(f"n{i}", labels={"zone": zone, "kubernetes.io/hostname": f"n{i}"}),
        )
    c.apply(
        "Pod",
        "ADDED",
        f.pod(
            "db",
            node_name="n2",
            phase="Running",
            labels={"app": "db"},
            scheduler="default-scheduler",
        ),
    )
    near = {
        "affinity": {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}
                ]
            }
        }
    }
    only_pod(c, "near", spec=near)
    # an existing pod on n0 refuses app=web neighbours on its host
    c.apply(
        "Pod",
        "ADDED",
        f.pod(
            "loner",
            node_name="n0",
            phase="Running",
            scheduler="default-scheduler",
            spec=anti("web"),
        ),
    )
    c.apply("PodGroup", "ADDED", f.podgroup("web", phase="Inqueue", min_member=1))
    c.apply(
        "Pod",
        "ADDED",
        f.pod("web-0", group="web", labels={"app": "web"}, spec={"nodeSelector": {"zone": "z1"}}),
    )
    d = run(c)
    nodes = {b.name: b.node for b in d.binds}
    assert nodes["near-0"] == "n2"
    assert nodes["web-0"] == "n1"


def test_scheduling_gates_hold_pods() -> None:
    c = cluster(1)
    gated = {"schedulingGates": [{"name": "example.com/wait"}]}
    gang(c, "g", 2, spec=gated)
    d = run(c)
    assert not d.binds
    assert d.pending_reasons["default/g"].kind == "SchedulingGated"


def test_extended_resources_fit_in_milli_units() -> None:
    c = cluster(1, gpu=2)
    gang(c, "g", 3, gpu=1, cpu="100m")
    gang(c, "h", 2, gpu=1, cpu="100m")
    d = run(c)
    # the queue's deserved share is the whole cluster (2 GPUs): g's third task exceeds it
    assert bound_jobs(d) == {"default/h": 2}
    r = d.pending_reasons["default/g"]
    assert r.kind == "GangShort" and r.short_by == 1 and r.shortfall == {"nvidia.com/gpu": "1"}
    assert "quota (deserved share) does not allow" in r.message
    # with no queue plugin the same gang is refused by the GPU fit, counted in milli-units
    conf = "actions: allocate\ntiers: [{plugins: [{name: gang}, {name: predicates}]}]"
    d2 = run(c, conf)
    assert "1 Insufficient nvidia.com/gpu" in d2.pending_reasons["default/g"].message


def test_explain_counts_each_node_under_its_first_failing_stage() -> None:
    """Static predicates, then resources (a node short of two resources counts under both),
    then dynamic predicates, then the first failing scalar predicate; a node is counted by the
    first stage that rejects it only."""
    c = cluster(0, queues=("default",))
    c.apply("Node", "ADDED", f.node("n0", cpu="8", memory="32Gi", unschedulable=True))
    c.apply("Node", "ADDED", f.node("n1", cpu="1", memory="4Gi"))
    for n in ("n2", "n3", "n4", "n5"):
        c.apply("Node", "ADDED", f.node(n, cpu="8", memory="32Gi"))
    gang(c, "a", 1, cpu="4", memory="8Gi")
    conf = "actions: allocate\ntiers: [{plugins: [{name: predicates}]}]"
    ssn = open_session(c, load_config(conf), now=NOW)
    placer = ssn.placer
    by_name = placer.nodes.arrays.by_name
    nd = placer.nodes

    def failing(*names: str) -> BoolVec:
        mask = np.zeros(nd.n, dtype=np.bool_)
        for name in names:
            mask[by_name[name]] = True
        return mask

    placer.dyn_preds.append(lambda t, _nd: [("dyn-a", failing("n0", "n2"))])
    placer.dyn_preds.append(lambda t, _nd: [("dyn-b", failing("n2", "n3"))])
    placer.scalar_preds.append(lambda t, i: "s1" if i == by_name["n4"] else None)
    placer.scalar_preds.append(lambda t, i: "s2")
    task = next(iter(ssn.jobs["default/a"].tasks.values()))
    msg, hist = placer.explain(task)
    assert hist == {
        "node(s) were unschedulable": 1,
        "Insufficient cpu": 1,
        "Insufficient memory": 1,
        "dyn-a": 1,
        "dyn-b": 1,
        "s1": 1,
        "s2": 1,
    }
    assert msg == (
        "0/6 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 1 dyn-a, "
        "1 dyn-b, 1 node(s) were unschedulable, 1 s1, 1 s2."
    )
    ssn.rollback()


def test_pod_affinity_filters_first_pod_namespaces_and_symmetry() -> None:
    """The three inter-pod checks' masks: the first pod of a group goes to any node with the
    topology label; a term's namespaces (list, selector, empty selector = all, default own);
    existing pods' anti-affinity applies to the namespaces of *their* term."""
    c = cluster(0)
    c.apply(
        "Namespace",
        "ADDED",
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "other", "labels": {"team": "x"}},
        },
    )
    for name, zone in (("n0", "a"), ("n1", "a"), ("n2", "b"), ("n3", None)):
        labels = {"kubernetes.io/hostname": name} | ({"zone": zone} if zone else {})
        c.apply("Node", "ADDED", f.node(name, labels=labels))

    def running(name: str, node: str, ns: str, spec: dict[str, Any] | None = None) -> None:
        app = name.rstrip("0123456789")
        c.apply(
            "Pod",
            "ADDED",
            f.pod(
                name,
                namespace=ns,
                node_name=node,
                phase="Running",
                scheduler="default-scheduler",
                labels={"app": app},
                spec=spec,
            ),
        )

    def term(app: str, key: str, **extra: Any) -> dict[str, Any]:
        return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key, **extra}

    def affinity(kind: str, *terms: dict[str, Any]) -> dict[str, Any]:
        return {"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}}

    running("db", "n2", "default")
    running("db2", "n1", "other")
    running(
        "guard",
        "n0",
        "other",
        affinity("podAntiAffinity", term("web", "zone", namespaces=["default"])),
    )
    running("guard2", "n2", "other", affinity("podAntiAffinity", term("web", HOST)))
    c.apply("PodGroup", "ADDED", f.podgroup("first", phase="Inqueue"))
    c.apply(
        "Pod",
        "ADDED",
        f.pod(
            "first-0",
            group="first",
            labels={"app": "grp"},
            spec=affinity("podAffinity", term("grp", "zone")),
        ),
    )
    web_spec = affinity("podAffinity", term("db", "zone"))
    web_spec["affinity"] |= affinity(
        "podAntiAffinity",
        term("db", HOST, namespaceSelector={"matchLabels": {"team": "x"}}),
        term("db", HOST, namespaceSelector={}),
    )["affinity"]
    c.apply("PodGroup", "ADDED", f.podgroup("web", phase="Inqueue"))
    c.apply("Pod", "ADDED", f.pod("web-0", group="web", labels={"app": "web"}, spec=web_spec))
    ssn = open_session(
        c, load_config("actions: allocate\ntiers: [{plugins: [{name: predicates}]}]"), now=NOW
    )
    pa = PodAffinity(ssn)
    idx = ssn.nodes.arrays.by_name

    def masks(job: str) -> dict[str, list[str]]:
        task = next(iter(ssn.jobs[job].tasks.values()))
        return {
            reason: sorted(n for n, i in idx.items() if mask[i])
            for reason, mask in pa.filters(task)
        }

    assert masks("default/first") == {R_POD_AFFINITY: ["n3"]}
    assert masks("default/web") == {
        R_POD_AFFINITY: ["n0", "n1", "n3"],  # db runs in zone b only
        R_POD_ANTI: ["n1", "n2"],  # db2 (team x) and, with the empty selector, db too
        R_EXISTING_ANTI: ["n0", "n1"],  # guard's zone; guard2's term is for its own namespace
    }
    ssn.rollback()
