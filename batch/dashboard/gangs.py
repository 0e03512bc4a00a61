"""The jobs list: every gang (PodGroup) whatever made it, plus VCJobs that have none yet.

Why PodGroups: the scheduler schedules PodGroups, and a VCJob is only one of the things that make
them. Kubeflow's PyTorchJob and MPIJob, KubeRay's RayCluster, spark-operator's application, a
Deployment's pods gang-scheduled through an annotation or a bare pod all have one, named by its
owner reference (or Tephra's `tephra.io/workload-*` labels). Listing VCJobs only left those
invisible. A row says what owns the gang (kind and name), what it asks (GPUs), what it holds,
how long it has existed and waited, and, while it waits, the scheduler's reason from the
PodGroup's `Unschedulable` condition.

Rows are built once per state version (`gang_rows`); filtering and sorting (`JobQuery`) run per
request, since ages move with the clock. Filters are exact and case-insensitive (a namespace,
queue, phase, kind or submitter equal to the value), except `name`, a case-insensitive
substring; an unknown query parameter or sort column is refused (`QueryError`, answered 400)
rather than silently ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any
from urllib.parse import quote, urlencode

from batch.api.errors import UserError
from batch.api.integration import WORKLOAD_KIND_LABEL, WORKLOAD_NAME_LABEL
from batch.api.resources import parse_resource_list
from batch.api.timestamps import epoch_seconds
from batch.api.views import PodGroupView, podgroup_view
from batch.dashboard.state import LiveState, Obj
from batch.ledger.convert import SUBMITTER_ANNOTATION

__all__ = [
    "COLUMNS",
    "JOB_ROWS",
    "JobQuery",
    "QueryError",
    "gang_rows",
    "jobs",
    "pending_reason",
    "podgroup_detail",
]

GPU = "nvidia.com/gpu"
VCJOB_API = "batch.volcano.sh/"
#: rows of the job list beyond which the page says "narrow the filter"
JOB_ROWS = 500
#: PodGroup phases in which a gang still waits for its pods to be placed
WAITING = ("Pending", "Inqueue")
#: (key, heading) of the jobs table, in order; every key sorts
COLUMNS = (
    ("name", "job"),
    ("kind", "kind"),
    ("namespace", "namespace"),
    ("queue", "queue"),
    ("phase", "phase"),
    ("gpus", "GPUs asked"),
    ("gpus_held", "GPUs held"),
    ("pods", "pods running / min"),
    ("priority", "priority"),
    ("submitter", "submitter"),
    ("age", "age"),
    ("wait", "wait"),
    ("reason", "pending reason"),
)
#: query parameters the dashboard's token check consumes (never a filter)
PASSED = ("token",)


class QueryError(UserError):
    """A query the job list cannot answer (an unknown parameter or sort column)."""


def _owner(pg: PodGroupView) -> tuple[str, str, str]:
    """(kind, name, apiVersion) of what made the PodGroup: its controlling owner reference,
    else its first, else Tephra's workload labels, else the PodGroup itself."""
    ref = pg.owner
    if ref is not None:
        return (
            str(ref.get("kind") or ""),
            str(ref.get("name") or ""),
            str(ref.get("apiVersion") or ""),
        )
    if pg.labels.get(WORKLOAD_KIND_LABEL):
        return pg.labels[WORKLOAD_KIND_LABEL], pg.labels.get(WORKLOAD_NAME_LABEL, ""), ""
    return "PodGroup", pg.name, ""


def _gpus(rl: Any) -> int:
    try:
        parsed = parse_resource_list(rl if isinstance(rl, Mapping) else {})
    except ValueError:
        return 0
    return parsed.get(GPU, 0) // 1000


def pending_reason(pg: PodGroupView, phase: str) -> str:
    """The scheduler's last word on a waiting gang: its `Unschedulable` condition."""
    cond = pg.condition("Unschedulable")
    if cond is None or phase not in (*WAITING, "Unknown"):
        return ""
    reason, message = str(cond.get("reason") or ""), str(cond.get("message") or "")
    return f"{reason}: {message}" if reason and message else reason or message


@dataclass
class _Pods:
    """The pods of one gang: how many run, how many GPUs the bound unfinished ones hold."""

    running: int = 0
    total: int = 0
    gpus_held: int = 0


def _pods_by_group(state: LiveState) -> dict[tuple[str, str], _Pods]:
    out: dict[tuple[str, str], _Pods] = {}
    for pod in state.items("Pod"):
        if not pod["group"]:
            continue
        acc = out.setdefault((str(pod["metadata"].get("namespace") or ""), pod["group"]), _Pods())
        acc.total += 1
        if pod["phase"] == "Running":
            acc.running += 1
        if pod["node"] and pod["phase"] not in ("Succeeded", "Failed"):
            acc.gpus_held += pod["requests"].get(GPU, 0) // 1000
    return out


def _link(kind: str, api: str, namespace: str, name: str, podgroup: str) -> str:
    if kind == "Job" and api.startswith(VCJOB_API):
        return f"/jobs/{quote(namespace)}/{quote(name)}"
    return f"/podgroups/{quote(namespace)}/{quote(podgroup)}"


def _job_phase(job: Obj) -> str:
    return str(((job.get("status") or {}).get("state") or {}).get("phase") or "Pending")


def _submitter(*objs: Obj | None) -> str:
    for obj in objs:
        value = ((obj or {}).get("metadata") or {}).get("annotations", {}).get(SUBMITTER_ANNOTATION)
        if value:
            return str(value)
    return ""


def _job_started(job: Obj | None) -> float:
    """When a VCJob first ran (its first `Running` condition), 0.0 if it has not."""
    conds = ((job or {}).get("status") or {}).get("conditions") or []
    times = [
        epoch_seconds(c.get("lastTransitionTime"))
        for c in conds
        if isinstance(c, Mapping) and c.get("status") == "Running"
    ]
    return min((t for t in times if t), default=0.0)


def _times(
    created: str, pg: PodGroupView | None, phase: str, job: Obj | None = None
) -> dict[str, Any]:
    """When the gang was made and, once placed, when: the VCJob's first `Running` condition,
    else the PodGroup's `Scheduled` condition."""
    scheduled = pg.condition("Scheduled") if pg is not None and phase not in WAITING else None
    started = _job_started(job) or (
        epoch_seconds(scheduled.get("lastTransitionTime")) if scheduled else 0.0
    )
    return {"created": created, "created_s": epoch_seconds(created), "started_s": started or None}


def _pg_row(pg: Obj, job: Obj | None, pods: _Pods, priorities: Mapping[str, int]) -> dict[str, Any]:
    v = podgroup_view(pg)
    kind, name, api = _owner(v)
    phase = _job_phase(job) if job is not None else v.phase
    created = str(((job or pg).get("metadata") or {}).get("creationTimestamp") or "")
    return {
        "name": name,
        "kind": kind,
        "namespace": v.namespace,
        "podgroup": v.name,
        "link": _link(kind, api, v.namespace, name, v.name),
        "queue": v.queue_or_default,
        "phase": phase,
        "gpus": _gpus(v.min_resources),
        "gpus_held": pods.gpus_held,
        "min_member": v.min_member or 0,
        "running": pods.running,
        "pods_total": pods.total,
        "priority": v.priority_class_name,
        "priority_value": priorities.get(v.priority_class_name, 0),
        "submitter": _submitter(job, pg),
        **_times(created, v, v.phase, job),
        "reason": pending_reason(v, v.phase),
    }


def _job_row(job: Obj) -> dict[str, Any]:
    """A VCJob whose PodGroup the watch has not brought (or the controller not made) yet."""
    meta, spec = job["metadata"], job.get("spec") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    tasks = spec.get("tasks") or []
    asked = sum(
        _gpus(c.get("resources", {}).get("requests")) * int(t.get("replicas") or 0)
        for t in tasks
        for c in ((t.get("template") or {}).get("spec") or {}).get("containers") or []
    )
    created = str(meta.get("creationTimestamp") or "")
    return {
        "name": name,
        "kind": "Job",
        "namespace": namespace,
        "podgroup": "",
        "link": f"/jobs/{quote(namespace)}/{quote(name)}",
        "queue": str(spec.get("queue") or "default"),
        "phase": _job_phase(job),
        "gpus": asked,
        "gpus_held": 0,
        "min_member": int(spec.get("minAvailable") or 0),
        "running": 0,
        "pods_total": 0,
        "priority": str(spec.get("priorityClassName") or ""),
        "priority_value": 0,
        "submitter": _submitter(job),
        **_times(created, None, "Pending", job),
        "reason": "",
    }


def _priorities(state: LiveState) -> dict[str, int]:
    return {
        str(pc["metadata"]["name"]): int(pc.get("value") or 0)
        for pc in state.items("PriorityClass")
    }


def gang_rows(state: LiveState) -> list[dict[str, Any]]:
    """One row per PodGroup, and one per VCJob without a PodGroup (unsorted, unfiltered)."""
    pods = _pods_by_group(state)
    jobs_by_uid = {str(j["metadata"].get("uid")): j for j in state.items("Job")}
    priorities = _priorities(state)
    rows, covered = [], set()
    for pg in state.items("PodGroup"):
        meta = pg.get("metadata") or {}
        owner_uids = [str(r.get("uid")) for r in meta.get("ownerReferences") or []]
        job = next((jobs_by_uid[u] for u in owner_uids if u in jobs_by_uid), None)
        if job is not None:
            covered.add(str(job["metadata"].get("uid")))
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        rows.append(_pg_row(pg, job, pods.get(key, _Pods()), priorities))
    rows += [_job_row(j) for uid, j in jobs_by_uid.items() if uid not in covered]
    return rows


def _wait(row: Mapping[str, Any], now: float) -> float | None:
    if not row["created_s"]:
        return None
    if row["started_s"]:
        return max(0.0, float(row["started_s"]) - float(row["created_s"]))
    return max(0.0, now - float(row["created_s"])) if row["phase"] in WAITING else None


def _sort_key(column: str, now: float) -> Any:
    if column == "age":
        return lambda r: -float(r["created_s"] or 0)
    if column == "wait":
        return lambda r: _wait(r, now) or 0.0
    if column == "pods":
        return lambda r: (r["running"], r["min_member"])
    if column == "priority":
        return lambda r: (r["priority_value"], r["priority"])
    if column in ("gpus", "gpus_held"):
        return lambda r: r[column]
    return lambda r: str(r[column]).lower()


@dataclass(frozen=True, slots=True)
class JobQuery:
    """The job list's filters and sort column (`-` first: descending), from the query string."""

    name: str = ""
    namespace: str = ""
    queue: str = ""
    phase: str = ""
    kind: str = ""
    submitter: str = ""
    sort: str = "age"

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> JobQuery:
        """The query of `?name=..&queue=..&sort=-gpus`; unknown keys or columns: QueryError."""
        known = [f.name for f in fields(cls)]
        unknown = sorted(k for k in query if k not in known and k not in PASSED)
        if unknown:
            raise QueryError(
                f"unknown query parameter {', '.join(unknown)}: the job list takes "
                f"{', '.join(known)}"
            )
        q = cls(**{k: str(query[k]).strip() for k in known if k in query})
        if q.sort.removeprefix("-") not in dict(COLUMNS):
            raise QueryError(
                f"cannot sort by {q.sort!r}: the columns are {', '.join(k for k, _ in COLUMNS)}"
            )
        return q

    def keeps(self, row: Mapping[str, Any]) -> bool:
        exact = ("namespace", "queue", "phase", "kind", "submitter")
        return (not self.name or self.name.lower() in str(row["name"]).lower()) and all(
            not getattr(self, k) or getattr(self, k).lower() == str(row[k]).lower() for k in exact
        )

    def link(self, **changes: str) -> str:
        """The job list's URL with this query, changed by `changes` (defaults left out)."""
        q = replace(self, **changes)
        pairs = [(f.name, getattr(q, f.name)) for f in fields(q)]
        kept = [(k, v) for k, v in pairs if v and not (k == "sort" and v == "age")]
        return "/jobs" + ("?" + urlencode(kept) if kept else "")

    def sorted(self, rows: Iterable[dict[str, Any]], now: float) -> list[dict[str, Any]]:
        column = self.sort.removeprefix("-")
        return sorted(rows, key=_sort_key(column, now), reverse=self.sort.startswith("-"))


def jobs(rows: Iterable[dict[str, Any]], query: JobQuery, now: float) -> dict[str, Any]:
    """The rows `query` keeps, sorted, at most JOB_ROWS; each with its wait at `now`."""
    kept = query.sorted((r for r in rows if query.keeps(r)), now)
    phases: dict[str, int] = {}
    kinds: dict[str, int] = {}
    for r in kept:
        phases[r["phase"]] = phases.get(r["phase"], 0) + 1
        kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
    shown = [{**r, "wait_s": _wait(r, now)} for r in kept[:JOB_ROWS]]
    return {
        "total": len(kept),
        "phases": dict(sorted(phases.items())),
        "kinds": dict(sorted(kinds.items())),
        "now": now,
        "jobs": shown,
    }


def podgroup_detail(state: LiveState, namespace: str, name: str) -> dict[str, Any] | None:
    """One gang by its PodGroup: the jobs list's row, the conditions, pods and events."""
    pg = state.named("PodGroup", name, namespace)
    if pg is None:
        return None
    pods = sorted(
        (
            {"name": p["metadata"]["name"], "phase": p["phase"], "node": p["node"]}
            for p in state.items("Pod")
            if p["group"] == name and p["metadata"].get("namespace") == namespace
        ),
        key=lambda p: str(p["name"]),
    )
    priorities = _priorities(state)
    held = _pods_by_group(state).get((namespace, name), _Pods())
    conditions = [
        {"type": c.get("type"), "reason": c.get("reason"), "message": c.get("message"),
         "at": c.get("lastTransitionTime")}
        for c in (pg.get("status") or {}).get("conditions") or []
        if isinstance(c, Mapping)
    ]  # fmt: skip
    involved = [name, *(p["name"] for p in pods)]
    events = sorted(
        (e for n in involved for e in state.events_about(namespace, n)),
        key=lambda e: str(e["last"]),
    )
    return {
        "row": _pg_row(pg, None, held, priorities),
        "conditions": conditions,
        "pods": pods,
        "events": events,
    }
