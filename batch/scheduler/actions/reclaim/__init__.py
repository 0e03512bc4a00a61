"""reclaim: cross-queue reclamation of fair share — Volcano's reclaim action
(docs/volcano-semantics.md#reclaim).

Queues with admitted, valid, starving jobs are visited in QueueOrder; a queue that is Overused is
skipped (an overused queue never reclaims). For each starving job (JobOrder), one Statement: for
each pending task (``preemptionPolicy: Never`` skipped) the queue must still be entitled
(``Preemptive(queue, [task])``: under its deserved share with this task); candidate nodes are
walked best-score first, and the reclaimees on a node are the Running, preemptable tasks of jobs
in *other* queues whose ``reclaimable`` is true; the Reclaimable callbacks choose the victims,
which are evicted in victim order (VictimQueueOrder first) until the task fits the node's
FutureIdle; the task is then pipelined there. Commit if the job is pipelined, else discard.
The queue is re-pushed while it still has starving jobs.

Tephra's hard guards (always on): a victim is never taken when that would bring its queue below
its ``guarantee`` on a guaranteed resource. With ``keepVictimQueueAtDeserved: true`` (share
hysteresis; Tephra's default configuration turns it on) a victim is taken only while its queue's
share (max over resources of allocated / deserved, as proportion computes it) stays at or above
``1 - reclaimHysteresis`` after the eviction — so a queue that was reclaimed from is never
left entitled to reclaim straight back (no ping-pong). Evictions carry reason ``reclaim``.

Arguments: ``predicateErrorCacheEnable``, ``victimSelection``, ``timeBudgetSeconds``,
``maxCandidateEvaluations``, ``maxCandidateNodesAbsolute`` (as preempt),
``keepVictimQueueAtDeserved`` (false), ``reclaimHysteresis`` (0.0, within 0..1).
"""

from __future__ import annotations

import time

import numpy as np
import numpy.typing as npt

from batch.model.info import JobInfo, QueueInfo, TaskInfo
from batch.model.status import TaskStatus
from batch.scheduler.actionlib.pq import PriorityQueue
from batch.scheduler.actionlib.queue_floor import (
    FLOOR_ARGS,
    QueueFloor,
    QueueLedger,
    parse_floor_arguments,
)
from batch.scheduler.actionlib.selection import has_topology, jobs_by_queue, starving_jobs
from batch.scheduler.actionlib.victims import (
    COMMON_ARGS,
    Budget,
    NodeTasks,
    budgeted_nodes,
    commit_evictions,
    evict_on_node,
    fits_future,
    offer_tasks,
    parse_common,
    pipelined_reason,
    walk_nodes,
)
from batch.scheduler.framework.arguments import Arguments
from batch.scheduler.framework.hooks import VictimGuard
from batch.scheduler.framework.registry import Action
from batch.scheduler.framework.session import Session
from batch.scheduler.framework.statement import Statement

RUNNING = frozenset({TaskStatus.RUNNING})


class Reclaim(Action):
    name = "reclaim"
    ARGUMENTS = (*COMMON_ARGS, *FLOOR_ARGS)

    def __init__(self, arguments: Arguments) -> None:
        super().__init__(arguments)
        c = parse_common(arguments, "reclaim")
        self.strict: bool = c["strict"]
        self.time_budget: float = c["time_budget"]
        self.max_candidates: int = c["max_candidates"]
        self.max_nodes: int = c["max_nodes"]
        self.floor_args = parse_floor_arguments(arguments, "reclaim")

    def execute(self, ssn: Session) -> None:
        t0 = time.perf_counter()
        budget = Budget(self.time_budget, self.max_candidates)
        jobs = [j for j in starving_jobs(ssn) if not has_topology(j)]
        if not jobs:
            ssn.timings["reclaim"] = time.perf_counter() - t0
            return
        queues = ssn.queues

        def group(t: TaskInfo, j: JobInfo) -> str | None:
            q = queues.get(j.queue)
            return j.queue if q is not None and q.reclaimable else None

        self.index = NodeTasks(ssn, group_of=group, statuses=RUNNING)
        self.ledger = QueueLedger(ssn)
        index = self.index
        if self.strict:
            index.job_exhausted = ssn.dispatch.victim_job_floor("reclaimable")
        # share hysteresis keeps victims' queues at their deserved share whatever the tiers say;
        # in strict mode a plugin's own victim rule (proportion's) may exclude whole queues
        at_deserved = ssn.dispatch.queue_at_deserved() if self.floor_args.keep_deserved else None
        if at_deserved is None and self.strict:
            at_deserved = ssn.dispatch.victim_queue_floor("reclaimable")
        index.group_exhausted = at_deserved
        index.start()
        self.causes: dict[str, tuple[str, str]] = {}
        jkey = ssn.dispatch.job_order_key()
        per_queue = jobs_by_queue(jobs, jkey)
        qpq: PriorityQueue[QueueInfo] = PriorityQueue(ssn.dispatch.queue_order_key())
        for name in per_queue:
            qpq.push(queues[name])
        while qpq and not budget.exhausted:
            queue = qpq.pop()
            if ssn.dispatch.overused(queue):
                continue
            pending = per_queue[queue.name]
            if not pending:
                continue
            job = pending.pop()
            stmt = Statement(ssn)
            self._reclaim_job(ssn, queue, job, stmt, budget)
            if len(stmt) and ssn.dispatch.job_pipelined(job):
                commit_evictions(ssn, stmt, self.causes)
                ssn.set_reason(pipelined_reason(job, "reclaim"))
            else:
                stmt.discard()
            if pending:
                qpq.push(queue)
        self.ledger.active = False
        self.index.close()
        ssn.timings["reclaim"] = time.perf_counter() - t0

    # -- guards -------------------------------------------------------------------------
    def _guard(self, ssn: Session) -> VictimGuard:
        ledger = self.ledger
        floor = QueueFloor(ssn, self.floor_args)

        def guard(_: str, __: TaskInfo, victims: list[TaskInfo]) -> list[TaskInfo]:
            out: list[TaskInfo] = []
            left: dict[str, npt.NDArray[np.int64]] = {}
            for t in victims:
                job = ssn.jobs.get(t.job_id or "")
                if job is None:
                    continue
                alloc = left.get(job.queue)
                if alloc is None:
                    alloc = ledger.allocated(job.queue).copy()
                after = alloc - t.req
                if floor.allows(job.queue, after):
                    out.append(t)
                    left[job.queue] = after
            return out

        return guard

    def _reclaim_job(
        self, ssn: Session, queue: QueueInfo, job: JobInfo, stmt: Statement, budget: Budget
    ) -> None:
        guard = self._guard(ssn)
        bound = self.index.others(queue.name)

        def attempt(task: TaskInfo) -> bool | None:
            if task.status is not TaskStatus.PENDING or task.preemption_policy == "Never":
                return None
            return self._reclaim_task(ssn, queue, task, stmt, budget, bound, guard)

        offer_tasks(ssn, job, budget, attempt)

    def _reclaim_task(
        self,
        ssn: Session,
        queue: QueueInfo,
        task: TaskInfo,
        stmt: Statement,
        budget: Budget,
        bound: npt.NDArray[np.int64],
        guard: VictimGuard,
    ) -> bool:
        """Walk the candidate nodes until ``task`` is pipelined onto one (True), if its queue
        is still entitled to reclaim for it."""
        if not ssn.dispatch.preemptive(queue, [task]) or ssn.dispatch.pre_predicate(task):
            return False

        def evict(idx: int, cands: list[TaskInfo]) -> bool:
            return evict_on_node(
                ssn,
                "reclaimable",
                queue,
                task,
                idx,
                cands,
                stmt,
                strict=self.strict,
                reason="reclaim",
                ready=lambda: True,
                causes=self.causes,
                extra=(guard,),
            )

        return walk_nodes(
            ssn,
            task,
            stmt,
            budgeted_nodes(ssn, task, bound, self.max_nodes, budget),
            candidates=lambda idx: self._reclaimees(ssn, queue, idx),
            evict=evict,
            fits_free=lambda idx: fits_future(ssn, task, idx),  # room without evicting anyone
        )

    def _reclaimees(self, ssn: Session, queue: QueueInfo, idx: int) -> list[TaskInfo]:
        """The candidate tasks on node ``idx`` of jobs in other, reclaimable queues."""
        index = self.index
        jobs = ssn.jobs
        queues = ssn.queues
        cands: list[TaskInfo] = []
        for t in index.by_node.get(idx, ()):
            if not index.candidate(t):
                continue
            vjob = jobs.get(t.job_id or "")
            if vjob is None or vjob.queue == queue.name:
                continue
            vq = queues.get(vjob.queue)
            if vq is None or not vq.reclaimable:
                continue
            cands.append(t)
        return cands
