"""Turn raw Kubernetes JSON (as a watch delivers it) into model records.

Only the fields the scheduler reads are extracted; everything else is ignored. Quantities go
through ``batch.api.resources.to_internal`` so the model holds exact integers.
"""

from __future__ import annotations

import json
import marshal
from collections.abc import Mapping
from typing import Any

import numpy as np

from batch.api import pods
from batch.api.pods import running_requests
from batch.api.resources import PODS, parse_resource_list
from batch.api.timestamps import epoch_seconds
from batch.api.views import as_mapping
from batch.model.info import QueueInfo
from batch.model.nodes import DEFAULT_MAX_PODS, NodeMeta
from batch.model.resources import IntVec, ResourceIndex

GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
TASK_SPEC_KEY = "volcano.sh/task-spec"
TASK_INDEX_KEY = "volcano.sh/task-index"
PREEMPTABLE_KEY = "volcano.sh/preemptable"
DEFAULT_QUEUE = "default"
ROOT_QUEUE = "root"

#: RFC 3339 -> epoch seconds (0.0 when absent or malformed), as the model keeps times.
parse_time = epoch_seconds


def _list(value: object) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def meta_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_mapping(obj.get("metadata"))


_qcache: dict[tuple[str, str], int] = {}


def amounts(rl: Mapping[str, Any]) -> dict[str, int]:
    """``parse_resource_list`` with a memo (pods repeat the same few quantities)."""
    out: dict[str, int] = {}
    for name, value in rl.items():
        key = (str(name), str(value))
        amount = _qcache.get(key)
        if amount is None:
            amount = parse_resource_list({name: value})[str(name)]
            if len(_qcache) < 100_000:
                _qcache[key] = amount
        out[str(name)] = amount
    return out


def _memo_parse(rl: Any, _where: str) -> Mapping[str, int]:
    return amounts(as_mapping(rl))


def pod_requests(spec: Mapping[str, Any]) -> tuple[dict[str, int], dict[str, int]]:
    """(Resreq, InitResreq) of a pod spec (``volcano-semantics.md#task-status``): what the running
    pod holds
    (containers, sidecars, overhead) and what must fit to start it, both by
    :mod:`batch.api.pods`."""
    total = running_requests(spec, _memo_parse)
    init = pods.pod_requests(spec, _memo_parse)
    total.pop(PODS, None)
    init.pop(PODS, None)
    return total, init


def _host_ports(spec: Mapping[str, Any]) -> list[tuple[str, str, int]]:
    out: list[tuple[str, str, int]] = []
    for c in _list(spec.get("containers")) + _list(spec.get("initContainers")):
        for raw in _list(as_mapping(c).get("ports")):
            p = as_mapping(raw)
            hp = p.get("hostPort")
            if isinstance(hp, int) and hp > 0:
                out.append((str(p.get("hostIP") or "0.0.0.0"), str(p.get("protocol") or "TCP"), hp))
    return sorted(set(out))


def pod_uid(meta: Mapping[str, Any]) -> str:
    """A pod's uid from its metadata (``namespace/name`` when it has none)."""
    return str(meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}")


def podgroup_id(meta: Mapping[str, Any]) -> str:
    """The job id (``namespace/name``) of the PodGroup with metadata ``meta``."""
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"


def same_json(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are the same JSON value: equal, with the same types and key order all
    through. ``==`` alone equates 2, 2.0 and True, which parse differently (``priority``,
    ``hostPort``, ``json.dumps`` of a term); equal ``marshal`` bytes decode to one value
    (format 2: by content only, without the back-references and interning marks of later
    formats). Says False for a type marshal does not take, which costs a full parse, never a
    wrong fact."""
    if a is b:
        return True
    try:
        return bool(a == b) and marshal.dumps(a, _MARSHAL) == marshal.dumps(b, _MARSHAL)
    except (ValueError, TypeError):
        return False


_MARSHAL = 2


#: the metadata a pod's facts are read from, besides ``deletionTimestamp``
_FACT_META = ("uid", "namespace", "name", "labels", "creationTimestamp", "annotations")
#: what ``PodFacts.restatus`` reads afresh: a binding and a status update change only these
_STATUS_SPEC = "nodeName"


def _same_spec(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    """``new`` and ``old`` pod specs say the same apart from ``nodeName``."""
    if new is old:
        return True
    a = [(k, v) for k, v in new.items() if k != _STATUS_SPEC]
    b = [(k, v) for k, v in old.items() if k != _STATUS_SPEC]
    if len(a) != len(b):
        return False
    for (ka, va), (kb, vb) in zip(a, b, strict=True):
        if type(ka) is not str or ka != kb or not same_json(va, vb):
            return False
    return True


#: a pod's placement constraints when it has none (most pods), and their key
_NONE: list[Any] = [{}, None, [], [], [], [], [], ""]
_NO_CONSTRAINTS = json.dumps(_NONE, sort_keys=True, default=str)


#: facts read from a pod's spec are kept by the spec's ``marshal`` bytes (``spec_key``): pods of
#: one template share their spec's content, and equal bytes are one JSON value, types and key
#: order included (``same_json``), so the facts are those parsing gives (off: parse every spec,
#: which tests/model/test_updates.py compares with)
MEMO_SPECS = True
_SPEC_MEMO_SIZE = 4096
_spec_memo: dict[bytes, _SpecFacts] = {}


def spec_key(spec: Any) -> bytes | None:
    """The memo key of spec ``spec``: its ``marshal`` bytes (None when it is not a dict or
    marshal does not take it: parse it)."""
    if type(spec) is not dict:
        return None
    try:
        return marshal.dumps(spec, _MARSHAL)
    except (ValueError, TypeError):
        return None


class _SpecFacts:
    """What ``PodFacts`` reads from a pod's spec (shared by the facts of equal specs: none of
    it is changed after parsing)."""

    __slots__ = (
        "best_effort",
        "gated",
        "host_ports",
        "init_req",
        "node_name",
        "pod_affinity",
        "pod_anti_affinity",
        "preemption_policy",
        "preferred_terms",
        "priority",
        "priority_class_name",
        "req",
        "required_terms",
        "scheduler_name",
        "selector",
        "template_key",
        "tolerations",
    )

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.scheduler_name = str(spec.get("schedulerName") or "default-scheduler")
        self.node_name = str(spec.get("nodeName") or "")
        prio = spec.get("priority")
        self.priority = int(prio) if isinstance(prio, int) else 1
        self.priority_class_name = str(spec.get("priorityClassName") or "")
        self.preemption_policy = str(spec.get("preemptionPolicy") or "")
        self.gated = bool(_list(spec.get("schedulingGates")))
        self.req, self.init_req = pod_requests(spec)
        self.best_effort = not any(v > 0 for v in self.req.values())
        self.selector = {str(k): str(v) for k, v in as_mapping(spec.get("nodeSelector")).items()}
        aff = as_mapping(spec.get("affinity"))
        na = as_mapping(aff.get("nodeAffinity"))
        req_na = na.get("requiredDuringSchedulingIgnoredDuringExecution")
        self.required_terms: list[dict[str, Any]] | None = (
            [dict(t) for t in _list(as_mapping(req_na).get("nodeSelectorTerms"))]
            if req_na is not None
            else None
        )
        self.preferred_terms = [
            dict(t) for t in _list(na.get("preferredDuringSchedulingIgnoredDuringExecution"))
        ]
        pa = as_mapping(aff.get("podAffinity"))
        paa = as_mapping(aff.get("podAntiAffinity"))
        self.pod_affinity = [
            dict(t) for t in _list(pa.get("requiredDuringSchedulingIgnoredDuringExecution"))
        ]
        self.pod_anti_affinity = [
            dict(t) for t in _list(paa.get("requiredDuringSchedulingIgnoredDuringExecution"))
        ]
        self.tolerations = [dict(t) for t in _list(spec.get("tolerations"))]
        self.host_ports = _host_ports(spec)
        self.template_key: tuple[Any, ...] = (
            tuple(sorted(self.req.items())),
            tuple(sorted(self.init_req.items())),
            self.constraints(""),
        )

    def constraints(self, namespace: str) -> str:
        """The placement constraints' part of the template key (the namespace counts only
        with inter-pod terms)."""
        parts = [
            self.selector,
            self.required_terms,
            self.preferred_terms,
            self.tolerations,
            self.host_ports,
            self.pod_affinity,
            self.pod_anti_affinity,
            namespace if (self.pod_affinity or self.pod_anti_affinity) else "",
        ]
        return _NO_CONSTRAINTS if parts == _NONE else json.dumps(parts, sort_keys=True, default=str)


class PodFacts:
    """Everything the cache needs from one pod object."""

    __slots__ = (
        "best_effort",
        "creation",
        "deleting",
        "gated",
        "group",
        "host_ports",
        "init_req",
        "labels",
        "name",
        "namespace",
        "node_name",
        "nominated_node",
        "phase",
        "pod_affinity",
        "pod_anti_affinity",
        "preemptable",
        "preemption_policy",
        "preferred_terms",
        "priority",
        "priority_class_name",
        "req",
        "required_terms",
        "role",
        "scheduler_name",
        "selector",
        "task_index",
        "template_key",
        "tolerations",
        "uid",
    )

    def __init__(self, obj: Mapping[str, Any]) -> None:
        meta = meta_of(obj)
        raw_spec = obj.get("spec")
        status = as_mapping(obj.get("status"))
        ann = as_mapping(meta.get("annotations"))
        labels = as_mapping(meta.get("labels"))
        self.uid = pod_uid(meta)
        self.namespace = str(meta.get("namespace") or "default")
        self.name = str(meta.get("name") or "")
        self.labels: Mapping[str, str] = labels
        self.creation = parse_time(meta.get("creationTimestamp"))
        self.deleting = bool(meta.get("deletionTimestamp"))
        self.group = str(ann.get(GROUP_NAME_ANNOTATION) or "")
        self.role = str(ann.get(TASK_SPEC_KEY) or labels.get(TASK_SPEC_KEY) or "")
        idx = ann.get(TASK_INDEX_KEY, labels.get(TASK_INDEX_KEY))
        try:
            self.task_index = int(idx) if idx is not None else -1
        except (TypeError, ValueError):
            self.task_index = -1
        pre = ann.get(PREEMPTABLE_KEY, labels.get(PREEMPTABLE_KEY))
        self.preemptable = str(pre).lower() != "false" if pre is not None else True
        self.phase = str(status.get("phase") or "Pending")
        self.nominated_node = str(status.get("nominatedNodeName") or "")
        key = spec_key(raw_spec) if MEMO_SPECS else None
        got = None if key is None else _spec_memo.get(key)
        if got is None:
            got = _SpecFacts(as_mapping(raw_spec))
            if key is not None:
                if len(_spec_memo) >= _SPEC_MEMO_SIZE:
                    _spec_memo.clear()
                _spec_memo[key] = got
        self.scheduler_name = got.scheduler_name
        self.node_name = got.node_name
        self.priority = got.priority
        self.priority_class_name = got.priority_class_name
        self.preemption_policy = got.preemption_policy
        self.gated = got.gated
        self.req = got.req
        self.init_req = got.init_req
        self.best_effort = got.best_effort
        self.selector = got.selector
        self.required_terms = got.required_terms
        self.preferred_terms = got.preferred_terms
        self.pod_affinity = got.pod_affinity
        self.pod_anti_affinity = got.pod_anti_affinity
        self.tolerations = got.tolerations
        self.host_ports = got.host_ports
        self.template_key = (
            got.template_key
            if not (got.pod_affinity or got.pod_anti_affinity)
            else (*got.template_key[:2], got.constraints(self.namespace))
        )

    def restatus(self, old: Mapping[str, Any], obj: Mapping[str, Any]) -> bool:
        """Make these facts, read from the pod object ``old``, the facts of ``obj``, a later
        version of it, when it differs from ``old`` only where a binding or a status update
        writes (status, ``spec.nodeName``, ``metadata.deletionTimestamp``, fields no fact is
        read from): then they equal ``PodFacts(obj)`` field for field, without parsing the spec
        again (tests/model/test_updates.py). False, and nothing changed, otherwise (parse
        ``obj`` in full)."""
        meta = meta_of(obj)
        old_meta = meta_of(old)
        if meta is not old_meta:
            for key in _FACT_META:
                if not same_json(meta.get(key), old_meta.get(key)):
                    return False
        spec = as_mapping(obj.get("spec"))
        if not _same_spec(spec, as_mapping(old.get("spec"))):
            return False
        status = as_mapping(obj.get("status"))
        self.labels = as_mapping(meta.get("labels"))
        self.deleting = bool(meta.get("deletionTimestamp"))
        self.node_name = str(spec.get("nodeName") or "")
        self.phase = str(status.get("phase") or "Pending")
        self.nominated_node = str(status.get("nominatedNodeName") or "")
        return True


def node_facts(
    obj: Mapping[str, Any], index: ResourceIndex, selector: Mapping[str, str]
) -> tuple[NodeMeta, IntVec]:
    meta = meta_of(obj)
    spec = as_mapping(obj.get("spec"))
    status = as_mapping(obj.get("status"))
    labels = {str(k): str(v) for k, v in as_mapping(meta.get("labels")).items()}
    taints = sorted(
        (str(t.get("key", "")), str(t.get("value", "") or ""), str(t.get("effect", "")))
        for t in (as_mapping(x) for x in _list(spec.get("taints")))
    )
    ready = False
    for raw in _list(status.get("conditions")):
        cond = as_mapping(raw)
        if cond.get("type") == "Ready":
            ready = cond.get("status") == "True"
    if selector and any(labels.get(k) != v for k, v in selector.items()):
        ready = False
    alloc_list = status.get("allocatable") or status.get("capacity")
    alloc = parse_resource_list(as_mapping(alloc_list))
    alloc.setdefault(PODS, DEFAULT_MAX_PODS)
    vec = index.vector(alloc)
    return (
        NodeMeta(
            name=str(meta.get("name") or ""),
            labels=labels,
            taints=taints,
            unschedulable=bool(spec.get("unschedulable")),
            ready=ready,
            raw=obj,
        ),
        vec,
    )


def queue_facts(obj: Mapping[str, Any]) -> QueueInfo:
    meta = meta_of(obj)
    spec = as_mapping(obj.get("spec"))
    status = as_mapping(obj.get("status"))
    name = str(meta.get("name") or "")
    weight = spec.get("weight")
    reclaimable = spec.get("reclaimable")
    prio = spec.get("priority")
    return QueueInfo(
        name=name,
        uid=str(meta.get("uid") or name),
        weight=int(weight) if isinstance(weight, int) and weight > 0 else 1,
        capability=parse_resource_list(as_mapping(spec.get("capability"))),
        guarantee=parse_resource_list(
            as_mapping(as_mapping(spec.get("guarantee")).get("resource"))
        ),
        deserved=parse_resource_list(as_mapping(spec.get("deserved"))),
        reclaimable=reclaimable is not False,
        parent=str(spec.get("parent") or ("" if name == ROOT_QUEUE else ROOT_QUEUE)),
        priority=int(prio) if isinstance(prio, int) else 0,
        state=str(status.get("state") or "Open"),
        creation=parse_time(meta.get("creationTimestamp")),
        annotations={str(k): str(v) for k, v in as_mapping(meta.get("annotations")).items()},
        raw=obj,
    )


_QUOTA_KEY_PREFIXES = ("requests.", "limits.", "count/")


def scheduling_resources(rl: Mapping[str, Any]) -> dict[str, int]:
    """A PodGroup's minResources as scheduling dimensions.

    The job controller writes Kubernetes quota-usage keys beside the plain ones (`count/pods`,
    `requests.cpu`, `limits.memory`, ...; volcano-semantics.md#job-podgroup-and-pods). Like
    Volcano's `NewResource`, only
    the plain resource names count: quota keys are not node dimensions and would otherwise make
    every gang with minResources look unplaceable.
    """
    plain = {k: v for k, v in rl.items() if not str(k).startswith(_QUOTA_KEY_PREFIXES)}
    return parse_resource_list(plain)


def zeros_like(index: ResourceIndex) -> IntVec:
    return np.zeros(index.capacity, dtype=np.int64)
