"""The dashboard's picture of the cluster, kept current by watches (`batch.kube.informer`).

Why this exists: a page load must not list 50,000 pods from the API server. The reflectors list
each kind once, then follow its watch; this module is their sink. Pods and Nodes are stored
slimmed to the fields the pages read (a pod's requests are counted once, on arrival, with
`batch.api.pods`), Events are indexed by the object they are about. `version` counts changes so
the server can tell browsers when to refresh, and derived views can be cached per version.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from batch.api.pods import pod_requests
from batch.api.resources import parse_resource_list
from batch.kube.client import RESOURCES, KubeClient, Resource
from batch.kube.informer import Reflector, ReflectorSet
from batch.kube.why import terminated_container

__all__ = ["KINDS", "LiveState", "reflectors"]

Obj = dict[str, Any]

JOB = Resource("batch.volcano.sh/v1alpha1", "jobs", "Job")
#: what the dashboard watches, by kind
KINDS: dict[str, Resource] = {
    **{
        k: RESOURCES[k]
        for k in ("Node", "Pod", "PodGroup", "Queue", "Event", "PriorityClass", "HyperNode")
    },
    "Job": JOB,
}
_GROUP = "scheduling.k8s.io/group-name"
_JOB_LABEL = "volcano.sh/job-name"
_DONE = ("Succeeded", "Failed")
#: the most events kept per involved object (the newest win)
EVENTS_PER_OBJECT = 20


def _tolerant(rl: Any, _where: str) -> Mapping[str, int]:
    try:
        return parse_resource_list(rl if isinstance(rl, Mapping) else {})
    except ValueError:
        return {}


def _slim_meta(obj: Mapping[str, Any], *keys: str) -> Obj:
    meta = obj.get("metadata") or {}
    out = {k: meta[k] for k in ("name", "namespace", "uid", "creationTimestamp") if k in meta}
    for key in keys:
        if meta.get(key):
            out[key] = meta[key]
    return out


def slim_pod(pod: Mapping[str, Any]) -> Obj:
    """A pod as the pages need it: who it belongs to, where it runs, what it holds."""
    meta = pod.get("metadata") or {}
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    return {
        "metadata": _slim_meta(pod),
        "group": str((meta.get("annotations") or {}).get(_GROUP) or ""),
        "job": str((meta.get("labels") or {}).get(_JOB_LABEL) or ""),
        "node": str(spec.get("nodeName") or ""),
        "phase": str(status.get("phase") or "Pending"),
        "requests": dict(pod_requests(spec, _tolerant)) if spec else {},
        "terminated": terminated_container(status),
        "message": str(status.get("reason") or status.get("message") or ""),
    }


def slim_node(node: Mapping[str, Any]) -> Obj:
    status = node.get("status") or {}
    conditions = status.get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return {
        "metadata": _slim_meta(node, "labels"),
        "status": {"allocatable": status.get("allocatable") or {}},
        "alloc": dict(_tolerant(status.get("allocatable"), "allocatable")),
        "ready": ready,
        "unschedulable": bool((node.get("spec") or {}).get("unschedulable")),
    }


def slim_event(event: Mapping[str, Any]) -> Obj:
    involved = event.get("involvedObject") or {}
    return {
        "metadata": _slim_meta(event),
        "involved": f"{involved.get('kind', '')}/{involved.get('name', '')}",
        "type": event.get("type") or "",
        "reason": event.get("reason") or "",
        "message": event.get("message") or "",
        "count": event.get("count") or 1,
        "last": event.get("lastTimestamp") or event.get("eventTime") or "",
    }


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return str(meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}")


_SLIM = {"Pod": slim_pod, "Node": slim_node, "Event": slim_event}


@dataclass
class LiveState:
    """Objects by kind and uid, fed by watch events; `version` grows with every change."""

    objects: dict[str, dict[str, Obj]] = field(default_factory=lambda: {k: {} for k in KINDS})
    #: (namespace, involved name) -> event uid -> slim event
    events_by_object: dict[tuple[str, str], dict[str, Obj]] = field(default_factory=dict)
    #: node name -> what the pods bound to it and not finished request, and how many they are
    #: (`pods`), kept as pods change
    used: dict[str, dict[str, int]] = field(default_factory=dict)
    version: int = 0

    def sink(self, kind: str, etype: str, obj: dict[str, Any]) -> None:
        """`batch.kube.informer.EventSink`: apply one watch event."""
        store = self.objects.setdefault(kind, {})
        key = _key(obj)
        if kind == "Event":
            self._index_event(etype, obj)
        old = store.pop(key, None) if etype == "DELETED" else store.get(key)
        if etype != "DELETED":
            slim = _SLIM.get(kind)
            store[key] = slim(obj) if slim is not None else obj
        if kind == "Pod":
            self._account(old, -1)
            self._account(store.get(key) if etype != "DELETED" else None, 1)
        self.version += 1

    def _account(self, pod: Obj | None, sign: int) -> None:
        if pod is None or not pod["node"] or pod["phase"] in _DONE:
            return
        node = self.used.setdefault(pod["node"], {})
        for res, amount in pod["requests"].items():
            node[res] = node.get(res, 0) + sign * amount
        node["pods"] = node.get("pods", 0) + sign

    def _index_event(self, etype: str, event: Mapping[str, Any]) -> None:
        involved = event.get("involvedObject") or {}
        meta = event.get("metadata") or {}
        where = (str(meta.get("namespace") or ""), str(involved.get("name") or ""))
        bucket = self.events_by_object.setdefault(where, {})
        if etype == "DELETED":
            bucket.pop(_key(event), None)
            return
        bucket[_key(event)] = slim_event(event)
        if len(bucket) > EVENTS_PER_OBJECT:
            oldest = min(bucket, key=lambda k: str(bucket[k]["last"]))
            bucket.pop(oldest)

    # ---------------------------------------------------------------- reads
    def items(self, kind: str) -> list[Obj]:
        return list(self.objects.get(kind, {}).values())

    def named(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        for obj in self.objects.get(kind, {}).values():
            meta = obj.get("metadata") or {}
            if meta.get("name") == name and (
                namespace is None or meta.get("namespace") == namespace
            ):
                return obj
        return None

    def events_about(self, namespace: str, name: str) -> list[Obj]:
        found = self.events_by_object.get((namespace, name), {}).values()
        return sorted(found, key=lambda e: str(e["last"]))

    def capacity(self) -> dict[str, int]:
        """The nodes' allocatable resources, summed (parsed once, when a node arrives)."""
        total: dict[str, int] = {}
        for node in self.items("Node"):
            for res, amount in node["alloc"].items():
                total[res] = total.get(res, 0) + amount
        return total


class StateLookup:
    """`batch.kube.why.WhyLookup` over the live state: `job why` without API calls."""

    def __init__(self, state: LiveState) -> None:
        self.state = state

    def podgroup(self, namespace: str, name: str) -> Obj | None:
        return self.state.named("PodGroup", name, namespace)

    def queue(self, name: str) -> Obj | None:
        return self.state.named("Queue", name)

    def events(self, namespace: str, involved: str) -> Sequence[Obj]:
        return self.state.events_about(namespace, involved)

    def podgroups(self) -> Sequence[Obj]:
        return self.state.items("PodGroup")

    def priorities(self) -> dict[str, int]:
        return {
            str(pc["metadata"]["name"]): int(pc.get("value") or 0)
            for pc in self.state.items("PriorityClass")
        }

    def queues(self) -> Sequence[Obj]:
        return self.state.items("Queue")

    def capacity(self) -> dict[str, int]:
        return self.state.capacity()

    def pods(self, namespace: str, group: str) -> list[Obj]:
        return [
            {**p, "name": p["metadata"].get("name"), "namespace": namespace}
            for p in self.state.items("Pod")
            if p["group"] == group and p["metadata"].get("namespace") == namespace
        ]

    def free_by_node(self) -> dict[str, dict[str, int]]:
        free = {}
        for node in self.state.items("Node"):
            if node["ready"] and not node["unschedulable"]:
                name = str(node["metadata"].get("name"))
                used = self.state.used.get(name, {})
                free[name] = {r: a - used.get(r, 0) for r, a in node["alloc"].items()}
        return free

    def evictions(self) -> list[Obj]:
        return [
            ev
            for bucket in self.state.events_by_object.values()
            for ev in bucket.values()
            if ev["reason"] in ("Preempted", "Reclaimed")
        ]


def reflectors(client: KubeClient, state: LiveState) -> ReflectorSet:
    """One reflector per watched kind, all feeding `state`."""
    return ReflectorSet([Reflector(client, res, state.sink) for res in KINDS.values()])
