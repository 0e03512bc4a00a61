"""A Pod or PodGroup update keeps what was read from the previous object (``PodFacts.restatus``,
``ClusterCache._podgroup_status``) only when that is exactly what parsing the new object gives:
pod facts compared field for field with ``PodFacts(obj)``, and the cache's whole state with the
reuse switched off, on random objects and random updates (bindings, status updates, deletion
marks, and edits of what is read, including values that are ``==`` but of another type)."""

from __future__ import annotations

import copy
import itertools
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import given, settings, strategies as st

from batch.model import cache as cache_mod, parse as parse_mod
from batch.model.cache import ClusterCache
from batch.model.parse import PodFacts, same_json
from batch.sim.objects import running_status

NODES = ("n0", "n1")
_VERSIONS = itertools.count(1)


def _node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {
            "allocatable": {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "8", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


_quantity = st.sampled_from(["1", "500m", "2", 1, 2, "1Gi", "0"])
_number = st.sampled_from([0, 1, 2, 2.0, True, False, 300, 300.0])


@st.composite
def _pods(draw: st.DrawFn, i: int) -> dict[str, Any]:
    """A pod of one of two jobs, with some of everything the facts are read from."""
    ann: dict[str, Any] = {}
    if draw(st.booleans()):
        ann["scheduling.k8s.io/group-name"] = draw(st.sampled_from(["pg0", "pg1"]))
    if draw(st.booleans()):
        ann["volcano.sh/task-spec"] = draw(st.sampled_from(["ps", "worker"]))
    if draw(st.booleans()):
        ann["volcano.sh/task-index"] = draw(st.sampled_from(["0", "1", 3, "x"]))
    labels = draw(
        st.dictionaries(
            st.sampled_from(["a", "volcano.sh/preemptable"]),
            st.sampled_from(["x", "false", "true"]),
            max_size=2,
        )
    )
    req = draw(
        st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), _quantity, max_size=3)
    )
    container: dict[str, Any] = {"name": "main", "resources": {"requests": req}}
    if draw(st.booleans()):
        container["ports"] = [{"containerPort": 80, "hostPort": draw(_number)}]
    spec: dict[str, Any] = {
        "schedulerName": draw(st.sampled_from(["volcano", "default-scheduler"])),
        "containers": [container],
    }
    if draw(st.booleans()):
        spec["priority"] = draw(_number)
    if draw(st.booleans()):
        spec["nodeSelector"] = {"zone": draw(st.sampled_from(["a", "b"]))}
    if draw(st.booleans()):
        spec["tolerations"] = [
            {"key": "k", "operator": "Exists", "tolerationSeconds": draw(_number)}
        ]
    if draw(st.booleans()):
        spec["nodeName"] = draw(st.sampled_from(NODES))
    if draw(st.integers(0, 3)) == 0:  # the template key then holds the namespace
        term = {"labelSelector": {"matchLabels": {"a": "x"}}, "topologyKey": "zone"}
        spec["affinity"] = {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"p{i}",
            "namespace": "ns",
            "uid": f"u{i}",
            "resourceVersion": "1",
            "creationTimestamp": "2020-01-01T00:00:00Z",
            "labels": labels,
            "annotations": ann,
        },
        "spec": spec,
        "status": {"phase": draw(st.sampled_from(["Pending", "Running"]))},
    }


def _edit(draw: st.DrawFn, old: dict[str, Any]) -> dict[str, Any]:
    """The pod's next object: how a watch or the simulator's engine would write it, or an edit
    of a field facts are read from."""
    kind = draw(
        st.sampled_from(
            [
                "bind",
                "status",
                "fresh",
                "delete_mark",
                "nominate",
                "same",
                "label",
                "priority",
                "quantity",
                "toleration",
                "annotation",
                "spec_key",
            ]
        )
    )
    meta, spec, status = old["metadata"], old["spec"], old["status"]
    if kind == "bind":  # the simulator's engine: spec copied shallowly, new status
        return {
            **old,
            "spec": {**spec, "nodeName": draw(st.sampled_from(NODES))},
            "status": running_status(1.0),
        }
    if kind == "status":
        phase = draw(st.sampled_from(["Pending", "Running", "Succeeded", "Failed"]))
        return {**old, "status": {**status, "phase": phase}}
    if kind == "fresh":  # a watch decodes every object anew
        new = copy.deepcopy(old)
        new["metadata"]["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
        new["status"]["phase"] = draw(st.sampled_from(["Running", "Succeeded"]))
        return new
    if kind == "delete_mark":
        return {**old, "metadata": {**meta, "deletionTimestamp": "2020-01-02T00:00:00Z"}}
    if kind == "nominate":
        return {**old, "status": {**status, "nominatedNodeName": draw(st.sampled_from(NODES))}}
    if kind == "same":
        return old
    new = copy.deepcopy(old)
    m, s = new["metadata"], new["spec"]
    if kind == "label":
        m["labels"]["volcano.sh/preemptable"] = draw(st.sampled_from(["false", "true"]))
    elif kind == "priority":  # 2 == 2.0 == True: parses differently all the same
        s["priority"] = draw(_number)
    elif kind == "quantity":
        s["containers"][0]["resources"]["requests"]["cpu"] = draw(_quantity)
    elif kind == "toleration":
        s["tolerations"] = [{"key": "k", "operator": "Exists", "tolerationSeconds": draw(_number)}]
    elif kind == "annotation":
        m["annotations"]["scheduling.k8s.io/group-name"] = draw(st.sampled_from(["pg0", "pg1"]))
    else:
        s["schedulingGates"] = [{"name": "g"}] if "schedulingGates" not in s else []
    return new


@st.composite
def _podgroups(draw: st.DrawFn, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"queue": draw(st.sampled_from(["", "q1"]))}
    if draw(st.booleans()):
        spec["minMember"] = draw(st.sampled_from([1, 2, 2.0, True]))
    if draw(st.booleans()):
        spec["minResources"] = draw(
            st.dictionaries(
                st.sampled_from(["cpu", "nvidia.com/gpu", "requests.cpu"]), _quantity, max_size=2
            )
        )
    if draw(st.booleans()):
        spec["minTaskMember"] = {"worker": draw(st.sampled_from([1, 2]))}
    if draw(st.booleans()):
        spec["networkTopology"] = {"mode": "hard", "highestTierAllowed": draw(_number)}
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
    if draw(st.booleans()):
        meta["annotations"] = {"x": draw(st.sampled_from(["1", "2"]))}
    if draw(st.booleans()):
        meta["creationTimestamp"] = "2020-01-01T00:00:00Z"
    return {"metadata": meta, "spec": spec, "status": {"phase": "Pending"}}


def _edit_podgroup(draw: st.DrawFn, old: dict[str, Any]) -> dict[str, Any]:
    new = _podgroup_edit(draw, old)
    if new is not old and "resourceVersion" in new["metadata"]:
        # as the API server writes it (podgroup_view keeps one view per uid and version)
        new = {**new, "metadata": {**new["metadata"], "resourceVersion": str(next(_VERSIONS))}}
    return new


def _podgroup_edit(draw: st.DrawFn, old: dict[str, Any]) -> dict[str, Any]:
    kind = draw(st.sampled_from(["phase", "conditions", "fresh", "spec", "annotation", "same"]))
    if kind == "phase":  # the simulator's engine writes the session's phases so
        phase = draw(st.sampled_from(["Pending", "Inqueue", "Running", "", None]))
        return {**old, "status": {**old["status"], "phase": phase}}
    if kind == "conditions":
        cond = {
            "type": "Unschedulable",
            "status": "True",
            "reason": draw(st.sampled_from(["a", "b"])),
        }
        return {**old, "status": {**old["status"], "conditions": [cond]}}
    if kind == "same":
        return old
    new = copy.deepcopy(old)
    if kind == "fresh":  # a watch decodes every object anew
        new["metadata"]["resourceVersion"] = "0"
        new["status"]["phase"] = "Running"
    elif kind == "spec":
        new["spec"]["minMember"] = draw(st.sampled_from([1, 2, 2.0, True]))
    else:
        new["metadata"]["annotations"] = {"x": draw(st.sampled_from(["1", "2", 1]))}
    return new


@st.composite
def _histories(draw: st.DrawFn) -> list[tuple[str, str, dict[str, Any]]]:
    """(kind, event, object) of up to three pods and the two PodGroups they may belong to."""
    n = draw(st.integers(1, 3))
    current = [draw(_pods(i)) for i in range(n)]
    groups = [draw(_podgroups(name)) for name in ("pg0", "pg1")]
    events = [("PodGroup", "ADDED", groups[0])] + [("Pod", "ADDED", p) for p in current]
    for _ in range(draw(st.integers(1, 14))):
        i = draw(st.integers(0, n + 1))
        if i >= n:  # a PodGroup
            g, event = i - n, "MODIFIED" if draw(st.integers(0, 5)) else "DELETED"
            if event == "DELETED":
                events.append(("PodGroup", "DELETED", groups[g]))
                groups[g] = draw(_podgroups(groups[g]["metadata"]["name"]))
                event = "ADDED"
            else:
                groups[g] = _edit_podgroup(draw, groups[g])
            events.append(("PodGroup", event, groups[g]))
        elif draw(st.integers(0, 9)) == 0:
            events.append(("Pod", "DELETED", current[i]))
            current[i] = draw(_pods(i))
            events.append(("Pod", "ADDED", current[i]))
        else:
            current[i] = _edit(draw, current[i])
            node = current[i]["spec"].get("nodeName")
            if node and draw(st.booleans()):  # a session's bind first, then the watch shows it
                events.append(("Pod", "ASSUME", current[i]))
            events.append(("Pod", "MODIFIED", current[i]))
    return events


def _facts(f: PodFacts) -> dict[str, str]:
    """Every fact, by repr (which tells 2 from 2.0 and True, and shows key order)."""
    return {name: repr(getattr(f, name)) for name in PodFacts.__slots__}


def _state(c: ClusterCache) -> Any:
    tasks = [
        (
            uid,
            {
                name: (
                    (t.template.tid, t.template.key)
                    if name == "template"
                    else repr(getattr(t, name).tolist())
                    if name in ("req", "init_req")
                    else id(t.raw)
                    if name == "raw"
                    else repr(getattr(t, name))
                )
                for name in t.__slots__
            },
        )
        for uid, t in c.tasks.items()
    ]
    jobs = [
        (
            uid,
            j.ordinal,
            id(j.podgroup),
            j.queue,
            j.min_available,
            j.min_task_member,
            None if j.spec_min_resources is None else j.spec_min_resources.tolist(),
            repr(j.phase),
            j.priority_class_name,
            j.creation,
            repr(j.annotations),
            repr(j.network_topology),
            repr(j.conditions),
            list(j.tasks),
            j.counts,
            j.role_counts,
            j.role_best_effort,
            j.alloc_version,
            j.pending_best_effort,
            j.gated_pending,
            j.allocated.tolist(),
            j.pending_req.tolist(),
            j.gated_req.tolist(),
            j.total_req.tolist(),
            None if j.min_resources is None else j.min_resources.tolist(),
        )
        for uid, j in c.jobs.items()
    ]
    n = c.nodes
    return (
        tasks,
        jobs,
        [(k, t.tid) for k, t in c.templates.items()],
        list(c.resources.names),
        n.used.tolist(),
        n.releasing.tolist(),
        [list(s) for s in c.node_tasks],  # in the sets' own order
        list(c.anti_affinity_tasks),
        list(c.nominated_tasks),
        list(c._pod_facts),
        {name: list(s) for name, s in c._waiting_node.items()},
        list(c.assumed.items()),
        list(c.changes._last),
    )


@contextmanager
def _reuse(on: bool) -> Iterator[None]:
    """Every shortcut of the watch path on, or all of them off."""
    was = cache_mod.REUSE_FACTS, parse_mod.MEMO_SPECS
    cache_mod.REUSE_FACTS = parse_mod.MEMO_SPECS = on
    try:
        yield
    finally:
        cache_mod.REUSE_FACTS, parse_mod.MEMO_SPECS = was


@settings(max_examples=300, deadline=None)
@given(_histories())
def test_facts_from_the_spec_memo_are_the_parsed_facts(
    events: list[tuple[str, str, dict[str, Any]]],
) -> None:
    """Pods whose specs are equal, or equal but for the types of ``==`` values (2, 2.0,
    True) or their key order, parsed one after the other through one memo."""
    parse_mod._spec_memo.clear()
    for kind, event, obj in events:
        if kind != "Pod" or event == "ASSUME":
            continue
        reordered = {**obj, "spec": dict(reversed(obj["spec"].items()))}
        elsewhere = {**obj, "metadata": {**obj["metadata"], "namespace": "other"}}
        for pod in (obj, reordered, elsewhere):
            with _reuse(True):
                memo = PodFacts(pod)
            with _reuse(False):
                parsed = PodFacts(pod)
            assert _facts(memo) == _facts(parsed)
    assert parse_mod._spec_memo


@settings(max_examples=300, deadline=None)
@given(_histories())
def test_reused_facts_are_the_parsed_facts(events: list[tuple[str, str, dict[str, Any]]]) -> None:
    last: dict[str, tuple[dict[str, Any], PodFacts]] = {}
    for kind, event, obj in events:
        if kind != "Pod" or event == "ASSUME":
            continue
        uid = obj["metadata"]["uid"]
        if event == "DELETED":
            last.pop(uid, None)
            continue
        parsed = PodFacts(obj)
        if uid in last:
            old, facts = last[uid]
            before = _facts(facts)
            if facts.restatus(old, obj):
                assert _facts(facts) == _facts(parsed)
            else:
                assert _facts(facts) == before
        last[uid] = (obj, parsed)


@settings(max_examples=200, deadline=None)
@given(_histories())
def test_cache_with_reused_facts_is_the_parsing_cache(
    events: list[tuple[str, str, dict[str, Any]]],
) -> None:
    fast, slow = ClusterCache(), ClusterCache()
    for c in (fast, slow):
        for name in NODES:
            c.apply("Node", "ADDED", _node(name))
    for kind, event, obj in events:
        if event == "ASSUME":
            for c in (fast, slow):
                c.assume_bind(obj["metadata"]["uid"], obj["spec"]["nodeName"])
            assert _state(fast) == _state(slow)
            continue
        with _reuse(True):
            fast.apply(kind, event, obj)
        with _reuse(False):
            slow.apply(kind, event, obj)
        assert _state(fast) == _state(slow)
        if kind == "Pod" and event == "MODIFIED" and obj["spec"].get("nodeName") in NODES:
            uid = obj["metadata"]["uid"]
            if uid in fast.tasks:  # a bind the session assumed first, then the watch shows it
                for c in (fast, slow):
                    c.assume_evict(uid)
                    c.evict_failed(uid)
                assert _state(fast) == _state(slow)


def test_bindings_and_status_updates_reuse_the_facts() -> None:
    """The simulator's binding (spec copied shallowly) and a watch's status update (every
    object decoded anew) take the shortcut; an edit of the spec does not."""
    pod: dict[str, Any] = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"a": "b"}},
        "spec": {
            "schedulerName": "volcano",
            "priority": 2,
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}],
        },
        "status": {"phase": "Pending"},
    }
    facts = PodFacts(pod)
    bound = {**pod, "spec": {**pod["spec"], "nodeName": "n0"}, "status": running_status(1.0)}
    assert facts.restatus(pod, bound)
    fresh = copy.deepcopy(bound)
    fresh["metadata"]["resourceVersion"] = "7"
    fresh["status"]["phase"] = "Succeeded"
    assert facts.restatus(bound, fresh)
    float_priority = copy.deepcopy(pod)
    float_priority["spec"]["priority"] = 2.0
    assert float_priority == pod and not PodFacts(pod).restatus(pod, float_priority)
    assert not same_json({"a": 1}, {"a": True}) and not same_json([1, 2], [1.0, 2])
    assert not same_json({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert same_json({"a": [1, "x"]}, {"a": [1, "x"]})


def test_phase_updates_keep_the_podgroup_facts() -> None:
    """The simulator's phase write (spec shared) and a watch's status update (decoded anew)
    take the shortcut; a new minMember does not."""
    c = ClusterCache()
    pg: dict[str, Any] = {
        "metadata": {"name": "pg", "namespace": "ns", "uid": "u", "resourceVersion": "1"},
        "spec": {"minMember": 2, "minResources": {"cpu": "2"}},
        "status": {"phase": "Pending"},
    }
    c.apply("PodGroup", "ADDED", pg)
    inqueue = {**pg, "status": {**pg["status"], "phase": "Inqueue"}}
    assert c._podgroup_status(inqueue) and c.jobs["ns/pg"].phase == "Inqueue"
    fresh = copy.deepcopy(inqueue)
    fresh["metadata"]["resourceVersion"] = "2"
    fresh["status"] = {"phase": "Running", "conditions": [{"type": "Scheduled"}]}
    assert c._podgroup_status(fresh) and c.jobs["ns/pg"].conditions == [{"type": "Scheduled"}]
    bigger = copy.deepcopy(fresh)
    bigger["spec"]["minMember"] = 3
    assert not c._podgroup_status(bigger)


def test_same_json_reads_content_only() -> None:
    """Shared or interned strings and objects referred to twice do not make equal values
    unequal (marshal's later formats mark them)."""
    a: dict[str, Any] = {"k": "ab" + str(len("x")), "l": [1.5, None, True]}
    b = copy.deepcopy(a)
    b["k"] = sys.intern("ab1")
    keep = [a, a["l"], a["l"]]
    assert same_json(a, b) and keep
    assert not same_json(a, {**b, "l": [1.5, None, 1]})


def test_a_pod_leaving_its_gang_refigures_the_gang_minimum() -> None:
    """The task is re-added to its job after the update, which figures the job's minimum then;
    a job it leaves gets its minimum figured when the task leaves."""
    pg = {"metadata": {"name": "pg0", "namespace": "ns"}, "spec": {"minResources": {"cpu": "1"}}}
    pod: dict[str, Any] = {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "u",
            "annotations": {"scheduling.k8s.io/group-name": "pg0"},
        },
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "m", "resources": {"requests": {"cpu": "1", "memory": "1"}}}],
        },
    }
    moved = copy.deepcopy(pod)
    moved["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = "pg1"
    c = ClusterCache()
    c.apply("PodGroup", "ADDED", pg)
    c.apply("Pod", "ADDED", pod)
    memory = c.resources.index("memory")
    assert c.jobs["ns/pg0"].min_resources is not None
    assert c.jobs["ns/pg0"].min_resources[memory] == 1  # raised on what the pods ask for
    bound = {**pod, "spec": {**pod["spec"], "nodeName": "n0"}, "status": running_status(1.0)}
    c.apply("Pod", "MODIFIED", bound)
    assert c.jobs["ns/pg0"].min_resources[memory] == 1
    c.apply("Pod", "MODIFIED", moved)
    assert c.jobs["ns/pg0"].min_resources[memory] == 0


def test_a_pod_without_constraints_keys_them_as_written_out() -> None:
    """The constraint key of a pod with none is a constant: the one json.dumps writes."""
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "m"}]}}
    parts = [{}, None, [], [], [], [], [], ""]
    assert PodFacts(pod).template_key[2] == json.dumps(parts, sort_keys=True, default=str)
    pod["spec"]["tolerations"] = []
    assert PodFacts(pod).template_key[2] == json.dumps(parts, sort_keys=True, default=str)
    pod["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}
    }
    parts[1] = []
    assert PodFacts(pod).template_key[2] == json.dumps(parts, sort_keys=True, default=str)
