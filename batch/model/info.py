"""TaskInfo, JobInfo and QueueInfo: Volcano's per-pod, per-PodGroup and per-Queue records.

The readiness helpers of volcano-semantics.md#task-status live on ``JobInfo`` and read counters
that are kept up to
date on every status change (``JobInfo.set_status``), so none of them loops over tasks.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from batch.model.changes import ChangeLog
from batch.model.resources import IntVec
from batch.model.status import (
    ALLOCATED_STATUS,
    READY_STATUS,
    VALID_STATUS,
    TaskStatus,
)

_N_STATUS = max(TaskStatus) + 1
#: one counter for every JobInfo: a version is never reused, even by a job re-created under the
#: same id, so "same version" means "same state" for anything derived from a job.
_VERSIONS = itertools.count(1)
_IS_ALLOC = [TaskStatus(i) in ALLOCATED_STATUS if i else False for i in range(_N_STATUS)]


@dataclass(slots=True, eq=False)
class TaskTemplate:
    """What two tasks must share to be placed with the same node masks and scores.

    Interned by the cache: tasks of one gang created from one pod template share one object.
    """

    key: tuple[Any, ...]
    fit: IntVec  # InitResreq incl. pods=1 (what must fit on the node)
    req: IntVec  # Resreq (what the task holds once placed)
    node_selector: dict[str, str]
    required_terms: list[dict[str, Any]] | None  # requiredDuringScheduling nodeSelectorTerms
    preferred_terms: list[dict[str, Any]]
    tolerations: list[dict[str, Any]]
    host_ports: list[tuple[str, str, int]]
    pod_affinity: list[dict[str, Any]]  # required pod affinity terms
    pod_anti_affinity: list[dict[str, Any]]  # required pod anti-affinity terms
    namespace: str
    tid: int = 0
    req_list: list[int] = field(default_factory=list)  # ``req`` as Python ints (scalar paths)

    def __post_init__(self) -> None:
        self.req_list = [int(x) for x in self.req]

    @property
    def volatile(self) -> bool:
        """Masks depend on in-session placements (ports, inter-pod affinity)."""
        return bool(self.host_ports or self.pod_affinity or self.pod_anti_affinity)


@dataclass(slots=True, eq=False)
class TaskInfo:
    """One pod as the scheduler sees it."""

    uid: str
    namespace: str
    name: str
    job_id: str | None
    status: TaskStatus
    node_name: str
    req: IntVec  # Resreq: regular containers + overhead (pods dimension = 1)
    init_req: IntVec  # InitResreq: max with init containers (used for fitting)
    template: TaskTemplate
    best_effort: bool = False
    priority: int = 1
    preemptable: bool = True
    role: str = ""
    gated: bool = False
    schedulable: bool = True  # schedulerName is one of ours
    creation: float = 0.0
    task_index: int = -1
    nominated_node: str = ""
    preemption_policy: str = ""
    priority_class_name: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    node_idx: int = -1
    raw: Mapping[str, Any] | None = None

    def sort_key(self) -> tuple[int, float, str]:
        """Volcano's task-order fallback: pod index, then creation time, then UID."""
        return (self.task_index, self.creation, self.uid)


@dataclass(slots=True, eq=False)
class JobInfo:
    """A PodGroup and its tasks (job id ``<namespace>/<podgroup name>``)."""

    uid: str
    namespace: str
    name: str
    dims: int
    queue: str = "default"
    podgroup: Mapping[str, Any] | None = None
    min_available: int = 1
    min_task_member: dict[str, int] = field(default_factory=dict)
    #: the gang's minimum: the PodGroup's minResources, raised on the resources it leaves out
    #: that the pods ask for (``effective_min_resources``); ``spec_min_resources`` as written
    min_resources: IntVec | None = None
    spec_min_resources: IntVec | None = None
    phase: str = "Pending"
    priority_class_name: str = ""
    priority: int = 0
    creation: float = 0.0
    annotations: Mapping[str, str] = field(default_factory=dict)
    network_topology: Mapping[str, Any] | None = None
    conditions: list[dict[str, Any]] = field(default_factory=list)
    tasks: dict[str, TaskInfo] = field(default_factory=dict)
    counts: list[int] = field(default_factory=lambda: [0] * _N_STATUS)
    role_counts: dict[str, list[int]] = field(default_factory=dict)
    pending_best_effort: int = 0
    role_best_effort: dict[str, int] = field(default_factory=dict)  # pending best-effort by role
    gated_pending: int = 0
    alloc_version: int = 0  # bumps whenever ``allocated`` changes (share caches key on it)
    #: changes (to a value never used before) on every change of the job's tasks, their
    #: statuses, or its PodGroup facts; aggregates kept across sessions key on it
    version: int = field(default_factory=lambda: next(_VERSIONS))
    allocated: IntVec = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    pending_req: IntVec = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    gated_req: IntVec = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    total_req: IntVec = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: the cache's change log (every version change is marked in it), and the job's place in
    #: the cache's insertion order
    changes: ChangeLog | None = None
    ordinal: int = 0
    #: (``spec_min_resources``, its zero dimensions but pods), for ``effective_min_resources``
    spec_zeros: tuple[IntVec, IntVec] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if len(self.allocated) < self.dims:
            self.allocated = np.zeros(self.dims, dtype=np.int64)
            self.pending_req = np.zeros(self.dims, dtype=np.int64)
            self.gated_req = np.zeros(self.dims, dtype=np.int64)
            self.total_req = np.zeros(self.dims, dtype=np.int64)

    # -- bookkeeping ------------------------------------------------------------------------
    def touch(self) -> None:
        """Record a change made from outside (PodGroup facts, an in-session phase)."""
        self.version = next(_VERSIONS)
        if self.changes is not None:
            self.changes.mark(self.uid)

    def restore_version(self, version: int) -> None:
        """Undo to ``version`` (session rollback: the job is back in the state it names)."""
        self.version = version
        if self.changes is not None:
            self.changes.mark(self.uid)

    def _account(self, task: TaskInfo, sign: int, *, total: bool = True) -> None:
        self.touch()
        st = task.status
        self.counts[st] += sign
        rc = self.role_counts.get(task.role)
        if rc is None:
            rc = self.role_counts[task.role] = [0] * _N_STATUS
        rc[st] += sign
        op = np.add if sign > 0 else np.subtract
        req = task.req
        if st in ALLOCATED_STATUS:
            op(self.allocated, req, self.allocated)
            self.alloc_version += 1
        elif st is TaskStatus.PENDING:
            if task.best_effort:
                self._best_effort(task.role, sign)
            if task.gated:
                self.gated_pending += sign
                op(self.gated_req, req, self.gated_req)
            op(self.pending_req, req, self.pending_req)
        if total:
            op(self.total_req, req, self.total_req)

    def add_task(self, task: TaskInfo) -> None:
        self.tasks[task.uid] = task
        self._account(task, 1)

    def remove_task(self, task: TaskInfo) -> None:
        if self.tasks.pop(task.uid, None) is not None:
            self._account(task, -1)

    def restatus_task(self, task: TaskInfo, status: TaskStatus) -> None:
        """What ``remove_task(task)``, a new ``status`` and ``add_task(task)`` leave in the
        counters, for a task whose request, role and flags stay (a watch's status update; the
        caller keeps the task's place in ``tasks``): the vector updates that cancel are left
        out (``total_req``, and ``allocated`` or ``pending_req`` when the task stays in or out
        of them), ``alloc_version`` moves as the removal and the addition move it, and the
        job gets one new version."""
        bumps = _IS_ALLOC[task.status] + _IS_ALLOC[status]
        self.touch()
        before = self.alloc_version
        self.restore_status(task, status)
        self.alloc_version = before + bumps

    def set_status(self, task: TaskInfo, status: TaskStatus) -> None:
        """Move ``task`` to ``status`` keeping every counter exact (hot path)."""
        if task.status is not status:
            self.touch()
            self.restore_status(task, status)

    def restore_status(self, task: TaskInfo, status: TaskStatus) -> None:
        """``set_status`` without a new version: for a session's rollback, which then restores
        the version the job had (``restore_version``, which also records the change)."""
        old = task.status
        if old is status:
            return
        c = self.counts
        c[old] -= 1
        c[status] += 1
        rc = self.role_counts.get(task.role)
        if rc is None:
            rc = self.role_counts[task.role] = [0] * _N_STATUS
        rc[old] -= 1
        rc[status] += 1
        task.status = status
        req = task.req
        na = _IS_ALLOC[status]
        # ufuncs take ``out`` positionally here: keyword parsing is a fifth of a tiny call
        if _IS_ALLOC[old] != na:
            (np.add if na else np.subtract)(self.allocated, req, self.allocated)
            self.alloc_version += 1
        pend = TaskStatus.PENDING
        if old is pend or status is pend:
            sign = 1 if status is pend else -1
            op = np.add if sign > 0 else np.subtract
            if task.best_effort:
                self._best_effort(task.role, sign)
            if task.gated:
                self.gated_pending += sign
                op(self.gated_req, req, self.gated_req)
            op(self.pending_req, req, self.pending_req)

    def _best_effort(self, role: str, sign: int) -> None:
        self.pending_best_effort += sign
        self.role_best_effort[role] = self.role_best_effort.get(role, 0) + sign

    def regrow(self, dims: int) -> None:
        """Pad the resource vectors after the resource registry grew."""
        self.touch()
        for name in ("allocated", "pending_req", "gated_req", "total_req"):
            old = getattr(self, name)
            new = np.zeros(dims, dtype=np.int64)
            new[: len(old)] = old
            setattr(self, name, new)
        for name in ("min_resources", "spec_min_resources"):
            old = getattr(self, name)
            if old is not None:
                new = np.zeros(dims, dtype=np.int64)
                new[: len(old)] = old
                setattr(self, name, new)
        self.dims = dims

    def effective_min_resources(self) -> IntVec | None:
        """The PodGroup's minResources, with every resource it leaves out (0) that the pods
        ask for raised to the least that any ``min_available`` of them need together (the
        sum of the smallest such requests). An operator that computes minResources from the
        pods' requests while GPUs are written as limits only (the API server then defaults
        the requests from the limits) makes a group without GPUs: without this, the gang
        would be admitted and then wait for ever, and never count as demand."""
        spec = self.spec_min_resources
        if spec is None or not self.tasks:
            return spec
        zeros = self.spec_zeros
        if zeros is None or zeros[0] is not spec:  # spec vectors are replaced, never changed
            zeros = self.spec_zeros = (spec, np.flatnonzero(spec[1:] == 0) + 1)  # not pods
        asked = self.total_req[zeros[1]] > 0
        if not np.count_nonzero(asked):
            return spec
        dims = zeros[1][asked]
        reqs = np.array([t.req[dims] for t in self.tasks.values()], dtype=np.int64)
        least = np.sort(reqs, axis=0)[: max(self.min_available, 1)].sum(axis=0)
        out = spec.copy()
        out[dims] = least
        return out

    # -- readiness helpers of volcano-semantics.md#task-status -------------------------------------
    def count(self, *statuses: TaskStatus) -> int:
        c = self.counts
        return sum(c[s] for s in statuses)

    def ready_task_num(self) -> int:
        c = self.counts  # Bound, Binding, Running, Allocated, Succeeded
        return c[5] + c[4] + c[6] + c[2] + c[8]

    def waiting_task_num(self) -> int:
        return self.counts[TaskStatus.PIPELINED]

    def valid_task_num(self) -> int:
        c = self.counts  # Allocated-group, Succeeded, Pipelined, Pending
        return c[2] + c[4] + c[5] + c[6] + c[8] + c[3] + c[1]

    def _roles_checked(self) -> bool:
        return bool(self.min_task_member) and self.min_available >= sum(
            self.min_task_member.values()
        )

    def _role_ok(self, statuses: frozenset[TaskStatus], *, best_effort: bool = False) -> bool:
        """Every role's minTaskMember met by tasks in ``statuses``; with ``best_effort``, pending
        best-effort tasks count too (Volcano's CheckTaskReady/CheckTaskPipelined: backfill
        places them without a gang check, so they never hold a gang back)."""
        if not self._roles_checked():
            return True
        for role, minimum in self.min_task_member.items():
            rc = self.role_counts.get(role)
            have = sum(rc[s] for s in statuses) if rc else 0
            if best_effort:
                have += self.role_best_effort.get(role, 0)
            if have < minimum:
                return False
        return True

    def is_ready(self) -> bool:
        return self.ready_task_num() + self.pending_best_effort >= self.min_available

    def check_task_ready(self) -> bool:
        return self._role_ok(READY_STATUS, best_effort=True)

    def is_pipelined(self) -> bool:
        return (
            self.waiting_task_num() + self.ready_task_num() + self.pending_best_effort
            >= self.min_available
        )

    def check_task_pipelined(self) -> bool:
        return self._role_ok(READY_STATUS | {TaskStatus.PIPELINED}, best_effort=True)

    def is_starving(self) -> bool:
        return self.waiting_task_num() + self.ready_task_num() < self.min_available

    def check_task_valid(self) -> bool:
        return self._role_ok(VALID_STATUS)

    def check_task_starving(self) -> bool:
        return not self._role_ok(READY_STATUS | {TaskStatus.PIPELINED})

    def is_pending(self) -> bool:
        return self.podgroup is None or self.phase in ("Pending", "")

    def need_continue_allocating(self, failed_roles: set[str]) -> bool:
        """After a task failed to fit: can the job still reach its gang minimum?"""
        if self.min_available >= len(self.tasks):
            return False
        # tasks of roles that have not failed and are still candidates or already placed
        possible = 0
        for task in self.tasks.values():
            if task.role in failed_roles and task.status is TaskStatus.PENDING:
                continue
            if task.status in VALID_STATUS:
                possible += 1
        return possible >= self.min_available


@dataclass(slots=True, eq=False)
class QueueInfo:
    """A Queue (cluster-scoped) with the spec fields the plugins read."""

    name: str
    uid: str
    weight: int = 1
    capability: dict[str, int] = field(default_factory=dict)
    guarantee: dict[str, int] = field(default_factory=dict)
    deserved: dict[str, int] = field(default_factory=dict)
    reclaimable: bool = True
    parent: str = ""
    priority: int = 0
    state: str = "Open"
    creation: float = 0.0
    annotations: Mapping[str, str] = field(default_factory=dict)
    raw: Mapping[str, Any] | None = None

    def is_open(self) -> bool:
        return self.state in ("Open", "")
