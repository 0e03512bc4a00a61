"""The nodes page: nodes grouped by rack, each with GPUs used/total, pods and whether cordoned.

Why racks: the scheduler's network-topology plugin places a gang inside one network domain,
so an admin asking "why does this gang wait while GPUs are idle?" needs to see where the idle
GPUs are. A node's rack is read as the plugin reads it: among the HyperNodes
(`topology.volcano.sh`) of the lowest tier that has nodes as members, the one that has this
node among them (exact name, regular expression or labels,
`batch.api.topology.member_matches`); without HyperNode objects, the node's
`topology.tephra.io/rack` label (the first of the plugin's automatic tier labels, as
`tephra sandbox --topology` sets it); else the node is in no rack.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from batch.api.resources import describe_amount
from batch.api.topology import RACK_LABEL, member_matches
from batch.dashboard.state import LiveState, Obj

__all__ = ["NO_RACK", "RACK_LABEL", "nodes", "rack_of"]

GPU = "nvidia.com/gpu"
#: the group of nodes that no HyperNode and no rack label places
NO_RACK = "(no rack)"


def _tier(hn: Obj) -> int:
    try:
        return int((hn.get("spec") or {}).get("tier") or 0)
    except (TypeError, ValueError):
        return 0


def _node_members(hn: Obj) -> list[Mapping[str, Any]]:
    members = (hn.get("spec") or {}).get("members") or []
    return [
        m.get("selector") or {}
        for m in members
        if isinstance(m, Mapping) and m.get("type", "Node") == "Node"
    ]


def rack_of(node_list: Sequence[Obj], hypernodes: Sequence[Obj]) -> dict[str, str]:
    """Node name -> rack name (NO_RACK when nothing places it). Members named exactly are
    looked up by name; only regular-expression and label members are tried node by node."""
    leaves = [hn for hn in hypernodes if _node_members(hn)]
    lowest = min((_tier(hn) for hn in leaves), default=0)
    racks = sorted(
        (hn for hn in leaves if _tier(hn) == lowest), key=lambda hn: str(hn["metadata"]["name"])
    )
    exact: dict[str, str] = {}
    other: list[tuple[str, Mapping[str, Any]]] = []
    for hn in racks:
        for sel in _node_members(hn):
            name = str(hn["metadata"]["name"])
            if isinstance(sel.get("exactMatch"), Mapping):
                exact.setdefault(str(sel["exactMatch"].get("name", "")), name)
            else:
                other.append((name, sel))
    out: dict[str, str] = {}
    for node in node_list:
        meta = node["metadata"]
        name, labels = str(meta["name"]), meta.get("labels") or {}
        found = exact.get(name) or next(
            (rack for rack, sel in other if member_matches(sel, name, labels)), None
        )
        out[name] = found or str(labels.get(RACK_LABEL) or "") or NO_RACK
    return out


#: the last (topology key, racks) computed: regular-expression members are tried node by node
#: (5,000 nodes x 250 HyperNodes: seconds), so the mapping is kept until the HyperNodes or the
#: nodes' names and labels change, not recomputed at every watch event
_last: list[tuple[Any, dict[str, str]]] = []


def _topology_key(node_list: Sequence[Obj], hypernodes: Sequence[Obj]) -> Any:
    return (
        tuple(sorted((str(h["metadata"].get("name")), str(h["metadata"].get("resourceVersion")),
                      str(h.get("spec"))) for h in hypernodes)),
        tuple((str(n["metadata"]["name"]), str(n["metadata"].get("labels") or {}))
              for n in node_list),
    )  # fmt: skip


def cached_rack_of(node_list: Sequence[Obj], hypernodes: Sequence[Obj]) -> dict[str, str]:
    """`rack_of`, computed again only when its inputs changed."""
    key = _topology_key(node_list, hypernodes)
    if _last and _last[0][0] == key:
        return _last[0][1]
    found = rack_of(node_list, hypernodes)
    _last[:] = [(key, found)]
    return found


def _node_row(node: Obj, used: Mapping[str, int]) -> dict[str, Any]:
    alloc: Mapping[str, int] = node["alloc"]
    return {
        "name": node["metadata"]["name"],
        "ready": bool(node["ready"]),
        "cordoned": bool(node["unschedulable"]),
        "gpus": alloc.get(GPU, 0) // 1000,
        "gpus_used": used.get(GPU, 0) // 1000,
        "cpu": describe_amount("cpu", alloc.get("cpu", 0)),
        "cpu_used": describe_amount("cpu", used.get("cpu", 0)),
        "pods": used.get("pods", 0),
    }


def _rack_row(name: str, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {
        "name": name,
        "nodes": len(rows),
        "ready": sum(1 for r in rows if r["ready"] and not r["cordoned"]),
        "cordoned": sum(1 for r in rows if r["cordoned"]),
        "gpus": sum(r["gpus"] for r in rows),
        "gpus_used": sum(min(r["gpus_used"], r["gpus"]) for r in rows),
        "pods": sum(r["pods"] for r in rows),
        "node_rows": list(rows),
    }


def nodes(state: LiveState) -> dict[str, Any]:
    """The racks (by name, NO_RACK last), each with its nodes (by name)."""
    node_list = state.items("Node")
    where = cached_rack_of(node_list, state.items("HyperNode"))
    grouped: dict[str, list[dict[str, Any]]] = {}
    for node in node_list:
        name = str(node["metadata"]["name"])
        row = _node_row(node, state.used.get(name, {}))
        grouped.setdefault(where[name], []).append(row)
    racks = [
        _rack_row(rack, sorted(rows, key=lambda r: str(r["name"])))
        for rack, rows in sorted(grouped.items(), key=lambda kv: (kv[0] == NO_RACK, kv[0]))
    ]
    return {"nodes": len(node_list), "racks": racks}
