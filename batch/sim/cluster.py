"""The simulated cluster: node groups, queues and their Kubernetes objects.

Why this exists: a simulation needs a cluster to replay onto, described the way an admin would
describe a real one (node groups with cpu, memory, GPUs, labels, taints and a rack/spine
topology) and turned into the very `v1 Node`, `HyperNode` and `Queue` objects the scheduler cache
eats in production. Trace readers build a `ClusterSpec` from what a trace publishes (Philly's VC
sizes, openb's node list); users can give their own as YAML::

    nodeGroups:
      - name: dgx
        count: 32
        cpu: "96"
        memory: 1Ti
        gpus: 8
        labels: {node.kubernetes.io/instance-type: dgx-a100}
        topology: {nodesPerRack: 8, racksPerSpine: 4}
    queues:
      - {name: research, weight: 3}
      - {name: prod, weight: 1, capability: {nvidia.com/gpu: "64"}}

All amounts are Kubernetes quantities; accounting stays in exact integers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from batch.api.resources import to_internal
from batch.api.yamlio import FileInputError, load_yaml_file
from batch.sim.errors import SimInputError

__all__ = [
    "ClusterSpec",
    "NodeGroup",
    "QueueSpec",
    "load_cluster_spec",
    "parse_cluster_spec",
]

GPU_RESOURCE = "nvidia.com/gpu"
RACK_LABEL = "topology.tephra.io/rack"
SPINE_LABEL = "topology.tephra.io/spine"


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """`count` identical nodes. Amounts are internal integers (milli-cpu, bytes, milli-GPU)."""

    name: str
    count: int
    cpu_milli: int
    memory_bytes: int
    gpu_milli: int
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Mapping[str, str]] = ()
    pods: int = 110
    nodes_per_rack: int = 0
    racks_per_spine: int = 0


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """A Volcano Queue: weight, optional capability/guarantee (ResourceList strings)."""

    name: str
    weight: int = 1
    capability: Mapping[str, str] | None = None
    guarantee: Mapping[str, str] | None = None
    reclaimable: bool = True


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    node_groups: tuple[NodeGroup, ...]
    queues: tuple[QueueSpec, ...] = ()

    @property
    def node_count(self) -> int:
        return sum(g.count for g in self.node_groups)

    @property
    def gpu_milli_total(self) -> int:
        return sum(g.count * g.gpu_milli for g in self.node_groups)

    def scaled(self, factor: float) -> ClusterSpec:
        """Every group's node count times `factor` (rounded, at least one node per group)."""
        if factor == 1.0:
            return self
        if factor <= 0:
            raise SimInputError(f"capacity scale: must be > 0, got {factor}")
        groups = tuple(replace(g, count=max(1, round(g.count * factor))) for g in self.node_groups)
        return replace(self, node_groups=groups)

    def with_queues(self, queues: Sequence[QueueSpec]) -> ClusterSpec:
        return replace(self, queues=tuple(queues))

    # -- Kubernetes objects -------------------------------------------------------------------

    def node_objects(self) -> list[dict[str, Any]]:
        """One `v1 Node` dict per node, Ready, with capacity == allocatable."""
        nodes: list[dict[str, Any]] = []
        for group in self.node_groups:
            alloc = {
                "cpu": f"{group.cpu_milli}m",
                "memory": str(group.memory_bytes),
                "pods": str(group.pods),
            }
            if group.gpu_milli:
                gpu = group.gpu_milli
                alloc[GPU_RESOURCE] = str(gpu // 1000) if gpu % 1000 == 0 else f"{gpu}m"
            for i in range(group.count):
                name = f"{group.name}-{i:04d}"
                labels = {
                    "kubernetes.io/hostname": name,
                    "tephra.io/node-group": group.name,
                    **dict(group.labels),
                }
                if group.nodes_per_rack:
                    rack = i // group.nodes_per_rack
                    labels[RACK_LABEL] = f"{group.name}-rack{rack}"
                    if group.racks_per_spine:
                        labels[SPINE_LABEL] = f"{group.name}-spine{rack // group.racks_per_spine}"
                nodes.append(
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "metadata": {"name": name, "uid": f"node-{name}", "labels": labels},
                        "spec": {"taints": [dict(t) for t in group.taints]},
                        "status": {
                            "capacity": dict(alloc),
                            "allocatable": dict(alloc),
                            "conditions": [{"type": "Ready", "status": "True"}],
                        },
                    }
                )
        return nodes

    def hypernode_objects(self) -> list[dict[str, Any]]:
        """Volcano `HyperNode`s for groups with a topology: racks (tier 1), spines (tier 2)."""
        out: list[dict[str, Any]] = []
        for group in self.node_groups:
            if not group.nodes_per_rack:
                continue
            racks = math.ceil(group.count / group.nodes_per_rack)
            for r in range(racks):
                out.append(
                    _hypernode(
                        f"{group.name}-rack{r}",
                        1,
                        "Node",
                        {"labelMatch": {"matchLabels": {RACK_LABEL: f"{group.name}-rack{r}"}}},
                    )
                )
            if group.racks_per_spine:
                for s in range(math.ceil(racks / group.racks_per_spine)):
                    first = s * group.racks_per_spine
                    last = min(racks, first + group.racks_per_spine)
                    members = [
                        {
                            "type": "HyperNode",
                            "selector": {"exactMatch": {"name": f"{group.name}-rack{r}"}},
                        }
                        for r in range(first, last)
                    ]
                    out.append(_hypernode_members(f"{group.name}-spine{s}", 2, members))
        return out

    def queue_objects(self) -> list[dict[str, Any]]:
        return [queue_object(q) for q in self.queues]


def queue_object(q: QueueSpec) -> dict[str, Any]:
    spec: dict[str, Any] = {"weight": q.weight, "reclaimable": q.reclaimable}
    if q.capability:
        spec["capability"] = dict(q.capability)
    if q.guarantee:
        spec["guarantee"] = {"resource": dict(q.guarantee)}
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": q.name, "uid": f"queue-{q.name}"},
        "spec": spec,
        "status": {"state": "Open"},
    }


def _hypernode(name: str, tier: int, member_type: str, selector: dict[str, Any]) -> dict[str, Any]:
    return _hypernode_members(name, tier, [{"type": member_type, "selector": selector}])


def _hypernode_members(name: str, tier: int, members: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name, "uid": f"hypernode-{name}"},
        "spec": {"tier": tier, "members": members},
    }


# -- YAML ------------------------------------------------------------------------------------


def _amount(where: str, resource: str, value: Any) -> int:
    try:
        return to_internal(resource, value)
    except ValueError as exc:
        raise SimInputError(f"{where}: {exc}") from None


def parse_cluster_spec(data: Any, *, source: str = "cluster spec") -> ClusterSpec:
    """Validate a decoded YAML document into a `ClusterSpec` (one clear error per problem)."""
    if not isinstance(data, Mapping):
        raise SimInputError(f"{source}: top level must be a mapping with 'nodeGroups'")
    raw_groups = data.get("nodeGroups")
    if not isinstance(raw_groups, list) or not raw_groups:
        raise SimInputError(f"{source}: nodeGroups: must be a non-empty list")
    groups: list[NodeGroup] = []
    for i, raw in enumerate(raw_groups):
        where = f"{source}: nodeGroups[{i}]"
        if not isinstance(raw, Mapping):
            raise SimInputError(f"{where}: must be a mapping")
        name = raw.get("name", f"group{i}")
        count = raw.get("count", 1)
        if not isinstance(name, str) or not name:
            raise SimInputError(f"{where}.name: must be a non-empty string")
        if not isinstance(count, int) or count < 0:
            raise SimInputError(f"{where}.count: must be a non-negative integer")
        topo = raw.get("topology") or {}
        if not isinstance(topo, Mapping):
            raise SimInputError(f"{where}.topology: must be a mapping")
        labels = raw.get("labels") or {}
        taints = raw.get("taints") or []
        if not isinstance(labels, Mapping):
            raise SimInputError(f"{where}.labels: must be a mapping")
        if not isinstance(taints, list):
            raise SimInputError(f"{where}.taints: must be a list")
        groups.append(
            NodeGroup(
                name=name,
                count=count,
                cpu_milli=_amount(f"{where}.cpu", "cpu", raw.get("cpu", "64")),
                memory_bytes=_amount(f"{where}.memory", "memory", raw.get("memory", "512Gi")),
                gpu_milli=_amount(f"{where}.gpus", GPU_RESOURCE, raw.get("gpus", 0)),
                labels={str(k): str(v) for k, v in labels.items()},
                taints=tuple(dict(t) for t in taints),
                pods=int(raw.get("pods", 110)),
                nodes_per_rack=int(topo.get("nodesPerRack", 0)),
                racks_per_spine=int(topo.get("racksPerSpine", 0)),
            )
        )
    queues: list[QueueSpec] = []
    for i, raw in enumerate(data.get("queues") or []):
        where = f"{source}: queues[{i}]"
        if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
            raise SimInputError(f"{where}: must be a mapping with a string 'name'")
        weight = raw.get("weight", 1)
        if not isinstance(weight, int) or weight < 1:
            raise SimInputError(f"{where}.weight: must be an integer >= 1")
        queues.append(
            QueueSpec(
                name=raw["name"],
                weight=weight,
                capability=raw.get("capability"),
                guarantee=raw.get("guarantee"),
                reclaimable=bool(raw.get("reclaimable", True)),
            )
        )
    return ClusterSpec(node_groups=tuple(groups), queues=tuple(queues))


def load_cluster_spec(path: str | Path) -> ClusterSpec:
    docs = _documents(path)
    return parse_cluster_spec(docs[0] if len(docs) == 1 else docs, source=str(path))


def _documents(path: str | Path) -> list[Any]:
    """The non-empty documents of a YAML file (SimInputError naming the file)."""
    try:
        return [d for d in load_yaml_file(path) if d is not None]
    except FileInputError as exc:
        raise SimInputError(str(exc)) from None


def cluster_from_nodes(nodes: Sequence[Mapping[str, Any]], *, source: str) -> ClusterSpec:
    """Group `v1 Node` objects with identical allocatable resources into node groups."""
    groups: dict[tuple[int, int, int, int], int] = {}
    for i, node in enumerate(nodes):
        status = node.get("status") or {}
        alloc = status.get("allocatable") or status.get("capacity") or {}
        where = f"{source}: node[{i}] status.allocatable"
        key = (
            _amount(f"{where}.cpu", "cpu", alloc.get("cpu", 0)),
            _amount(f"{where}.memory", "memory", alloc.get("memory", 0)),
            _amount(f"{where}.{GPU_RESOURCE}", GPU_RESOURCE, alloc.get(GPU_RESOURCE, 0)),
            int(alloc.get("pods", 110)),
        )
        groups[key] = groups.get(key, 0) + 1
    if not groups:
        raise SimInputError(f"{source}: no Node objects")
    out = []
    for i, ((cpu, mem, gpu, pods), count) in enumerate(sorted(groups.items())):
        out.append(NodeGroup(f"nodes{i}", count, cpu, mem, gpu, pods=pods))
    return ClusterSpec(node_groups=tuple(out))


def load_cluster_file(path: str | Path) -> ClusterSpec:
    """A cluster spec (`nodeGroups:`) or a Node manifest file (multi-document or `kind: List`)."""
    p = Path(path)
    docs = _documents(p)
    if len(docs) == 1 and isinstance(docs[0], Mapping) and "nodeGroups" in docs[0]:
        return parse_cluster_spec(docs[0], source=str(p))
    nodes: list[Mapping[str, Any]] = []
    for d in docs:
        if isinstance(d, Mapping) and d.get("kind") == "List":
            nodes.extend(x for x in d.get("items") or [] if isinstance(x, Mapping))
        elif isinstance(d, Mapping) and d.get("kind") == "Node":
            nodes.append(d)
        else:
            raise SimInputError(f"{p}: expected nodeGroups or v1 Node objects")
    return cluster_from_nodes(nodes, source=str(p))
