"""Shared machinery of the evicting actions (preempt, reclaim): victims, guards, node walks.

Volcano's preempt and reclaim (docs/volcano-semantics.md#preempt) walk the preemptor's candidate
nodes, ask the tiered Preemptable/Reclaimable callbacks which running tasks on a node may go, order
them (reverse task order inside a job, reverse job order between jobs, VictimQueueOrder across
queues) and evict one at a time until the preemptor fits the node's FutureIdle, then pipeline it
there; the evictions for one node are undone when the preemptor still does not fit.

Tephra adds, without changing that shape:

* a vector pre-filter: per node an upper bound of what could be freed (Σ requests of every task
  that could possibly be a candidate), so only nodes where FutureIdle + bound holds the
  preemptor are visited, best-scored first, at most ``max_nodes`` of them;
* *guards*: hard victim filters registered by plugins (``minruntime``) or by the action itself
  (reclaim's guarantee and share hysteresis) that apply after the tiers, whatever tier the plugin
  sits in — Volcano's tier fall-through can otherwise bypass a protection;
* ``strict`` victim selection: every non-abstaining plugin of every tier filters the candidates
  in turn (a victim must be acceptable to all of them), instead of Volcano's per-tier
  intersection with its fresh-start quirk.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from batch.api.owners import workload_label
from batch.model.info import JobInfo, QueueInfo, TaskInfo
from batch.model.status import PREEMPTABLE_STATUS
from batch.scheduler.actionlib.selection import preemptor_tasks
from batch.scheduler.framework.arguments import Arg, Arguments, ConfigError
from batch.scheduler.framework.decisions import PendingReason
from batch.scheduler.framework.hooks import VictimGuard
from batch.scheduler.framework.session import Session
from batch.scheduler.framework.statement import Statement


def select_victims(
    ssn: Session,
    point: str,
    preemptor: TaskInfo,
    candidates: list[TaskInfo],
    *,
    strict: bool,
    extra: Iterable[VictimGuard] = (),
) -> list[TaskInfo]:
    """Victims among ``candidates`` for ``preemptor`` at extension point ``point``."""
    if not candidates:
        return []
    if strict:
        victims = ssn.dispatch.victims_strict(point, preemptor, candidates)
    else:
        victims = ssn.dispatch.victims(point, preemptor, candidates)
    for g in ssn.dispatch.victim_guards():
        if not victims:
            return []
        victims = g(point, preemptor, victims)
    for g in extra:
        if not victims:
            return []
        victims = g(point, preemptor, victims)
    return victims


#: shared by preempt, reclaim and the gang actions (Budget)
TIME_BUDGET = Arg(
    "timeBudgetSeconds",
    "float",
    0.0,
    "no new preemptor job once the action ran this long (0: no bound)",
    min=0,
)
#: the arguments preempt and reclaim share (read by ``parse_common``)
COMMON_ARGS: tuple[Arg, ...] = (
    Arg(
        "victimSelection",
        "str",
        "volcano",
        "`strict`: a victim must satisfy every plugin (victims.py)",
        choices=("volcano", "strict"),
    ),
    TIME_BUDGET,
    Arg("maxCandidateEvaluations", "int", 0, "victim evaluations per cycle (0: no bound)", min=0),
    Arg("maxCandidateNodesAbsolute", "int", 100, "nodes visited per preemptor task", min=1),
    Arg("predicateErrorCacheEnable", "bool", True, "accepted (Volcano)"),
)


def parse_common(args: Arguments, owner: str) -> dict[str, Any]:
    """Arguments shared by preempt and reclaim (validated; ConfigError names the key)."""
    out: dict[str, Any] = {
        "strict": args.get_str("victimSelection", "volcano"),
        "time_budget": args.get_float("timeBudgetSeconds", 0.0),
        "max_candidates": args.get_int("maxCandidateEvaluations", 0),
        "max_nodes": args.get_int("maxCandidateNodesAbsolute", 100),
    }
    args.get_bool("predicateErrorCacheEnable", True)
    if out["strict"] not in ("volcano", "strict"):
        raise ConfigError(
            f"configurations[{owner}]: argument 'victimSelection' must be 'volcano' or 'strict', "
            f"got {out['strict']!r}"
        )
    out["strict"] = out["strict"] == "strict"
    if out["time_budget"] < 0 or out["max_candidates"] < 0 or out["max_nodes"] < 1:
        raise ConfigError(
            f"configurations[{owner}]: timeBudgetSeconds and maxCandidateEvaluations must be >= 0 "
            "and maxCandidateNodesAbsolute >= 1"
        )
    return out


@dataclass(slots=True)
class Budget:
    """Per-action time/candidate budget (0 = unlimited)."""

    seconds: float
    candidates: int
    start: float = field(default_factory=time.perf_counter)
    used: int = 0
    spent: bool = False

    @property
    def exhausted(self) -> bool:
        """The candidate count is passed or the time is up. The clock is read at every look,
        so the actions' job and task loops end on time even when no task reaches a candidate
        node (nodes full of other schedulers' pods): spending alone would never notice."""
        if not self.spent and self.seconds and time.perf_counter() - self.start > self.seconds:
            self.spent = True
        return self.spent

    def spend(self, n: int = 1) -> bool:
        """Count ``n`` candidate evaluations; False once the budget is gone."""
        self.used += n
        if self.candidates and self.used > self.candidates:
            self.spent = True
        return not self.exhausted


#: ``NodeTasks.start`` takes the tasks of exhausted jobs and groups out of the sums with one
#: numpy call, not two per task (False: one task at a time; tests compare both)
BULK_START = True


class NodeTasks:
    """Running, preemptable tasks of session jobs per node, plus per-group upper bounds.

    ``own(group)`` / ``others(group)`` are ``(dims, nodes)`` matrices: Σ requests of the tasks
    that can still be candidates, of ``group`` (preempt: the own queue) or of every other group
    (reclaim: other queues). The sums are kept live through session event handlers: an evicted
    task leaves them (its resources are in Releasing, i.e. FutureIdle, already), an undone
    eviction comes back. An action may also declare whole jobs or groups *exhausted* (e.g. a
    gang at its minimum when gang's victim rule applies to every candidate, or a queue at its
    deserved share under proportion's rule): their tasks leave the sums and the candidate lists
    until that changes.
    """

    def __init__(
        self,
        ssn: Session,
        *,
        group_of: Callable[[TaskInfo, JobInfo], str | None],
        statuses: frozenset[Any] = PREEMPTABLE_STATUS,
    ) -> None:
        self.ssn = ssn
        nd = ssn.nodes
        self.dims = len(ssn.resources.names)
        self.statuses = statuses
        self.by_node: dict[int, list[TaskInfo]] = {}
        groups: dict[str, int] = {}
        self.task_group: dict[str, int] = {}
        self.job_tasks: dict[str, list[TaskInfo]] = {}
        self.group_tasks: list[list[TaskInfo]] = []
        gi: list[int] = []
        ni: list[int] = []
        reqs: list[Any] = []
        for job in ssn.jobs.values():
            for t in job.tasks.values():
                if t.status not in statuses or t.node_idx < 0 or t.node_idx >= nd.n:
                    continue
                if not t.preemptable:
                    continue
                self.by_node.setdefault(t.node_idx, []).append(t)
                g = group_of(t, job)
                if g is None:
                    continue
                k = groups.get(g)
                if k is None:
                    k = groups[g] = len(groups)
                    self.group_tasks.append([])
                self.task_group[t.uid] = k
                self.job_tasks.setdefault(job.uid, []).append(t)
                self.group_tasks[k].append(t)
                gi.append(k)
                ni.append(t.node_idx)
                reqs.append(t.req[: self.dims])
        self.groups = groups
        self.group_names = {k: g for g, k in groups.items()}
        self.per_group = np.zeros((max(len(groups), 1), self.dims, nd.n), dtype=np.int64)
        if reqs:
            idx: Any = (np.asarray(gi), slice(None), np.asarray(ni))
            np.add.at(self.per_group, idx, np.stack(reqs))
        self.total: npt.NDArray[np.int64] = self.per_group.sum(axis=0)
        self.counted: set[str] = set(self.task_group)
        self.job_exhausted: Callable[[JobInfo], bool] | None = None
        self.group_exhausted: Callable[[str], bool] | None = None
        self.ex_jobs: set[str] = set()
        self.ex_groups: set[int] = set()
        self.active = True
        ssn.hooks.add_event_handler(self._changed, self._changed)

    def close(self) -> None:
        """Stop following session events (end of the action)."""
        self.active = False

    def start(self) -> None:
        """Apply the exhaustion rules to every job and group once (with ``BULK_START``, the
        tasks that leave the sums are taken out together at the end: the rules only add
        exhausted jobs and groups here, so each such task is one that leaves either way)."""
        leaving: list[TaskInfo] = []
        sync = leaving.extend if BULK_START else self._sync
        if self.job_exhausted is not None:
            for juid in list(self.job_tasks):
                job = self.ssn.jobs.get(juid)
                if job is not None and self.job_exhausted(job):
                    self.ex_jobs.add(juid)
                    sync(self.job_tasks[juid])
        if self.group_exhausted is not None:
            for g, k in self.groups.items():
                if self.group_exhausted(g):
                    self.ex_groups.add(k)
                    sync(self.group_tasks[k])
        if leaving:
            self._sync_all(leaving)

    def _sync_all(self, tasks: list[TaskInfo]) -> None:
        """``_sync`` of many tasks, their moves summed by one numpy call each (int64 sums:
        the same as one task at a time)."""
        counted = self.counted
        moved: list[TaskInfo] = []
        signs: list[int] = []
        for t in tasks:
            want = self._want(t)
            if want == (t.uid in counted):
                continue
            (counted.add if want else counted.discard)(t.uid)
            moved.append(t)
            signs.append(1 if want else -1)
        if not moved:
            return
        gi = np.asarray([self.task_group[t.uid] for t in moved])
        ni = np.asarray([t.node_idx for t in moved])
        reqs = np.stack([t.req[: self.dims] for t in moved]) * np.asarray(signs)[:, None]
        by_group: Any = (gi, slice(None), ni)
        by_node: Any = (slice(None), ni)
        np.add.at(self.per_group, by_group, reqs)
        np.add.at(self.total, by_node, reqs.T)

    def _want(self, t: TaskInfo) -> bool:
        return (
            t.status in self.statuses
            and (t.job_id or "") not in self.ex_jobs
            and self.task_group[t.uid] not in self.ex_groups
        )

    def _sync(self, tasks: list[TaskInfo]) -> None:
        counted = self.counted
        for t in tasks:
            want = self._want(t)
            have = t.uid in counted
            if want == have:
                continue
            k = self.task_group[t.uid]
            req = t.req[: self.dims]
            if want:
                counted.add(t.uid)
                self.per_group[k][:, t.node_idx] += req
                self.total[:, t.node_idx] += req
            else:
                counted.discard(t.uid)
                self.per_group[k][:, t.node_idx] -= req
                self.total[:, t.node_idx] -= req

    def _changed(self, t: TaskInfo) -> None:
        if not self.active:
            return
        k = self.task_group.get(t.uid)
        if k is None:
            return
        juid = t.job_id or ""
        if self.job_exhausted is not None:
            job = self.ssn.jobs.get(juid)
            if job is not None:
                ex = self.job_exhausted(job)
                if ex != (juid in self.ex_jobs):
                    (self.ex_jobs.add if ex else self.ex_jobs.discard)(juid)
                    self._sync(self.job_tasks.get(juid, []))
        if self.group_exhausted is not None:
            ex = self.group_exhausted(self.group_names[k])
            if ex != (k in self.ex_groups):
                (self.ex_groups.add if ex else self.ex_groups.discard)(k)
                self._sync(self.group_tasks[k])
        self._sync([t])

    def candidate(self, t: TaskInfo) -> bool:
        """Still a possible victim (status, and not in an exhausted job or group)."""
        return t.uid in self.counted

    def own(self, group: str) -> npt.NDArray[np.int64]:
        k = self.groups.get(group)
        if k is None:
            return np.zeros_like(self.total)
        out: npt.NDArray[np.int64] = self.per_group[k]
        return out

    def others(self, group: str) -> npt.NDArray[np.int64]:
        out: npt.NDArray[np.int64] = self.total - self.own(group)
        return out


_FIT: dict[int, tuple[Any, list[tuple[int, int]]]] = {}


def fit_dims(task: TaskInfo) -> list[tuple[int, int]]:
    tmpl = task.template
    hit = _FIT.get(id(tmpl))
    if hit is not None and hit[0] is tmpl:
        return hit[1]
    fit = tmpl.fit
    got = [(int(d), int(fit[d])) for d in np.flatnonzero(fit > 0)]
    if len(_FIT) > 10_000:
        _FIT.clear()
    _FIT[id(tmpl)] = (tmpl, got)
    return got


def fits_future(ssn: Session, task: TaskInfo, idx: int) -> bool:
    fut = ssn.nodes.cols(idx)[2]
    return all(fut[d] >= v for d, v in fit_dims(task))


def candidate_nodes(
    ssn: Session, task: TaskInfo, bound: npt.NDArray[np.int64], max_nodes: int
) -> list[int]:
    """Nodes that pass the preemptor's predicates and could hold it once ``bound`` is freed."""
    placer = ssn.placer
    nd = ssn.nodes
    st = placer.state(task.template)
    ok = st.static_ok.copy()
    dyn = placer._dynamic_fail(task)
    if dyn is not None:
        ok &= ~dyn
    dims = bound.shape[0]
    for d, v in fit_dims(task):
        fut = nd.idle[d]
        if nd.has_future:
            fut = fut + nd.releasing[d] - nd.pipelined[d]
        if d >= dims:
            ok &= fut >= v
            continue
        ok &= nd.alloc[d] >= v
        ok &= fut + bound[d] >= v
    cand = np.flatnonzero(ok)
    if len(cand) == 0:
        return []
    score = st.score[cand]
    if len(cand) > max_nodes:
        top = np.argpartition(-score, max_nodes - 1)[:max_nodes]
        cand, score = cand[top], score[top]
    order = np.lexsort((cand, -score))
    return [int(i) for i in cand[order]]


def budgeted_nodes(
    ssn: Session, task: TaskInfo, bound: npt.NDArray[np.int64], max_nodes: int, budget: Budget
) -> Iterator[int]:
    """``candidate_nodes`` for ``task`` while the budget lasts (one evaluation each), without
    the nodes the scalar predicates refuse."""
    placer = ssn.placer
    for idx in candidate_nodes(ssn, task, bound, max_nodes):
        if not budget.spend():
            return
        if placer.scalar_preds and not placer._scalar_ok(task, idx):
            continue
        yield idx


class Rev:
    """Reverses the order of a sort key."""

    __slots__ = ("k",)

    def __init__(self, k: Any) -> None:
        self.k = k

    def __lt__(self, other: Rev) -> bool:
        return bool(other.k < self.k)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Rev) and bool(self.k == other.k)

    __hash__ = None  # type: ignore[assignment]


def victim_order(
    ssn: Session, victims: list[TaskInfo], preemptor_queue: QueueInfo | None
) -> list[TaskInfo]:
    """Volcano's victim priority queue: first the queue that should give first, then the job
    that orders last, then the task that orders last."""
    jkey = ssn.dispatch.job_order_key()
    tkey = ssn.dispatch.task_order_key()
    jobs = ssn.jobs

    def qcmp(a: str, b: str) -> int:
        if a == b or preemptor_queue is None:
            return 0
        return ssn.dispatch.victim_queue_order(ssn.queues[a], ssn.queues[b], preemptor_queue)

    qk = functools.cmp_to_key(qcmp)

    jk: dict[str, Any] = {}

    def key(t: TaskInfo) -> tuple[Any, Any, Any]:
        job = jobs[t.job_id or ""]
        k = jk.get(job.uid)
        if k is None:
            k = jk[job.uid] = (qk(job.queue), Rev(jkey(job)))
        return (k[0], k[1], Rev(tkey(t)))

    return sorted(victims, key=key)


def try_node(
    ssn: Session,
    stmt: Statement,
    preemptor: TaskInfo,
    idx: int,
    victims: list[TaskInfo],
    reason: str,
    *,
    ready: Callable[[], bool],
    causes: dict[str, tuple[str, str]],
) -> bool:
    """Evict ``victims`` (in order) on node ``idx`` until ``preemptor`` fits, then pipeline it.

    ``ready()`` is the action's extra condition (Allocatable for preempt, always true for
    reclaim). On failure every eviction made here is undone.
    """
    mark = stmt.save_operations()
    job_id = preemptor.job_id or ""
    for v in victims:
        if ready() and fits_future(ssn, preemptor, idx):
            break
        stmt.evict(v, reason)
        causes[v.uid] = (job_id, reason)
    if ready() and fits_future(ssn, preemptor, idx):
        stmt.pipeline(preemptor, idx)
        return True
    # Not enough here — for the node, or for the queue (Allocatable): victims on another node
    # also lower the queue's allocation, so the caller tries the next node.
    stmt.recover_operations(mark)
    return False


def evict_on_node(
    ssn: Session,
    point: str,
    queue: QueueInfo,
    task: TaskInfo,
    idx: int,
    cands: list[TaskInfo],
    stmt: Statement,
    *,
    strict: bool,
    reason: str,
    ready: Callable[[], bool],
    causes: dict[str, tuple[str, str]],
    extra: Iterable[VictimGuard] = (),
) -> bool:
    """Evict victims among ``cands`` (the ``point`` callbacks choose them, ``extra`` guards
    filter them) until ``task`` fits node ``idx``, in victim order (True: pipelined there)."""
    victims = select_victims(ssn, point, task, cands, strict=strict, extra=extra)
    if not victims or not validate_victims(ssn, task, idx, victims):
        return False
    ordered = victim_order(ssn, victims, queue)
    return try_node(ssn, stmt, task, idx, ordered, reason, ready=ready, causes=causes)


def walk_nodes(
    ssn: Session,
    task: TaskInfo,
    stmt: Statement,
    nodes: Iterable[int],
    *,
    candidates: Callable[[int], list[TaskInfo]],
    evict: Callable[[int, list[TaskInfo]], bool],
    fits_free: Callable[[int], bool],
) -> bool:
    """The candidate-node walk of preempt and reclaim: on each node of ``nodes`` (best first),
    evict among its ``candidates`` until ``task`` fits, or, with no candidate there, pipeline
    ``task`` when it ``fits_free``; True once it is pipelined on one."""
    for idx in nodes:
        cands = candidates(idx)
        if cands:
            if evict(idx, cands):
                return True
        elif fits_free(idx):
            stmt.pipeline(task, idx)
            return True
    return False


def offer_tasks(
    ssn: Session, job: JobInfo, budget: Budget, attempt: Callable[[TaskInfo], bool | None]
) -> None:
    """The task loop of preempt and reclaim: the starving ``job``'s preemptor tasks in order,
    each to ``attempt`` (True: placed, False: failed, None: skipped), while the job starves and
    the budget lasts; stops early once the gang can no longer reach its minimum with the tasks
    left."""
    tasks = preemptor_tasks(ssn, job)
    left = len(tasks)
    for task in tasks:
        if budget.exhausted or not ssn.dispatch.job_starving(job):
            break
        left -= 1
        if attempt(task) is False:
            have = job.ready_task_num() + job.waiting_task_num() + job.pending_best_effort
            if have + left < job.min_available:
                break


def commit_evictions(ssn: Session, stmt: Statement, causes: dict[str, tuple[str, str]]) -> None:
    """Commit ``stmt`` and name, on each of its evictions, the job it made room for."""
    evicted = [op.task.uid for op in stmt.ops if op.kind == "evict"]
    stmt.commit()
    emit_causes(ssn, evicted, causes)


def pipelined_reason(job: JobInfo, how: str) -> PendingReason:
    """The reason of a job whose gang a preempt/reclaim statement pipelined (replacing the
    allocate action's "does not fit")."""
    return PendingReason(job.uid, "Pipelined", f"waiting for resources being released by {how}")


def validate_victims(ssn: Session, preemptor: TaskInfo, idx: int, victims: list[TaskInfo]) -> bool:
    """Volcano's ValidateVictims: FutureIdle plus all victims' requests must hold the preemptor."""
    fut = ssn.nodes.cols(idx)[2]
    dims = fit_dims(preemptor)
    freed = [0] * len(fut)
    for v in victims:
        rl = v.template.req_list
        for d, _ in dims:
            freed[d] += rl[d]
    return all(fut[d] + freed[d] >= v for d, v in dims)


def emit_causes(ssn: Session, committed: Iterable[str], causes: dict[str, tuple[str, str]]) -> None:
    """One event per committed eviction naming the job it made room for.

    The session's eviction records get the same job as their `beneficiary` (the ledger
    reports who gained from each preemption and reclaim).
    """
    for i, ev in enumerate(ssn.evictions):
        got = causes.get(ev.uid)
        if got is not None and not ev.beneficiary:
            ssn.evictions[i] = replace(ev, beneficiary=got[0])
    for uid in committed:
        got = causes.get(uid)
        task = ssn.cache.tasks.get(uid)
        if got is None or task is None or not task.job_id or task.job_id not in ssn.jobs:
            continue
        cause, reason = got
        job = ssn.jobs[task.job_id]
        ssn.event(
            job,
            "Normal",
            "Reclaimed" if reason.endswith("reclaim") else "Preempted",
            f"pod {task.namespace}/{task.name} of {_named(job)} evicted ({reason}) for "
            f"{_named(ssn.jobs.get(cause), cause)}",
        )


def _named(job: JobInfo | None, job_id: str = "") -> str:
    """The workload a job's PodGroup belongs to, as its users name it (`job NS/NAME`,
    `PyTorchJob NS/NAME`; `PodGroup NS/NAME` when nothing owns it)."""
    if job is None:
        return f"PodGroup {job_id}"
    if job.podgroup is None:
        return f"PodGroup {job.namespace}/{job.name}"
    return workload_label(job.podgroup)
