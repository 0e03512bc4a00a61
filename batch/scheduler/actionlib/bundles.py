"""Victim bundles of the gang-aware evicting actions, gangpreempt and gangreclaim.

The running tasks a victim job has in a candidate domain are split in at most two bundles
(docs/volcano-semantics.md#gang-eviction): the *safe* bundle holds the tasks whose eviction leaves
the job gang-ready (its surplus above ``minAvailable`` and above each role's ``minTaskMember``),
the *whole* bundle the rest, whose eviction breaks the gang. An action takes safe bundles before
whole ones, so a whole bundle is only ever taken together with its job's safe bundle: a victim
job keeps at least its minimum, or loses every candidate task it has in the domain. Within a
kind, bundles are ordered by the action's victim order, then by how much of the preemptor's
need they free per resource they take (a whole bundle costs its whole job), then by uid.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import numpy as np

from batch.model.info import JobInfo, TaskInfo
from batch.model.resources import IntVec
from batch.model.status import ALLOCATED_STATUS, TaskStatus

SAFE = 0
WHOLE = 1
#: PodGroup annotation or label that makes a whole job preemptable or not
PREEMPTABLE_KEY = "volcano.sh/preemptable"
_TRUE = frozenset({"1", "t", "true"})


@dataclass(slots=True)
class Bundle:
    kind: int  # SAFE or WHOLE
    job: JobInfo
    tasks: list[TaskInfo]


def job_preemptable(job: JobInfo) -> bool:
    """A PodGroup that says ``volcano.sh/preemptable`` decides for the whole job (default yes)."""
    meta = (job.podgroup or {}).get("metadata") or {}
    for where in ("annotations", "labels"):
        values = meta.get(where) or {}
        if PREEMPTABLE_KEY in values:
            return str(values[PREEMPTABLE_KEY]).strip().lower() in _TRUE
    return True


def _role_surplus(job: JobInfo) -> dict[str, int] | None:
    """Per role, how many tasks it can lose before falling below its minTaskMember (None when
    roles are not enforced: minAvailable below the sum of the role minimums, as gang does)."""
    if not job.min_task_member or job.min_available < sum(job.min_task_member.values()):
        return None
    out: dict[str, int] = {}
    statuses = (*ALLOCATED_STATUS, TaskStatus.SUCCEEDED)
    for role, minimum in job.min_task_member.items():
        rc = job.role_counts.get(role)
        ready = sum(rc[s] for s in statuses) if rc else 0
        out[role] = ready + job.role_best_effort.get(role, 0) - minimum
    return out


def job_bundles(
    job: JobInfo, local: list[TaskInfo], first: Callable[[TaskInfo], Any] | None = None
) -> list[Bundle]:
    """Split ``job``'s candidate tasks of one domain into its safe and whole bundle; the safe
    one takes the tasks that sort first by ``first`` (default: none), priority and uid."""
    if not local:
        return []
    local = sorted(local, key=lambda t: (first(t) if first else 0, t.priority, t.uid))
    surplus = job.ready_task_num() - job.min_available
    if surplus < 0:
        # not gang-ready already: evicting more breaks nothing further
        return [Bundle(SAFE, job, local)]
    roles = _role_surplus(job)
    safe: list[TaskInfo] = []
    whole: list[TaskInfo] = []
    for t in local:
        role_ok = roles is None or t.role not in roles or roles[t.role] > 0
        if surplus > 0 and role_ok:
            safe.append(t)
            surplus -= 1
            if roles is not None and t.role in roles:
                roles[t.role] -= 1
        else:
            whole.append(t)
    out = [Bundle(SAFE, job, safe)] if safe else []
    if whole:
        out.append(Bundle(WHOLE, job, whole))
    return out


def flatten(bundles: list[Bundle]) -> list[TaskInfo]:
    return [t for b in bundles for t in b.tasks]


def keep_allowed(bundles: list[Bundle], allowed: Collection[str]) -> list[Bundle]:
    """What the victim plugins allow: a whole bundle all or nothing, a safe one in part."""
    out: list[Bundle] = []
    for b in bundles:
        ok = [t for t in b.tasks if t.uid in allowed]
        if b.kind == WHOLE:
            if len(ok) == len(b.tasks):
                out.append(b)
        elif ok:
            out.append(Bundle(SAFE, b.job, ok))
    return out


def _score(tasks: Collection[TaskInfo], need: list[tuple[int, float]], *, cap: bool) -> float:
    """Σ over the needed dimensions of what ``tasks`` request there / the need (capped)."""
    total = 0.0
    for d, n in need:
        v = float(sum(t.template.req_list[d] for t in tasks))
        total += (min(v, n) if cap else v) / n
    return total


def _roi(b: Bundle, need: list[tuple[int, float]], costs: dict[str, float]) -> float:
    """Need freed (capped at the need) per need-weighted resource the bundle's job holds in
    total; a safe bundle breaks no gang, so it is worth infinitely much."""
    if b.kind == SAFE:
        return math.inf
    cost = costs.get(b.job.uid)
    if cost is None:
        cost = costs[b.job.uid] = _score(b.job.tasks.values(), need, cap=False)
    return math.inf if cost == 0 else _score(b.tasks, need, cap=True) / cost


def sort_bundles(bundles: list[Bundle], need: IntVec, victim_key: Callable[[JobInfo], Any]) -> None:
    """Safe before whole; then ``victim_key`` of the bundle's job (smaller gives first); then
    return on investment (higher first); then job uid, first task uid and size."""
    dims = [(int(d), float(need[d])) for d in np.flatnonzero(need[1:] > 0) + 1]
    costs: dict[str, float] = {}

    def key(b: Bundle) -> tuple[Any, ...]:
        first = b.tasks[0].uid if b.tasks else ""
        return (b.kind, victim_key(b.job), -_roi(b, dims, costs), b.job.uid, first, len(b.tasks))

    bundles.sort(key=key)
