"""Ready-made Node manifests for quick starts (`tephra sandbox nodes`) and tests.

Label keys (stable, documented in docs/sandbox.md):
- `kubernetes.io/hostname`: the node name, as kubelet sets it;
- `topology.tephra.io/rack`: `rack-<r>` when racks are requested (`--topology racks=N`);
- `topology.tephra.io/spine`: `spine-<s>` when spines are requested (`spines=M`);
- `nvidia.com/gpu.count` and `nvidia.com/gpu.present`, like the NVIDIA GPU feature discovery.
Nodes are spread round-robin over racks; racks are spread round-robin over spines.
"""

from __future__ import annotations

from typing import Any

from batch.api.topology import RACK_LABEL, SPINE_LABEL

HOSTNAME_LABEL = "kubernetes.io/hostname"
GPU_RESOURCE = "nvidia.com/gpu"


def parse_topology(text: str | None) -> dict[str, int]:
    """`racks=2,spines=1` -> {"racks": 2, "spines": 1} (ValueError with a clear message)."""
    out: dict[str, int] = {}
    if not text:
        return out
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in ("racks", "spines"):
            raise ValueError(f"--topology: expected racks=N[,spines=M], got {part!r}")
        try:
            n = int(value)
        except ValueError:
            raise ValueError(f"--topology: {key} must be an integer, got {value!r}") from None
        if n < 1:
            raise ValueError(f"--topology: {key} must be at least 1, got {n}")
        out[key] = n
    return out


def make_nodes(
    *,
    count: int = 1,
    gpus: int = 0,
    cpu: str = "64",
    memory: str = "512Gi",
    pods: int = 110,
    racks: int = 0,
    spines: int = 0,
    prefix: str = "node",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    nodes = []
    width = max(len(str(count - 1)), 1)
    for i in range(count):
        name = f"{prefix}-{i:0{width}d}"
        node_labels = {
            HOSTNAME_LABEL: name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            **(labels or {}),
        }
        if racks:
            rack = i % racks
            node_labels[RACK_LABEL] = f"rack-{rack}"
            if spines:
                node_labels[SPINE_LABEL] = f"spine-{rack % spines}"
        capacity = {
            "cpu": str(cpu),
            "memory": str(memory),
            "pods": str(pods),
            "ephemeral-storage": "1Ti",
        }
        if gpus:
            capacity[GPU_RESOURCE] = str(gpus)
            node_labels["nvidia.com/gpu.count"] = str(gpus)
            node_labels["nvidia.com/gpu.present"] = "true"
        node: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": node_labels},
            "spec": {},
            "status": {"capacity": capacity, "allocatable": dict(capacity)},
        }
        if taints:
            node["spec"]["taints"] = [dict(t) for t in taints]
        nodes.append(node)
    return nodes
