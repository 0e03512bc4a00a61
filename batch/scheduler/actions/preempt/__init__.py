"""preempt: priority preemption inside a queue — Volcano's preempt action
(docs/volcano-semantics.md#preempt).

Preemptors are the pending (ungated) tasks of jobs that are admitted, valid and starving
(JobStarving), in TaskOrder. Queue by queue (QueueOrder) and job by job (JobOrder), one Statement
per job: while the job is starving, take its next task (``preemptionPolicy: Never`` is skipped),
walk the candidate nodes (predicates pass; best score first), and on each node ask the
Preemptable callbacks which running, preemptable tasks of *other jobs of the same queue* may go
(a best-effort preemptor only takes best-effort victims). Victims are evicted in victim order
until the preemptor fits the node's FutureIdle and the queue allows it (Allocatable), then the
preemptor is pipelined onto that node; a node where it still does not fit keeps nothing. The job's
statement is committed only if the job is then pipelined (JobPipelined), otherwise discarded:
no eviction happens for a gang that cannot be completed. Then intra-job preemption: a starving
job's pending tasks may evict lower-priority running tasks of the same job, one committed
statement per task.

Evictions are ``Decisions.evictions`` with reason ``preempt`` (the pods stay Releasing in the
cache until the watch shows them gone) plus a ``Preempted`` event on the victim's PodGroup naming
the preemptor job.

Arguments (``configurations: - name: preempt``): Volcano's ``enableTopologyAwarePreemption``
(false: jobs with a networkTopology are skipped, as in Volcano; true: they preempt inside one
HyperNode domain of the ``network-topology-aware`` plugin), ``topologyAwarePreemptWorkerNum``,
``minCandidateNodesPercentage``, ``minCandidateNodesAbsolute`` (accepted),
``maxCandidateNodesAbsolute`` (100: nodes visited per preemptor task),
``predicateErrorCacheEnable``; Tephra's ``victimSelection`` (``volcano`` | ``strict``, see
victims.py), ``timeBudgetSeconds`` and ``maxCandidateEvaluations`` (0 = unlimited; when spent, the
action stops after finishing the job in hand), ``maxTopologyDomains`` (8).
"""

from __future__ import annotations

import time

import numpy as np
import numpy.typing as npt

from batch.model.info import JobInfo, QueueInfo, TaskInfo
from batch.model.status import PREEMPTABLE_STATUS, TaskStatus
from batch.scheduler.actionlib.selection import has_topology, preemptor_tasks, starving_jobs
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
from batch.scheduler.framework.arguments import Arg, Arguments
from batch.scheduler.framework.hooks import TopologyPreemption
from batch.scheduler.framework.registry import Action
from batch.scheduler.framework.session import Session
from batch.scheduler.framework.statement import Statement


class Preempt(Action):
    name = "preempt"
    ARGUMENTS = (
        *COMMON_ARGS,
        Arg(
            "enableTopologyAwarePreemption",
            "bool",
            False,
            "jobs with a networkTopology preempt inside one HyperNode domain (false: skipped)",
        ),
        Arg("maxTopologyDomains", "int", 8, "HyperNode domains tried per job"),
        Arg("topologyAwarePreemptWorkerNum", "int", 16, "accepted (Volcano)"),
        Arg("minCandidateNodesPercentage", "int", 10, "accepted (Volcano)"),
        Arg("minCandidateNodesAbsolute", "int", 1, "accepted (Volcano)"),
    )

    def __init__(self, arguments: Arguments) -> None:
        super().__init__(arguments)
        c = parse_common(arguments, "preempt")
        self.strict: bool = c["strict"]
        self.time_budget: float = c["time_budget"]
        self.max_candidates: int = c["max_candidates"]
        self.max_nodes: int = c["max_nodes"]
        self.topology = arguments.get_bool("enableTopologyAwarePreemption", False)
        self.max_domains = arguments.get_int("maxTopologyDomains", 8)
        for k in (
            "topologyAwarePreemptWorkerNum",
            "minCandidateNodesPercentage",
            "minCandidateNodesAbsolute",
        ):
            arguments.get_int(k, 0)

    # -- the action ---------------------------------------------------------------------
    def execute(self, ssn: Session) -> None:
        t0 = time.perf_counter()
        budget = Budget(self.time_budget, self.max_candidates)
        jobs = starving_jobs(ssn)
        if not jobs:
            ssn.timings["preempt"] = time.perf_counter() - t0
            return
        self.index = NodeTasks(ssn, group_of=lambda t, j: j.queue)
        if self.strict:
            # a plugin that never gives a task of some jobs (gang: a job at its minimum): in
            # strict mode such jobs' tasks can be left out of the candidates and the bounds
            self.index.job_exhausted = ssn.dispatch.victim_job_floor("preemptable")
        self.index.start()
        self.causes: dict[str, tuple[str, str]] = {}
        qkey = ssn.dispatch.queue_order_key()
        jkey = ssn.dispatch.job_order_key()
        by_queue: dict[str, list[JobInfo]] = {}
        for job in jobs:
            by_queue.setdefault(job.queue, []).append(job)
        topo = ssn.dispatch.topology_preemption()
        for qname in sorted(by_queue, key=lambda n: qkey(ssn.queues[n])):
            queue = ssn.queues[qname]
            for job in sorted(by_queue[qname], key=jkey):
                if budget.exhausted:
                    break
                if has_topology(job):
                    if not self.topology or topo is None:
                        continue
                    self._preempt_topology_job(ssn, queue, job, topo, budget)
                    continue
                stmt = Statement(ssn)
                self._preempt_job(ssn, queue, job, stmt, budget)
                self._finish(ssn, job, stmt)
        # intra-job preemption: lower-priority tasks of the same job
        for job in jobs:
            if budget.exhausted:
                break
            if not ssn.dispatch.job_starving(job) or has_topology(job):
                continue
            queue = ssn.queues[job.queue]
            for task in preemptor_tasks(ssn, job):
                if budget.exhausted or not ssn.dispatch.job_starving(job):
                    break
                stmt = Statement(ssn)
                if self._preempt_task(ssn, queue, job, task, stmt, budget, same_job=True):
                    self._commit(ssn, stmt)
                else:
                    stmt.discard()
        self.index.close()
        ssn.timings["preempt"] = time.perf_counter() - t0

    def _finish(self, ssn: Session, job: JobInfo, stmt: Statement) -> bool:
        if len(stmt) and ssn.dispatch.job_pipelined(job):
            self._commit(ssn, stmt)
            ssn.set_reason(pipelined_reason(job, "preemption"))
            return True
        stmt.discard()
        return False

    def _commit(self, ssn: Session, stmt: Statement) -> None:
        commit_evictions(ssn, stmt, self.causes)

    def _preempt_topology_job(
        self,
        ssn: Session,
        queue: QueueInfo,
        job: JobInfo,
        topo: TopologyPreemption,
        budget: Budget,
    ) -> None:
        domains = topo.preemption_domains(job)
        for dom in domains[: self.max_domains]:
            topo.pin(job, dom)
            stmt = Statement(ssn)
            self._preempt_job(ssn, queue, job, stmt, budget)
            if self._finish(ssn, job, stmt):
                return
            if budget.exhausted:
                break
        topo.unpin(job)

    def _preempt_job(
        self, ssn: Session, queue: QueueInfo, job: JobInfo, stmt: Statement, budget: Budget
    ) -> None:
        def attempt(task: TaskInfo) -> bool | None:
            if task.status is not TaskStatus.PENDING:
                return None
            return self._preempt_task(ssn, queue, job, task, stmt, budget, same_job=False)

        offer_tasks(ssn, job, budget, attempt)

    def _preempt_task(
        self,
        ssn: Session,
        queue: QueueInfo,
        job: JobInfo,
        task: TaskInfo,
        stmt: Statement,
        budget: Budget,
        *,
        same_job: bool,
    ) -> bool:
        """Walk the candidate nodes until ``task`` is pipelined onto one (True)."""
        if task.preemption_policy == "Never":
            return False
        if ssn.dispatch.pre_predicate(task):
            return False
        bound = self._job_bound(ssn, job) if same_job else self.index.own(queue.name)

        def candidates(idx: int) -> list[TaskInfo]:
            if same_job:
                return self._own_job_candidates(job, task, idx)
            return self._queue_candidates(ssn, queue, job, task, idx)

        def evict(idx: int, cands: list[TaskInfo]) -> bool:
            return evict_on_node(
                ssn,
                "preemptable",
                queue,
                task,
                idx,
                cands,
                stmt,
                strict=self.strict,
                reason="preempt",
                ready=lambda: ssn.dispatch.allocatable(queue, task),
                causes=self.causes,
            )

        def fits_free(idx: int) -> bool:
            # Fits without evicting anyone: pipelined as part of the job's statement, which
            # is kept only if the whole gang gets pipelined. Not in intra-job preemption,
            # whose statements are committed task by task: there it would pipeline (and
            # nominate) part of a gang that may never fit, holding the node from every
            # other job (Volcano's intra-job preemption needs victims too).
            return (
                not same_job and ssn.dispatch.allocatable(queue, task) and _fits_now(ssn, task, idx)
            )

        nodes = budgeted_nodes(ssn, task, bound, self.max_nodes, budget)
        return walk_nodes(
            ssn, task, stmt, nodes, candidates=candidates, evict=evict, fits_free=fits_free
        )

    def _own_job_candidates(self, job: JobInfo, task: TaskInfo, idx: int) -> list[TaskInfo]:
        """Intra-job preemption: the job's own preemptable tasks on node ``idx``."""
        best_effort = task.best_effort
        return [
            t
            for t in self.index.by_node.get(idx, ())
            if t.status in PREEMPTABLE_STATUS
            and t.job_id == job.uid
            and (not best_effort or t.best_effort)
        ]

    def _queue_candidates(
        self, ssn: Session, queue: QueueInfo, job: JobInfo, task: TaskInfo, idx: int
    ) -> list[TaskInfo]:
        """The preemptable candidate tasks on node ``idx`` of other jobs of the same queue (only
        best-effort ones for a best-effort preemptor)."""
        index = self.index
        jobs = ssn.jobs
        best_effort = task.best_effort
        cands: list[TaskInfo] = []
        for t in index.by_node.get(idx, ()):
            if t.status not in PREEMPTABLE_STATUS or not index.candidate(t):
                continue
            if t.job_id == job.uid:
                continue
            vjob = jobs.get(t.job_id or "")
            if vjob is None or vjob.queue != queue.name:
                continue
            if best_effort and not t.best_effort:
                continue
            cands.append(t)
        return cands

    def _job_bound(self, ssn: Session, job: JobInfo) -> npt.NDArray[np.int64]:
        nd = ssn.nodes
        out = np.zeros((self.index.dims, nd.n), dtype=np.int64)
        for t in job.tasks.values():
            if t.status in PREEMPTABLE_STATUS and 0 <= t.node_idx < nd.n:
                out[:, t.node_idx] += t.req[: self.index.dims]
        return out


def _fits_now(ssn: Session, task: TaskInfo, idx: int) -> bool:
    return fits_future(ssn, task, idx)
