"""Page models of the live views: overview, queues, one job (the job list: `gangs`; nodes:
`racks`). Plain JSON-ready dicts.

Why this exists: the HTML pages and the JSON API show the same figures, so both are rendered
from these models. Amounts are reported as people read them (`describe_amount`: 1.5 cpu,
8 GPUs, 64Gi) next to the internal integers the charts scale by.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from batch.api.fairshare import read_fair_share
from batch.api.owners import VCJOB_KIND, workload_of
from batch.api.resources import describe_amount, parse_resource_list
from batch.api.timestamps import format_time
from batch.dashboard import racks
from batch.dashboard.state import LiveState, Obj, StateLookup
from batch.kube.why import explain, explain_workload, queue_parent, queue_weight

__all__ = ["job_detail", "overview", "queues"]

GPU = "nvidia.com/gpu"
SHOWN = ("cpu", "memory", GPU)


def _amounts(values: Mapping[str, int]) -> dict[str, dict[str, Any]]:
    return {
        r: {"amount": values.get(r, 0), "text": describe_amount(r, values.get(r, 0))} for r in SHOWN
    }


def _safe(rl: Any) -> dict[str, int]:
    try:
        return parse_resource_list(rl if isinstance(rl, Mapping) else {})
    except ValueError:
        return {}


def _add(acc: dict[str, int], more: Mapping[str, int]) -> None:
    for res, amount in more.items():
        acc[res] = acc.get(res, 0) + amount


def overview(state: LiveState) -> dict[str, Any]:
    """Nodes x GPUs: allocated, idle, and idle on partly used nodes (fragmented); the racks."""
    used = state.used
    by_rack = racks.nodes(state)
    rows = sorted(
        (r for rack in by_rack["racks"] for r in rack["node_rows"]), key=lambda r: str(r["name"])
    )
    capacity, allocated = state.capacity(), dict[str, int]()
    for node_used in used.values():
        _add(allocated, node_used)
    idle = {r: max(0, capacity.get(r, 0) - allocated.get(r, 0)) for r in SHOWN}
    gpus = sum(r["gpus"] for r in rows)
    gpus_used = sum(min(r["gpus_used"], r["gpus"]) for r in rows)
    fragmented = sum(r["gpus"] - r["gpus_used"] for r in rows if 0 < r["gpus_used"] < r["gpus"])
    phases = Counter(p["phase"] for p in state.items("Pod"))
    return {
        "nodes": len(rows),
        "ready": sum(1 for r in rows if r["ready"] and not r["cordoned"]),
        "gpus": {
            "total": gpus,
            "allocated": gpus_used,
            "idle": gpus - gpus_used,
            "fragmented": fragmented,
        },
        "capacity": _amounts(capacity),
        "allocated": _amounts(allocated),
        "idle": _amounts(idle),
        "pods": dict(sorted(phases.items())),
        "node_rows": rows,
        "racks": [{k: v for k, v in r.items() if k != "node_rows"} for r in by_rack["racks"]],
    }


def _tree(all_queues: list[Obj]) -> list[tuple[Obj, int]]:
    """Queues depth first from root (orphans last), with their depth."""
    children: dict[str, list[Obj]] = {}
    for q in all_queues:
        children.setdefault(queue_parent(q), []).append(q)
    out: list[tuple[Obj, int]] = []
    seen: set[str] = set()

    def walk(parent: str, depth: int) -> None:
        for q in sorted(children.get(parent, []), key=lambda q: str(q["metadata"]["name"])):
            name = str(q["metadata"]["name"])
            if name not in seen:
                seen.add(name)
                out.append((q, depth))
                walk(name, depth + 1)

    walk("", 0)
    out += [(q, 0) for q in all_queues if q["metadata"]["name"] not in seen]
    return out


def _demand(state: LiveState) -> dict[str, dict[str, int]]:
    """Per queue, the minResources of its PodGroups waiting to be admitted or placed."""
    demand: dict[str, dict[str, int]] = {}
    for pg in state.items("PodGroup"):
        if ((pg.get("status") or {}).get("phase") or "Pending") in ("Pending", "Inqueue"):
            queue = (pg.get("spec") or {}).get("queue") or "default"
            _add(demand.setdefault(queue, {}), _safe((pg.get("spec") or {}).get("minResources")))
    return demand


def _weight_shares(tree: list[tuple[Obj, int]], capacity: Mapping[str, int]) -> dict[str, float]:
    """Each queue's fraction of the cluster by weight among its siblings, down the tree."""
    share: dict[str, float] = {"": 1.0}
    for q, _depth in tree:
        parent = queue_parent(q)
        siblings = sum(queue_weight(s) for s, _d in tree if queue_parent(s) == parent)
        share[str(q["metadata"]["name"])] = share.get(parent, 1.0) * queue_weight(q) / siblings
    return share


#: how the page says that a deserved share is not the scheduler's
NOT_COMPUTED = "not computed by the scheduler yet: "


def _deserved(q: Obj, by_share: dict[str, int]) -> tuple[dict[str, int], dict[str, Any]]:
    """A queue's deserved share and where it comes from: the figures the scheduler published
    on the Queue (`tephra.io/fair-share`), else, said as such, spec.deserved or the weight
    share of the cluster."""
    published = read_fair_share(q)
    if published is not None:
        at = published.session_time
        return published.deserved, {
            "deserved_source": "scheduler",
            "deserved_session": published.session or None,
            "deserved_at": format_time(dt.datetime.fromtimestamp(at, dt.UTC)) if at else None,
            "effective_weight": published.effective_weight,
            "usage_share": published.usage_share,
        }
    spec = q.get("spec") or {}
    fallback = "spec.deserved" if spec.get("deserved") else "weight share"
    return _safe(spec.get("deserved")) or by_share, {
        "deserved_source": NOT_COMPUTED + fallback,
        "deserved_session": None,
        "deserved_at": None,
        "effective_weight": None,
        "usage_share": None,
    }


def queues(state: LiveState) -> dict[str, Any]:
    """The queue tree: weight, state, capability, weight share, the scheduler's deserved share,
    allocated, pending demand."""
    tree = _tree(state.items("Queue"))
    capacity, demand = state.capacity(), _demand(state)
    shares = _weight_shares(tree, capacity)
    rows = []
    for q, depth in tree:
        name = str(q["metadata"]["name"])
        spec, status = q.get("spec") or {}, q.get("status") or {}
        by_share = {r: int(capacity.get(r, 0) * shares[name]) for r in SHOWN}
        deserved, source = _deserved(q, by_share)
        rows.append(
            {
                "name": name,
                "parent": queue_parent(q),
                "depth": depth,
                "weight": queue_weight(q),
                "state": status.get("state") or "Open",
                "share": round(shares[name], 4),
                "deserved": _amounts(deserved),
                **source,
                "capability": _amounts(_safe(spec.get("capability")))
                if spec.get("capability")
                else None,
                "allocated": _amounts(_safe(status.get("allocated"))),
                "pending": _amounts(demand.get(name, {})),
                "podgroups": {
                    k: int(status.get(k) or 0) for k in ("pending", "inqueue", "running")
                },
            }
        )
    return {"capacity": _amounts(capacity), "queues": rows}


def _job_phase(job: Obj) -> str:
    return str(((job.get("status") or {}).get("state") or {}).get("phase") or "Pending")


def _job_row(job: Obj) -> dict[str, Any]:
    meta, spec, status = job["metadata"], job.get("spec") or {}, job.get("status") or {}
    return {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "queue": spec.get("queue") or "default",
        "phase": _job_phase(job),
        "min_available": spec.get("minAvailable"),
        "replicas": sum(int(t.get("replicas") or 0) for t in spec.get("tasks") or []),
        "pending": int(status.get("pending") or 0),
        "running": int(status.get("running") or 0),
        "succeeded": int(status.get("succeeded") or 0),
        "failed": int(status.get("failed") or 0),
        "created": meta.get("creationTimestamp") or "",
    }


def _events(state: LiveState, namespace: str, names: Iterable[str]) -> list[Obj]:
    found = [e for name in names for e in state.events_about(namespace, name)]
    return sorted(found, key=lambda e: str(e["last"]))


def _exit(pod: Mapping[str, Any]) -> str:
    """`137 (OOMKilled)`: how the pod's container ended, if one did."""
    done = pod.get("terminated") or {}
    if done.get("exitCode") is None:
        return ""
    return f"{done['exitCode']} ({done['reason']})" if done.get("reason") else str(done["exitCode"])


def job_detail(state: LiveState, namespace: str, name: str) -> dict[str, Any] | None:
    """One job: phase history, pods and their nodes, the `job why` explanation, events."""
    job = state.named("Job", name, namespace)
    if job is None:
        return _gang_detail(state, namespace, name)
    pods = [
        {"name": p["metadata"]["name"], "phase": p["phase"], "node": p["node"], "exit": _exit(p)}
        for p in state.items("Pod")
        if p["job"] == name and p["metadata"].get("namespace") == namespace
    ]
    pods.sort(key=lambda p: str(p["name"]))
    history = [
        {"phase": c.get("status"), "at": c.get("lastTransitionTime")}
        for c in (job.get("status") or {}).get("conditions") or []
    ]
    pg_name = f"{name}-{job['metadata'].get('uid')}"
    return {
        **_job_row(job),
        "history": history,
        "pods": pods,
        "why": explain(job, StateLookup(state)),
        "events": _events(state, namespace, [name, pg_name, *(p["name"] for p in pods)]),
    }


def _gang_detail(state: LiveState, namespace: str, name: str) -> dict[str, Any] | None:
    """The job page of a workload that is not a VCJob (a PyTorchJob, RayCluster...): its
    PodGroup, found by the workload's name, and its pods, explained as `tephra job why` does."""
    gangs = [
        pg
        for pg in state.items("PodGroup")
        if (pg.get("metadata") or {}).get("namespace") == namespace
        and workload_of(pg)[1] == name
        and workload_of(pg)[0] != VCJOB_KIND
    ]
    if not gangs:
        return None
    pg = gangs[0]
    group, spec, status = pg["metadata"].get("name"), pg.get("spec") or {}, pg.get("status") or {}
    pods = [
        {"name": p["metadata"]["name"], "phase": p["phase"], "node": p["node"], "exit": _exit(p)}
        for p in state.items("Pod")
        if p["group"] == group and p["metadata"].get("namespace") == namespace
    ]
    pods.sort(key=lambda p: str(p["name"]))
    return {
        "name": name,
        "namespace": namespace,
        "kind": workload_of(pg)[0],
        "queue": spec.get("queue") or "default",
        "phase": status.get("phase") or "Pending",
        "min_available": spec.get("minMember"),
        "created": pg["metadata"].get("creationTimestamp") or "",
        "history": [],
        "pods": pods,
        "why": explain_workload(pg, StateLookup(state)),
        "events": _events(state, namespace, [str(group), *(p["name"] for p in pods)]),
    }
