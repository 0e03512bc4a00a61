"""Builders of raw Kubernetes JSON objects for tests, benchmarks and examples.

They produce exactly what a watch would deliver (dicts with metadata/spec/status), so code fed by
them exercises the same parsing as production.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

GROUP = "scheduling.k8s.io/group-name"


def node(
    name: str,
    *,
    cpu: str | int = "8",
    memory: str = "32Gi",
    gpu: int | str | None = None,
    pods: int | str = 110,
    labels: Mapping[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
    extra: Mapping[str, str | int] | None = None,
) -> dict[str, Any]:
    alloc: dict[str, Any] = {"cpu": str(cpu), "memory": memory, "pods": str(pods)}
    if gpu is not None:
        alloc["nvidia.com/gpu"] = str(gpu)
    for k, v in (extra or {}).items():
        alloc[k] = str(v)
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {"kubernetes.io/hostname": name})},
        "spec": spec,
        "status": {
            "allocatable": alloc,
            "capacity": dict(alloc),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(
    name: str,
    *,
    namespace: str = "default",
    group: str | None = None,
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    gpu: int | None = None,
    node_name: str | None = None,
    phase: str = "Pending",
    scheduler: str = "volcano",
    priority: int | None = None,
    priority_class: str | None = None,
    role: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    uid: str | None = None,
    created: str = "2026-01-01T00:00:00Z",
    deleting: bool = False,
    spec: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    req: dict[str, Any] = {}
    if cpu is not None:
        req["cpu"] = cpu
    if memory is not None:
        req["memory"] = memory
    if gpu is not None:
        req["nvidia.com/gpu"] = str(gpu)
    ann: dict[str, str] = dict(annotations or {})
    if group:
        ann[GROUP] = group
    if role:
        ann["volcano.sh/task-spec"] = role
    s: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "main", "image": "busybox", "resources": {"requests": req}}],
    }
    if node_name:
        s["nodeName"] = node_name
    if priority is not None:
        s["priority"] = priority
    if priority_class:
        s["priorityClassName"] = priority_class
    s.update(spec or {})
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid or f"uid-{namespace}-{name}",
        "annotations": ann,
        "labels": dict(labels or {}),
        "creationTimestamp": created,
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:01Z"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": s,
        "status": {"phase": phase},
    }


def podgroup(
    name: str,
    *,
    namespace: str = "default",
    min_member: int = 1,
    queue: str = "default",
    min_resources: Mapping[str, str] | None = None,
    phase: str = "Pending",
    priority_class: str | None = None,
    min_task_member: Mapping[str, int] | None = None,
    annotations: Mapping[str, str] | None = None,
    created: str = "2026-01-01T00:00:00Z",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member, "queue": queue}
    if min_resources is not None:
        spec["minResources"] = dict(min_resources)
    if priority_class:
        spec["priorityClassName"] = priority_class
    if min_task_member:
        spec["minTaskMember"] = dict(min_task_member)
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"pg-{namespace}-{name}",
            "annotations": dict(annotations or {}),
            "creationTimestamp": created,
        },
        "spec": spec,
        "status": {"phase": phase},
    }


def queue(
    name: str,
    *,
    weight: int = 1,
    capability: Mapping[str, str] | None = None,
    guarantee: Mapping[str, str] | None = None,
    deserved: Mapping[str, str] | None = None,
    reclaimable: bool | None = None,
    parent: str | None = None,
    priority: int | None = None,
    state: str = "Open",
    created: str = "2026-01-01T00:00:00Z",
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"weight": weight}
    if capability is not None:
        spec["capability"] = dict(capability)
    if guarantee is not None:
        spec["guarantee"] = {"resource": dict(guarantee)}
    if deserved is not None:
        spec["deserved"] = dict(deserved)
    if reclaimable is not None:
        spec["reclaimable"] = reclaimable
    if parent is not None:
        spec["parent"] = parent
    if priority is not None:
        spec["priority"] = priority
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {
            "name": name,
            "uid": f"q-{name}",
            "creationTimestamp": created,
            "annotations": dict(annotations or {}),
        },
        "spec": spec,
        "status": {"state": state},
    }


def priority_class(name: str, value: int, *, global_default: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "globalDefault": global_default,
    }
