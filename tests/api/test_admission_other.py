"""Admission of Queue, PodGroup, Pod, Command, HyperNode and CronJob."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest

from batch.api.admission import AdmissionResult, StaticLookup, admit
from batch.api.admission.cronjob import is_cron_schedule

from .conftest import make_job, make_queue


def run(
    kind: str, obj: dict[str, Any], *, op: str = "CREATE", old: Any = None, lookup: Any = None
) -> AdmissionResult:
    return admit(kind=kind, operation=op, obj=obj, old=old, lookup=lookup)


def errors_of(result: AdmissionResult) -> set[tuple[str, str]]:
    return {(e.path, e.rule) for e in result.errors}


# ----------------------------------------------------------------------------------- Queue


def test_queue_defaults() -> None:
    q = make_queue("research")
    result = run("Queue", q)
    assert result.allowed, result.messages()
    assert result.object["spec"] == {"weight": 1, "reclaimable": True}
    assert jsonpatch.apply_patch(q, result.patch) == result.object
    result = run("Queue", make_queue("r", weight=0, reclaimable=False))
    assert result.object["spec"] == {"weight": 1, "reclaimable": False}
    nospec = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "x"},
    }
    assert run("Queue", nospec).object["spec"] == {"weight": 1, "reclaimable": True}


def test_queue_no_defaults_on_update() -> None:
    q = make_queue("research", weight=2)
    assert run("Queue", q, op="UPDATE", old=q).patch == []


QUEUE_REJECTIONS: list[tuple[str, dict[str, Any], str, str]] = [
    ("weight too big", {"weight": 70000}, "spec.weight", "maximum"),
    ("weight negative", {"weight": -1}, "spec.weight", "minimum"),
    ("bad capability", {"capability": {"cpu": "x"}}, "spec.capability.cpu", "quantity"),
    (
        "negative capability",
        {"capability": {"memory": "-1Gi"}},
        "spec.capability.memory",
        "nonNegative",
    ),
    (
        "capability above Kubernetes' int64 bound",
        {"capability": {"memory": "16Ei"}},
        "spec.capability.memory",
        "maxQuantity",
    ),
    (
        "deserved above capability",
        {"capability": {"cpu": "4"}, "deserved": {"cpu": "8"}},
        "spec.deserved.cpu",
        "deservedLessEqualCapability",
    ),
    (
        "guarantee above deserved",
        {"deserved": {"cpu": "2"}, "guarantee": {"resource": {"cpu": "3"}}},
        "spec.guarantee.resource.cpu",
        "guaranteeLessEqualDeserved",
    ),
    (
        "guarantee dimension missing from deserved",
        {"deserved": {"cpu": "2"}, "guarantee": {"resource": {"memory": "1Gi"}}},
        "spec.guarantee.resource.memory",
        "guaranteeInDeserved",
    ),
    ("own parent", {"parent": "q"}, "spec.parent", "parent"),
    ("bad dequeue strategy", {"dequeueStrategy": "random"}, "spec.dequeueStrategy", "enum"),
    ("negative priority", {"priority": -3}, "spec.priority", "minimum"),
    ("reclaimable type", {"reclaimable": "yes"}, "spec.reclaimable", "type"),
]


@pytest.mark.parametrize(
    ("spec", "path", "rule"), [pytest.param(s, p, r, id=i) for i, s, p, r in QUEUE_REJECTIONS]
)
def test_queue_rejections(spec: dict[str, Any], path: str, rule: str) -> None:
    result = run("Queue", make_queue("q", **spec))
    assert errors_of(result) == {(path, rule)}, result.messages()
    assert str(result.errors[0]).startswith(f"Queue q: {path}: {rule} (")


def test_queue_names_fit_in_a_pod_label() -> None:
    """A job's pods carry their queue's name as a label value (at most 63 characters): a longer
    name, though a valid DNS subdomain, would make every pod of its jobs unacceptable."""
    assert run("Queue", make_queue("q" * 63)).allowed
    result = run("Queue", make_queue("q" * 64))
    assert [(e.path, e.rule) for e in result.errors] == [("metadata.name", "labelValue")]
    assert "volcano.sh/queue-name" in result.messages()[0]
    # an existing queue stays manageable
    old = make_queue("q" * 64)
    assert run("Queue", make_queue("q" * 64, weight=2), op="UPDATE", old=old).allowed


def test_queue_resource_relations_accept_valid() -> None:
    q = make_queue(
        "q",
        capability={"cpu": "8", "memory": "32Gi"},
        deserved={"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": 2},
        guarantee={"resource": {"cpu": "2000m", "nvidia.com/gpu": 1}},
    )
    assert run("Queue", q).allowed


def test_queue_parent_must_exist() -> None:
    lookup = StaticLookup([make_queue("eng")])
    assert run("Queue", make_queue("eng-a", parent="eng"), lookup=lookup).allowed
    result = run("Queue", make_queue("eng-a", parent="ghost"), lookup=lookup)
    assert errors_of(result) == {("spec.parent", "parentExists")}
    assert run("Queue", make_queue("eng-a", parent="ghost")).allowed  # no lookup: skipped


def _hier(name: str, path: str, weights: str) -> dict[str, Any]:
    q = make_queue(name, weight=1)
    q["metadata"]["annotations"] = {
        "volcano.sh/hierarchy": path,
        "volcano.sh/hierarchy-weights": weights,
    }
    return q


HIER_PATH = "metadata.annotations[volcano.sh/hierarchy]"
HIER_WEIGHTS = "metadata.annotations[volcano.sh/hierarchy-weights]"


def test_hierarchy_annotations() -> None:
    result = run("Queue", _hier("a", "eng/prod", "2/8"))
    assert result.allowed
    ann = result.object["metadata"]["annotations"]
    assert ann == {"volcano.sh/hierarchy": "root/eng/prod", "volcano.sh/hierarchy-weights": "1/2/8"}
    assert errors_of(run("Queue", _hier("a", "root/eng/prod", "1/2"))) == {
        (HIER_WEIGHTS, "hierarchyWeights")
    }
    assert errors_of(run("Queue", _hier("a", "root/eng", "1/0"))) == {
        (HIER_WEIGHTS, "hierarchyWeights")
    }
    assert errors_of(run("Queue", _hier("a", "root/eng", "1/x"))) == {
        (HIER_WEIGHTS, "hierarchyWeights")
    }


def test_hierarchy_prefix_paths_conflict() -> None:
    lookup = StaticLookup([_hier("prod", "root/eng/prod", "1/2/8")])
    result = run("Queue", _hier("eng", "root/eng", "1/2"), lookup=lookup)
    assert errors_of(result) == {(HIER_PATH, "hierarchyPrefix")}
    result = run("Queue", _hier("deeper", "root/eng/prod/x", "1/2/8/1"), lookup=lookup)
    assert errors_of(result) == {(HIER_PATH, "hierarchyPrefix")}
    assert run("Queue", _hier("dev", "root/eng/dev", "1/2/2"), lookup=lookup).allowed


def _closed(queue: dict[str, Any]) -> dict[str, Any]:
    return {**queue, "status": {"state": "Closed"}}


def test_queue_delete_protection() -> None:
    for name in ("root", "default"):
        result = run("Queue", make_queue(name), op="DELETE")
        assert errors_of(result) == {("metadata.name", "deletionProtected")}
    eng, eng_a = _closed(make_queue("eng")), _closed(make_queue("eng-a", parent="eng"))
    lookup = StaticLookup([eng, eng_a])
    result = run("Queue", eng, op="DELETE", old=eng, lookup=lookup)
    assert errors_of(result) == {("metadata.name", "hasChildren")}
    assert run("Queue", eng_a, op="DELETE", lookup=lookup).allowed


def test_only_a_closed_queue_can_be_deleted() -> None:
    """Volcano's validateQueueDeleting (issue 19.2): Open, Closing or state-less queues stay."""
    for status in ({}, {"state": "Open"}, {"state": "Closing"}):
        queue = {**make_queue("eng"), "status": status}
        result = run("Queue", queue, op="DELETE", old=queue)
        assert errors_of(result) == {("metadata.name", "closedOnly")}
        assert "only queue with state `Closed` can be deleted" in result.errors[0].message
    assert run("Queue", _closed(make_queue("eng")), op="DELETE").allowed


def test_guarantee_above_capability() -> None:
    """Now that a guarantee needs deserved >= it, above capability comes with deserved above."""
    spec = {
        "capability": {"nvidia.com/gpu": 2},
        "deserved": {"nvidia.com/gpu": 4},
        "guarantee": {"resource": {"nvidia.com/gpu": 4}},
    }
    assert errors_of(run("Queue", make_queue("q", **spec))) == {
        ("spec.deserved[nvidia.com/gpu]", "deservedLessEqualCapability"),
        ("spec.guarantee.resource[nvidia.com/gpu]", "guaranteeLessEqualCapability"),
    }


def test_a_guarantee_needs_a_deserved_amount() -> None:
    """Volcano >= 1.15: `deserved[cpu] must be >= guarantee[cpu]`, also with no deserved at all."""
    result = run("Queue", make_queue("g", guarantee={"resource": {"cpu": "2"}}))
    assert errors_of(result) == {("spec.guarantee.resource.cpu", "guaranteeInDeserved")}
    assert "deserved[cpu] must be >= guarantee[cpu]=2" in result.errors[0].message
    ok = make_queue("g", deserved={"cpu": "2"}, guarantee={"resource": {"cpu": "2"}})
    assert run("Queue", ok).allowed


def test_a_parent_cycle_made_by_an_update_is_refused() -> None:
    qa, qb = make_queue("qa"), make_queue("qb", parent="qa")
    lookup = StaticLookup([qa, qb])
    patched = make_queue("qa", parent="qb")  # kubectl patch q qa -p '{"spec":{"parent":"qb"}}'
    result = run("Queue", patched, op="UPDATE", old=qa, lookup=lookup)
    assert errors_of(result) == {("spec.parent", "parentCycle")}
    assert "qa -> qb -> qa" in result.errors[0].message
    qc = make_queue("qc", parent="qb")
    lookup = StaticLookup([qa, qb, qc])
    result = run("Queue", make_queue("qa", parent="qc"), op="UPDATE", old=qa, lookup=lookup)
    assert errors_of(result) == {("spec.parent", "parentCycle")}
    assert run("Queue", make_queue("qc", parent="qa"), op="UPDATE", old=qc, lookup=lookup).allowed


def test_root_queue_resources_immutable() -> None:
    old = make_queue("root", weight=1, capability={"cpu": "10"})
    new = copy.deepcopy(old)
    new["spec"]["capability"] = {"cpu": "20"}
    result = run("Queue", new, op="UPDATE", old=old)
    assert errors_of(result) == {("spec.capability", "immutable")}
    other = make_queue("q", weight=1, capability={"cpu": "10"})
    other2 = copy.deepcopy(other)
    other2["spec"]["capability"] = {"cpu": "20"}
    assert run("Queue", other2, op="UPDATE", old=other).allowed


# -------------------------------------------------------------------------------- PodGroup


def _pg(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "team-a"},
        "spec": spec,
    }


def _ns(name: str, queue: str | None) -> dict[str, Any]:
    ns: dict[str, Any] = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    if queue:
        ns["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": queue}
    return ns


def test_podgroup_queue_from_namespace() -> None:
    lookup = StaticLookup([make_queue("team-a-q")], [_ns("team-a", "team-a-q")])
    for queue in ("default", "", None):
        spec: dict[str, Any] = {"minMember": 1}
        if queue is not None:
            spec["queue"] = queue
        result = run("PodGroup", _pg(**spec), lookup=lookup)
        assert result.allowed, result.messages()
        assert result.object["spec"]["queue"] == "team-a-q"
    result = run("PodGroup", _pg(minMember=1, queue="default"), lookup=lookup)
    assert result.patch == [{"op": "replace", "path": "/spec/queue", "value": "team-a-q"}]
    explicit = run(
        "PodGroup",
        _pg(minMember=1, queue="other"),
        lookup=StaticLookup([make_queue("other")], [_ns("team-a", "team-a-q")]),
    )
    assert explicit.object["spec"]["queue"] == "other"
    plain = run(
        "PodGroup",
        _pg(minMember=1, queue="default"),
        lookup=StaticLookup([], [_ns("team-a", None)]),
    )
    assert plain.object["spec"]["queue"] == "default"


def test_podgroup_rejections() -> None:
    assert errors_of(run("PodGroup", _pg(minMember=-1))) == {("spec.minMember", "minimum")}
    assert errors_of(run("PodGroup", _pg(minTaskMember={"w": -1}))) == {
        ("spec.minTaskMember.w", "minimum")
    }
    assert errors_of(run("PodGroup", _pg(minResources={"cpu": "abc"}))) == {
        ("spec.minResources.cpu", "quantity")
    }
    assert errors_of(run("PodGroup", _pg(minResources={"cpu": "9223372036854775807"}))) == {
        ("spec.minResources.cpu", "maxQuantity")
    }
    result = run("PodGroup", _pg(networkTopology={"highestTierAllowed": 1, "highestTierName": "s"}))
    assert errors_of(result) == {("spec.networkTopology", "exclusive")}
    result = run("PodGroup", _pg(subGroupPolicy=[{"name": "a"}, {"name": "a", "subGroupSize": 0}]))
    assert errors_of(result) == {("spec.subGroupPolicy[1].subGroupSize", "minimum")}
    result = run("PodGroup", _pg(subGroupPolicy=[{"name": "a"}, {"name": "a"}]))
    assert errors_of(result) == {("spec.subGroupPolicy[1].name", "unique")}
    closed = make_queue("c")
    closed["status"] = {"state": "Closing"}
    result = run("PodGroup", _pg(queue="c"), lookup=StaticLookup([closed]))
    assert errors_of(result) == {("spec.queue", "queueOpen")}
    assert errors_of(run("PodGroup", _pg(queue="nope"), lookup=StaticLookup([]))) == {
        ("spec.queue", "queueExists")
    }


def test_a_podgroup_update_may_not_move_it_into_root_or_a_queue_that_takes_no_work() -> None:
    # issue 30 item 9: PodGroup updates were not validated, and a user moved one into `root`
    closed = make_queue("c")
    closed["status"] = {"state": "Closed"}
    parent = make_queue("parent")
    child = make_queue("child", parent="parent")
    lookup = StaticLookup([closed, parent, child, make_queue("team")])
    old = _pg(minMember=1, queue="team")
    for queue, rule in [
        ("root", "queueNotRoot"),
        ("c", "queueOpen"),
        ("nope", "queueExists"),
        ("parent", "queueLeaf"),
    ]:
        moved = _pg(minMember=1, queue=queue)
        result = run("PodGroup", moved, op="UPDATE", old=old, lookup=lookup)
        assert errors_of(result) == {("spec.queue", rule)}, (queue, result.messages())
    assert run("PodGroup", _pg(minMember=1, queue="child"), op="UPDATE", old=old, lookup=lookup)
    # without cluster facts `root` is still refused; other moves need them
    into_root = run("PodGroup", _pg(minMember=1, queue="root"), op="UPDATE", old=old)
    assert "PodGroups may not be submitted to the root queue" in into_root.messages()[0]
    # a PodGroup created in root is refused too, as a job would be
    assert errors_of(run("PodGroup", _pg(queue="root"))) == {("spec.queue", "queueNotRoot")}


def test_a_podgroup_update_that_keeps_its_queue_is_not_frozen_by_a_closed_queue() -> None:
    closed = make_queue("c")
    closed["status"] = {"state": "Closed"}
    old = _pg(minMember=1, queue="c")
    grown = _pg(minMember=2, queue="c")
    assert run("PodGroup", grown, op="UPDATE", old=old, lookup=StaticLookup([closed])).allowed
    # the other rules hold on UPDATE as on CREATE
    bad = _pg(minMember=-1, queue="c")
    result = run("PodGroup", bad, op="UPDATE", old=old, lookup=StaticLookup([closed]))
    assert errors_of(result) == {("spec.minMember", "minimum")}


# ------------------------------------------------------------------------------------- Pod


def _pod(annotations: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "annotations": annotations},
    }


@pytest.mark.parametrize(
    ("annotations", "ok"),
    [
        ({"volcano.sh/jdb-min-available": "2"}, True),
        ({"volcano.sh/jdb-min-available": "50%"}, True),
        ({"volcano.sh/jdb-max-unavailable": "1"}, True),
        ({"volcano.sh/jdb-max-unavailable": "99%"}, True),
        ({"volcano.sh/jdb-min-available": "0"}, False),
        ({"volcano.sh/jdb-min-available": "100%"}, False),
        ({"volcano.sh/jdb-min-available": "0%"}, False),
        ({"volcano.sh/jdb-max-unavailable": "half"}, False),
        ({"volcano.sh/jdb-max-unavailable": "-1"}, False),
        ({"other": "x"}, True),
    ],
)
def test_pod_jdb_values(annotations: dict[str, Any], ok: bool) -> None:
    result = run("Pod", _pod(annotations))
    assert result.allowed is ok, result.messages()
    if not ok:
        key = next(iter(annotations))
        assert errors_of(result) == {(f"metadata.annotations[{key}]", "intOrPercent")}


def test_pod_jdb_exclusive() -> None:
    result = run(
        "Pod", _pod({"volcano.sh/jdb-min-available": "1", "volcano.sh/jdb-max-unavailable": "1"})
    )
    assert errors_of(result) == {("metadata.annotations", "jdbExclusive")}
    assert str(result.errors[0]).startswith("Pod default/p: metadata.annotations: jdbExclusive (")


# --------------------------------------------------------------------------------- Command


def _cmd(action: Any, target: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"name": "c"},
    }
    if action is not None:
        obj["action"] = action
    if target is not None:
        obj["target"] = target
    return obj


JOB_TARGET = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train", "uid": "u"}
QUEUE_TARGET = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "Queue",
    "name": "q",
    "uid": "u",
}


def test_commands() -> None:
    assert run("Command", _cmd("AbortJob", JOB_TARGET)).allowed
    assert run("Command", _cmd("ResumeJob", JOB_TARGET)).allowed
    assert run("Command", _cmd("CloseQueue", QUEUE_TARGET)).allowed
    assert errors_of(run("Command", _cmd("Explode", JOB_TARGET))) == {("action", "action")}
    assert errors_of(run("Command", _cmd(None, JOB_TARGET))) == {("action", "required")}
    assert errors_of(run("Command", _cmd("AbortJob", None))) == {("target", "required")}
    assert errors_of(run("Command", _cmd("OpenQueue", JOB_TARGET))) == {("action", "action")}
    bad_kind = dict(JOB_TARGET, kind="Deployment")
    assert errors_of(run("Command", _cmd("AbortJob", bad_kind))) == {("target.kind", "targetKind")}
    no_name = {k: v for k, v in JOB_TARGET.items() if k != "name"}
    assert errors_of(run("Command", _cmd("AbortJob", no_name))) == {("target.name", "required")}


# ------------------------------------------------------------------------------- HyperNode


def _hn(members: list[Any], tier: Any = 1) -> dict[str, Any]:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": "s0"},
        "spec": {"tier": tier, "members": members},
    }


def test_hypernodes() -> None:
    ok = _hn([{"type": "Node", "selector": {"regexMatch": {"pattern": "^node-[0-9]+$"}}}])
    assert run("HyperNode", ok).allowed
    two = _hn(
        [
            {
                "type": "Node",
                "selector": {"exactMatch": {"name": "a"}, "regexMatch": {"pattern": "b"}},
            }
        ]
    )
    assert errors_of(run("HyperNode", two)) == {("spec.members[0].selector", "selector")}
    none = _hn([{"type": "HyperNode", "selector": {}}])
    assert errors_of(run("HyperNode", none)) == {("spec.members[0].selector", "selector")}
    bad_re = _hn([{"type": "Node", "selector": {"regexMatch": {"pattern": "node-[0-"}}}])
    assert errors_of(run("HyperNode", bad_re)) == {
        ("spec.members[0].selector.regexMatch.pattern", "regex")
    }
    bad_type = _hn([{"type": "Rack", "selector": {"exactMatch": {"name": "a"}}}])
    assert errors_of(run("HyperNode", bad_type)) == {("spec.members[0].type", "enum")}
    assert errors_of(run("HyperNode", _hn([], tier=1))) == {("spec.members", "minItems")}
    assert errors_of(
        run(
            "HyperNode", _hn([{"type": "Node", "selector": {"exactMatch": {"name": "a"}}}], tier=-1)
        )
    ) == {("spec.tier", "minimum")}
    assert str(run("HyperNode", none).errors[0]).startswith(
        "HyperNode s0: spec.members[0].selector: selector ("
    )


# --------------------------------------------------------------------------------- CronJob


def _cron(schedule: str, **spec: Any) -> dict[str, Any]:
    job = make_job()
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": "ml"},
        "spec": {"schedule": schedule, "jobTemplate": {"spec": job["spec"]}, **spec},
    }


@pytest.mark.parametrize(
    ("schedule", "ok"),
    [
        ("*/5 * * * *", True),
        ("0 3 * * mon-fri", True),
        ("15,45 1-5 1 jan,jul ?", True),
        ("@hourly", True),
        ("@every 1h30m", True),
        ("CRON_TZ=Europe/Paris 0 1 * * *", True),
        ("* * * *", False),
        ("60 * * * *", False),
        ("*/0 * * * *", False),
        ("@often", False),
        ("0 0 32 * *", False),
        ("TZ=Nowhere/City 0 1 * * *", False),
    ],
)
def test_cron_schedules(schedule: str, ok: bool) -> None:
    assert is_cron_schedule(schedule)[0] is ok
    result = run("CronJob", _cron(schedule))
    assert result.allowed is ok, result.messages()
    if not ok:
        assert errors_of(result) == {("spec.schedule", "cronSchedule")}


def test_cronjob_template_and_fields() -> None:
    bad = _cron("0 * * * *")
    bad["spec"]["jobTemplate"]["spec"]["minAvailable"] = 10
    assert errors_of(run("CronJob", bad)) == {
        ("spec.jobTemplate.spec.minAvailable", "minAvailableLessEqualReplicas")
    }
    typed = _cron("0 * * * *")
    typed["spec"]["jobTemplate"]["spec"]["maxRetry"] = "x"
    assert errors_of(run("CronJob", typed)) == {("spec.jobTemplate.spec.maxRetry", "type")}
    assert errors_of(run("CronJob", _cron("0 * * * *", concurrencyPolicy="Sometimes"))) == {
        ("spec.concurrencyPolicy", "enum")
    }
    assert errors_of(run("CronJob", _cron("0 * * * *", timeZone="Mars/Base"))) == {
        ("spec.timeZone", "timeZone")
    }
    no_template = _cron("0 * * * *")
    del no_template["spec"]["jobTemplate"]
    assert errors_of(run("CronJob", no_template)) == {("spec.jobTemplate", "required")}
    result = run("CronJob", _cron("0 * * * *"))
    assert result.allowed and result.patch == [], "the CronJob itself is not defaulted"


# ------------------------------------------------------------------------------ dispatching


def test_unknown_kind_and_operation() -> None:
    obj = {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": "x"}}
    assert run("Deployment", obj).allowed
    result = admit(kind="Queue", operation="PATCH", obj=make_queue("q"), old=None, lookup=None)
    assert errors_of(result) == {("", "operation")}


def test_non_mapping_object() -> None:
    result = admit(kind="Job", operation="CREATE", obj=["not", "a", "dict"], old=None, lookup=None)  # type: ignore[arg-type]
    assert not result.allowed and result.errors[0].rule == "type"


def test_job_spec_wrong_type() -> None:
    job = make_job()
    job["spec"] = "oops"
    result = run("Job", job)
    assert errors_of(result) == {("spec", "type")}
    assert str(result.errors[0]).startswith("Job ml/train: spec: type (")


def test_delete_with_null_object_uses_old() -> None:
    result = admit(kind="Queue", operation="DELETE", obj=None, old=make_queue("root"), lookup=None)  # type: ignore[arg-type]
    assert errors_of(result) == {("metadata.name", "deletionProtected")}
    closed = {**make_queue("q"), "status": {"state": "Closed"}}
    assert admit(kind="Queue", operation="DELETE", obj=None, old=closed, lookup=None).allowed  # type: ignore[arg-type]
    assert admit(kind="Job", operation="DELETE", obj=None, old=None, lookup=None).allowed  # type: ignore[arg-type]


# ----------------------------------------- Queue branches pinned before splitting the validator


def test_queue_name_must_be_a_dns_subdomain() -> None:
    result = run("Queue", make_queue("Bad_Name"))
    assert [(e.path, e.rule, e.message) for e in result.errors] == [
        ("metadata.name", "dns1123Subdomain", "invalid queue name 'Bad_Name'")
    ]


def test_the_root_queue_has_no_parent() -> None:
    result = run("Queue", make_queue("root", parent="x"))
    assert [(e.path, e.rule) for e in result.errors] == [("spec.parent", "parent")]


def test_hierarchy_with_an_empty_segment() -> None:
    result = run("Queue", _hier("a", "a//b", "1/1/1"))
    assert [(e.path, e.rule, e.message) for e in result.errors] == [
        (HIER_PATH, "hierarchy", "empty segment in hierarchy 'root/a//b'")
    ]


def test_a_missing_grandparent_is_not_the_new_queues_error() -> None:
    lookup = StaticLookup([make_queue("p", parent="gone")])
    assert run("Queue", make_queue("c", parent="p"), lookup=lookup).allowed


def test_queue_errors_come_in_section_order() -> None:
    """Name, resources, parent, hierarchy, then root immutability: the order a user reads."""
    old = make_queue("root", capability={"cpu": "4"})
    new = make_queue(
        "root",
        parent="root",
        capability={"cpu": "2"},
        deserved={"cpu": "3"},
        guarantee={"resource": {"cpu": "5", "memory": "1Gi"}},
    )
    new["metadata"]["annotations"] = {
        "volcano.sh/hierarchy": "root//x",
        "volcano.sh/hierarchy-weights": "1/0",
    }
    result = run("Queue", new, op="UPDATE", old=old)
    assert [(e.path, e.rule) for e in result.errors] == [
        ("spec.deserved.cpu", "deservedLessEqualCapability"),
        ("spec.guarantee.resource.cpu", "guaranteeLessEqualDeserved"),
        ("spec.guarantee.resource.cpu", "guaranteeLessEqualCapability"),
        ("spec.guarantee.resource.memory", "guaranteeInDeserved"),
        ("spec.parent", "parent"),
        (HIER_WEIGHTS, "hierarchyWeights"),
        (HIER_WEIGHTS, "hierarchyWeights"),
        (HIER_PATH, "hierarchy"),
        ("spec.capability", "immutable"),
        ("spec.deserved", "immutable"),
        ("spec.guarantee", "immutable"),
    ]


def test_a_queue_update_without_a_spec_checks_the_name_only() -> None:
    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {}}
    result = run("Queue", queue, op="UPDATE", old=make_queue("q"))
    assert [(e.path, e.rule) for e in result.errors] == [("metadata.name", "required")]
