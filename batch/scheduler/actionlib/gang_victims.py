"""The shared run of gangpreempt and gangreclaim: whole-gang planning per candidate domain.

Both actions (docs/volcano-semantics.md#gang-eviction) take the admitted, valid, starving jobs queue
by queue (QueueOrder; gangreclaim skips an Overused queue) and job by job (JobOrder). For one
preemptor job: its pending, ungated, non-best-effort tasks in TaskOrder are the need (gangreclaim
first asks Preemptive for all of them at once). The candidate domains are the whole cluster, or
for a job with a ``networkTopology`` the HyperNode domains of the topology plugin (at most
``maxDomains``). In a domain the running victims are grouped in bundles (actionlib/bundles.py),
filtered by the UnifiedEvictable callbacks, and taken in bundle order: after each added bundle,
if the domain's Idle + Releasing plus what the bundles free holds the need, a dry run evicts those
victims and pipelines every pending task onto the domain's nodes (predicates, FutureIdle,
Allocatable); the first plan that leaves the job pipelined is kept. The job's statement is
committed only if the job is then pipelined, otherwise discarded.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from batch.model.info import JobInfo, QueueInfo, TaskInfo
from batch.model.resources import IntVec
from batch.model.status import PREEMPTABLE_STATUS, TaskStatus
from batch.scheduler.actionlib.bundles import (
    WHOLE,
    Bundle,
    flatten,
    job_bundles,
    job_preemptable,
    keep_allowed,
    sort_bundles,
)
from batch.scheduler.actionlib.pq import PriorityQueue
from batch.scheduler.actionlib.queue_floor import FloorArgs, QueueFloor, QueueLedger
from batch.scheduler.actionlib.selection import has_topology, jobs_by_queue, starving_jobs
from batch.scheduler.actionlib.victims import (
    TIME_BUDGET,
    Budget,
    Rev,
    candidate_nodes,
    emit_causes,
    pipelined_reason,
)
from batch.scheduler.framework.arguments import Arg, Arguments, ConfigError
from batch.scheduler.framework.session import Session
from batch.scheduler.framework.shares import le_common
from batch.scheduler.framework.statement import Statement

IntIdx = npt.NDArray[np.intp]
RUNNING = frozenset({TaskStatus.RUNNING})


@dataclass(slots=True, frozen=True)
class GangEvictionArgs:
    max_domains: int
    allow_whole: bool
    time_budget: float = 0.0


#: the arguments gangpreempt and gangreclaim share (read by ``parse_gang_arguments``)
GANG_ARGS: tuple[Arg, ...] = (
    Arg("maxDomains", "int", 8, "domains tried per job (<= 0: 8, as in Volcano)"),
    Arg("allowWholeBundle", "bool", True, "a plan may evict whole victim gangs"),
    TIME_BUDGET,
)


def parse_gang_arguments(args: Arguments, owner: str) -> GangEvictionArgs:
    """``maxDomains`` (8; a value <= 0 falls back to 8, as in Volcano), ``allowWholeBundle``
    (true) and Tephra's ``timeBudgetSeconds`` (0: none; as preempt's and reclaim's: no new
    preemptor job is looked at once the action has run that long)."""
    max_domains = args.get_int("maxDomains", 8)
    budget = args.get_float("timeBudgetSeconds", 0.0)
    if not 0.0 <= budget < math.inf:
        raise ConfigError(f"configurations[{owner}]: timeBudgetSeconds must be >= 0")
    return GangEvictionArgs(
        max_domains=max_domains if max_domains > 0 else 8,
        allow_whole=args.get_bool("allowWholeBundle", True),
        time_budget=budget,
    )


@dataclass(slots=True, frozen=True)
class Domain:
    nodes: IntIdx  # node indexes
    pin: object | None = None  # the topology plugin's domain, pinned while planning


class GangEviction:
    """One execution of gangpreempt (``reclaim=False``) or gangreclaim (``reclaim=True``)."""

    #: skip a job whose plan would fail like an earlier one's (exact; tests switch it off)
    use_memo: ClassVar[bool] = True

    def __init__(
        self,
        ssn: Session,
        args: GangEvictionArgs,
        *,
        reclaim: bool,
        floor: FloorArgs | None = None,
    ) -> None:
        self.ssn = ssn
        self.args = args
        self.reclaim = reclaim
        #: gangreclaim: what a victim queue keeps (guarantee; with keepVictimQueueAtDeserved,
        #: its deserved share), followed through the dry runs by the ledger
        self.floor = QueueFloor(ssn, floor) if floor is not None else None
        self.ledger: QueueLedger | None = None  # made once there is a starving job
        self.reason = "gangreclaim" if reclaim else "gangpreempt"
        self.statuses = RUNNING if reclaim else PREEMPTABLE_STATUS
        nd = ssn.nodes
        self.zero_bound = np.zeros((len(ssn.resources.names), nd.n), dtype=np.int64)
        self._on_nodes: dict[str, list[TaskInfo]] | None = None
        self.causes: dict[str, tuple[str, str]] = {}
        #: plans committed so far (nothing else changes the state during the action)
        self.commits = 0
        #: failed plans by ``_memo_key``: (commits then, the longest wait that failed)
        self.failed: dict[tuple[object, ...], tuple[int, float]] = {}

    @property
    def on_nodes(self) -> dict[str, list[TaskInfo]]:
        """Per job, its tasks on a node in a victim status when the action first looked."""
        if self._on_nodes is None:
            n = self.ssn.nodes.n
            self._on_nodes = {}
            for job in self.ssn.jobs.values():
                got = [
                    t
                    for t in job.tasks.values()
                    if 0 <= t.node_idx < n and t.status in self.statuses and t.preemptable
                ]
                if got:
                    self._on_nodes[job.uid] = got
        return self._on_nodes

    # -- the action ----------------------------------------------------------------------
    def run(self) -> None:
        t0 = time.perf_counter()
        ssn = self.ssn
        dispatch = ssn.dispatch
        starving = jobs_by_queue(starving_jobs(ssn), dispatch.job_order_key())
        if starving and self.floor is not None:
            self.ledger = QueueLedger(ssn)  # walks every job: only when there is work
        queues: PriorityQueue[QueueInfo] = PriorityQueue(dispatch.queue_order_key())
        queues.extend(ssn.queues[name] for name in starving)
        budget = Budget(self.args.time_budget, 0)
        while queues and not budget.exhausted:
            queue = queues.pop()
            if self.reclaim and dispatch.overused(queue):
                continue
            pending = starving[queue.name]
            while pending and not budget.exhausted:
                self._job(queue, pending.pop())
        if self.ledger is not None:
            self.ledger.active = False
        ssn.timings[self.reason] = time.perf_counter() - t0

    def _job(self, queue: QueueInfo, job: JobInfo) -> None:
        ssn = self.ssn
        pending = self._pending(job)
        key = self._memo_key(queue, job, pending)
        wait = ssn.now - pending[0].creation if pending else 0.0
        if key is not None:
            failed = self.failed.get(key)
            if failed is not None and failed[0] == self.commits and wait <= failed[1]:
                return  # a job like it that had waited at least as long found no plan
        stmt = Statement(ssn)
        self._plan_job(queue, job, pending, stmt)
        if len(stmt) and ssn.dispatch.job_pipelined(job) and self._nearer_shares(queue, stmt):
            evicted = [op.task.uid for op in stmt.ops if op.kind == "evict"]
            stmt.commit()
            self.commits += 1
            emit_causes(ssn, evicted, self.causes)
            ssn.set_reason(pipelined_reason(job, "gang " + self.reason[4:]))
        else:
            stmt.discard()
            if key is not None:
                self.failed[key] = (self.commits, wait)

    def _memo_key(
        self, queue: QueueInfo, job: JobInfo, pending: list[TaskInfo]
    ) -> tuple[object, ...] | None:
        """What a failed plan of ``job`` depends on besides how long its first pending pod has
        waited (victims allowed by a wait-based bound only grow with the wait) and the state,
        which only this action's commits change: its queue, priority and pending tasks'
        templates. Jobs with a network topology (domains of their own) are not memoized."""
        if not self.use_memo or not pending or has_topology(job):
            return None
        return (queue.name, job.priority, tuple(t.template.tid for t in pending))

    # -- one preemptor job ---------------------------------------------------------------
    def _pending(self, job: JobInfo) -> list[TaskInfo]:
        tasks = [
            t
            for t in job.tasks.values()
            if t.status is TaskStatus.PENDING and not t.gated and not t.best_effort
        ]
        tasks.sort(key=self.ssn.dispatch.task_order_key())
        return tasks

    def _domains(self, job: JobInfo) -> list[Domain]:
        ssn = self.ssn
        if not has_topology(job):
            return [Domain(np.flatnonzero(ssn.nodes.valid))]
        topo = ssn.dispatch.topology_preemption()
        if topo is None:
            return []
        doms = topo.preemption_domains(job)[: self.args.max_domains]
        return [Domain(topo.domain_nodes(d), d) for d in doms]

    def _plan_job(
        self, queue: QueueInfo, job: JobInfo, pending: list[TaskInfo], stmt: Statement
    ) -> None:
        ssn = self.ssn
        if not pending:
            return
        if self.reclaim and not ssn.dispatch.preemptive(queue, pending):
            return
        dims = len(ssn.resources.names)
        need = np.zeros(dims, dtype=np.int64)
        for t in pending:
            need += t.init_req[:dims]
        topo = ssn.dispatch.topology_preemption()
        for dom in self._domains(job):
            if not ssn.dispatch.job_starving(job):
                break
            if len(dom.nodes) == 0:
                continue
            if topo is not None and dom.pin is not None:
                topo.pin(job, dom.pin)
            if self._plan_domain(queue, job, pending, need, dom, stmt):
                return
        if topo is not None and has_topology(job):
            topo.unpin(job)

    def _plan_domain(
        self,
        queue: QueueInfo,
        job: JobInfo,
        pending: list[TaskInfo],
        need: IntVec,
        dom: Domain,
        stmt: Statement,
    ) -> bool:
        nd = self.ssn.nodes
        cols = dom.nodes
        dims = len(need)
        base = (nd.idle[:dims, cols] + nd.releasing[:dims, cols]).sum(axis=1)
        # what is idle or being released (by earlier plans, too) may hold the job already
        if bool((need[1:] <= base[1:]).all()) and self._try(queue, job, pending, [], dom, stmt):
            return True
        bundles = self._bundles(queue, job, pending, need, dom)
        if self._take(queue, job, pending, need, dom, stmt, base, bundles):
            return True
        # regrouping by node is worth it only when the usual order failed
        return len(bundles) > 1 and self._take(
            queue, job, pending, need, dom, stmt, base, by_node(bundles, nd.alloc)
        )

    def _take(
        self,
        queue: QueueInfo,
        job: JobInfo,
        pending: list[TaskInfo],
        need: IntVec,
        dom: Domain,
        stmt: Statement,
        base: IntVec,
        bundles: list[Bundle],
    ) -> bool:
        """Add ``bundles`` in order (those the floor allows) until what they free with ``base``
        holds ``need`` and a dry run pipelines the job."""
        dims = len(need)
        victims: list[TaskInfo] = []
        freed = np.zeros_like(need)
        left: dict[str, npt.NDArray[np.int64]] = {}  # victim queue -> allocated after
        for b in bundles:
            if not self._floor_allows(b, left):
                continue
            victims.extend(b.tasks)
            for t in b.tasks:
                freed += t.req[:dims]
            if not bool((need[1:] <= base[1:] + freed[1:]).all()):
                continue
            if self._try(queue, job, pending, victims, dom, stmt):
                return True
        return False

    def _at_floor(self, queue: str, memo: dict[str, bool]) -> bool:
        """Is ``queue`` already where the floor stops? (Losing tasks never raises a share, so
        none of its bundles could pass ``_floor_allows``.)"""
        if self.floor is None or self.ledger is None:
            return False
        got = memo.get(queue)
        if got is None:
            got = memo[queue] = not self.floor.allows(queue, self.ledger.allocated(queue))
        return got

    def _floor_allows(self, b: Bundle, left: dict[str, npt.NDArray[np.int64]]) -> bool:
        """Can bundle ``b`` go, with the bundles taken before it, and its queue keep what the
        floor asks? (``left``: each victim queue's allocated after the bundles taken so far)"""
        if self.floor is None or self.ledger is None:
            return True
        q = b.job.queue
        before = left.get(q)
        if before is None:
            before = self.ledger.allocated(q)
        borrowed = b.kind == WHOLE and self._borrowed(b.job)
        if not borrowed and self._within_share(q, before):
            return False
        after = before
        for t in b.tasks:
            after = after - t.req
        if not self.floor.allows(q, after, borrowed=borrowed):
            return False
        left[q] = after
        return True

    def _within_share(self, queue: str, allocated: npt.NDArray[np.int64]) -> bool:
        """Does ``queue``'s ``allocated`` (less the bundles already chosen) fit its deserved
        share? Then it gives nothing more: Volcano's Reclaimable takes a victim only while its
        queue's allocated does not fit deserved, in every configuration (issue 34.8)."""
        deserved = self.ssn.dispatch.deserved(queue)
        return deserved is not None and le_common(allocated, deserved)

    def _borrowed(self, job: JobInfo) -> bool:
        """Is ``job`` a gang larger than its queue's whole deserved share (on a resource its
        minResources, or without them what it holds, asks for)? Such a gang runs on room its
        queue is not owed: it may go whole even if its queue is left below its share, since
        the queue could never take it back within it."""
        mr = job.min_resources if job.min_resources is not None else job.allocated
        deserved = self.ssn.dispatch.deserved(job.queue)
        return deserved is not None and not le_common(mr, deserved)

    def _nearer_shares(self, queue: QueueInfo, stmt: Statement) -> bool:
        """gangreclaim: a plan that takes the reclaiming queue past its deserved share (it may,
        when that leaves the queue nearer its share: ``nearer_on``) must also bring the queues
        it touches nearer their shares in all: the sum over them of |allocated - deserved|,
        each resource over the cluster's total, falls. Without it, queues whose shares are
        fractions of a gang (three equal queues of 8-GPU jobs on 16 GPUs: 5.3 each) took each
        other's gangs in turn for ever: each such plan lowers that sum, so none is undone."""
        if not self.reclaim or self.ledger is None:
            return True
        ssn = self.ssn
        moved: dict[str, IntVec] = {queue.name: ssn.resources.zeros()}
        for op in stmt.ops:
            q = queue.name if op.kind == "pipeline" else ssn.jobs[op.task.job_id or ""].queue
            sign = 1 if op.kind == "pipeline" else -1
            moved[q] = moved.get(q, ssn.resources.zeros()) + sign * op.task.req
        mine = self.ledger.allocated(queue.name)  # pipelining leaves it as it was
        deserved = ssn.dispatch.deserved(queue.name)
        if deserved is None or le_common(mine + moved[queue.name], deserved):
            return True
        dims = np.flatnonzero(moved[queue.name][1:] > 0) + 1
        total = np.maximum(ssn.total_resource[dims].astype(np.float64), 1.0)
        change = 0.0
        for q, delta in moved.items():
            des = ssn.dispatch.deserved(q)
            if des is not None:
                # the dry run's evictions are counted in the ledger already
                after = self.ledger.allocated(q) + (delta if q == queue.name else 0)
                before = after - delta
                change += float((np.abs(after[dims] - des[dims]) / total).sum())
                change -= float((np.abs(before[dims] - des[dims]) / total).sum())
        return change < -1e-12

    # -- victims -------------------------------------------------------------------------
    def _victim_job(self, job: JobInfo, queue: QueueInfo, victim: JobInfo) -> bool:
        """May ``victim``'s tasks be candidates for preemptor ``job`` (queue, priority)?"""
        if victim.uid == job.uid or not job_preemptable(victim):
            return False
        if self.reclaim:
            vq = self.ssn.queues.get(victim.queue)
            return victim.queue != queue.name and vq is not None and vq.reclaimable
        return victim.queue == queue.name and job.priority > victim.priority

    def _bundles(
        self, queue: QueueInfo, job: JobInfo, pending: list[TaskInfo], need: IntVec, dom: Domain
    ) -> list[Bundle]:
        ssn = self.ssn
        mask = ssn.nodes.valid if dom.pin is None else self._mask(dom)
        by_job: dict[str, tuple[JobInfo, list[TaskInfo]]] = {}
        floored: dict[str, bool] = {}  # victim queue -> already at its floor (gives nothing)
        for juid, on_nodes in self.on_nodes.items():
            victim = ssn.jobs[juid]
            if not self._victim_job(job, queue, victim) or self._at_floor(victim.queue, floored):
                continue
            tasks = [t for t in on_nodes if t.status in self.statuses and mask[t.node_idx]]
            if tasks:
                by_job[juid] = (victim, tasks)
        bundles = [b for victim, tasks in by_job.values() for b in job_bundles(victim, tasks)]
        if not bundles:
            return []
        key = self._victim_key(queue, {b.job.queue for b in bundles})
        sort_bundles(bundles, need, key)
        allowed_tasks = ssn.dispatch.victims("unified_evictable", pending[0], flatten(bundles))
        # the hard victim guards (minruntime) hold here as in preempt and reclaim
        point = "reclaimable" if self.reclaim else "preemptable"
        for guard in ssn.dispatch.victim_guards():
            allowed_tasks = guard(point, pending[0], allowed_tasks) if allowed_tasks else []
        valid = keep_allowed(bundles, {t.uid for t in allowed_tasks})
        sort_bundles(valid, need, key)
        return [b for b in valid if b.kind != WHOLE or self.args.allow_whole]

    def _mask(self, dom: Domain) -> npt.NDArray[np.bool_]:
        mask = np.zeros(self.ssn.nodes.n, dtype=np.bool_)
        mask[dom.nodes] = True
        return mask

    def _victim_key(self, queue: QueueInfo, victim_queues: set[str]) -> Callable[[JobInfo], Any]:
        """gangreclaim: the victim-queue order (from the preemptor's queue); gangpreempt: the
        victim job that orders last in JobOrder gives first."""
        ssn = self.ssn
        if self.reclaim:
            qs = [ssn.queues[q] for q in victim_queues if q in ssn.queues]

            def order(a: QueueInfo, b: QueueInfo) -> int:
                return ssn.dispatch.victim_queue_order(a, b, queue)

            cmp = functools.cmp_to_key(order)
            rank = {q.name: i for i, q in enumerate(sorted(qs, key=cmp))}
            return lambda j: rank.get(j.queue, len(rank))
        jkey = ssn.dispatch.job_order_key()
        return lambda j: Rev(jkey(j))

    # -- the dry run ---------------------------------------------------------------------
    def _try(
        self,
        queue: QueueInfo,
        job: JobInfo,
        pending: list[TaskInfo],
        victims: list[TaskInfo],
        dom: Domain,
        stmt: Statement,
    ) -> bool:
        """Evict ``victims`` and pipeline every pending task in ``dom``; kept iff the job is
        then pipelined, else undone."""
        ssn = self.ssn
        mark = stmt.save_operations()
        for v in victims:
            stmt.evict(v, self.reason)
            self.causes[v.uid] = (job.uid, self.reason)
        in_domain = self._mask(dom)
        for task in pending:
            idx = self._node_for(queue, task, in_domain)
            if idx is None:
                stmt.recover_operations(mark)
                return False
            stmt.pipeline(task, idx)
        if ssn.dispatch.job_pipelined(job):
            return True
        stmt.recover_operations(mark)
        return False

    def _node_for(
        self, queue: QueueInfo, task: TaskInfo, in_domain: npt.NDArray[np.bool_]
    ) -> int | None:
        ssn = self.ssn
        if not ssn.dispatch.allocatable(queue, task) or ssn.dispatch.pre_predicate(task):
            return None
        placer = ssn.placer
        nodes = [
            i
            for i in candidate_nodes(ssn, task, self.zero_bound, ssn.nodes.n)
            if in_domain[i] and (not placer.scalar_preds or placer._scalar_ok(task, i))
        ]
        if not nodes:
            return None
        # nodes whose Idle already holds the task first (Volcano's first gradient), best score
        used = ssn.nodes.used
        alloc = ssn.nodes.alloc
        fit = task.template.fit
        for i in nodes:
            if bool((alloc[:, i] - used[:, i] >= fit).all()):
                return i
        return nodes[0]


def by_node(bundles: list[Bundle], alloc: npt.NDArray[np.int64]) -> list[Bundle]:
    """The same victim tasks, bundled again node by node: nodes ranked by what clearing them
    alone would take (``_clearing_cost``), each job's safe bundle made of its tasks on the
    best-ranked nodes, and bundles taken by their best node, safe before whole.

    Why: the given order takes every victim job's surplus first, wherever it runs. When the
    gang needs whole nodes, that spends what the victim queues may lose (their floor) on pods
    spread over every node and frees none of them; clearing the cheapest nodes first may."""
    tasks: dict[str, tuple[JobInfo, list[TaskInfo]]] = {}
    for b in bundles:
        tasks.setdefault(b.job.uid, (b.job, []))[1].extend(b.tasks)
    nodes = {t.node_idx for _job, ts in tasks.values() for t in ts}
    rank = {
        n: i
        for i, n in enumerate(sorted(nodes, key=lambda n: (_clearing_cost(n, tasks, alloc), n)))
    }
    out = [
        b for job, ts in tasks.values() for b in job_bundles(job, ts, lambda t: rank[t.node_idx])
    ]
    out.sort(key=lambda b: (min(rank[t.node_idx] for t in b.tasks), b.kind, b.job.uid))
    return out


def _clearing_cost(
    node: int, tasks: dict[str, tuple[JobInfo, list[TaskInfo]]], alloc: npt.NDArray[np.int64]
) -> float:
    """What clearing ``node`` alone takes, over its allocatable, summed over the resources but
    pods: of each victim job with pods there, those pods while they are within its surplus
    above minAvailable, else every candidate pod of the job (its gang goes)."""
    dims = alloc.shape[0]
    total = np.zeros(dims, dtype=np.int64)
    for job, ts in tasks.values():
        here = [t for t in ts if t.node_idx == node]
        if here:
            gone = here if len(here) <= job.ready_task_num() - job.min_available else ts
            for t in gone:
                total += t.req[:dims]
    room = alloc[1:, node].astype(np.float64)
    return float((total[1:] / np.where(room > 0, room, 1.0)).sum())
