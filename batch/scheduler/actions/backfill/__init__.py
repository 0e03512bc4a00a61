"""backfill: place best-effort pending tasks — Volcano's backfill action
(docs/volcano-semantics.md#backfill).

Best-effort tasks (no resource requests) of admitted, valid jobs, visited queue -> job -> task,
go to the best node that fits Idle (pod count and predicates only, since they request nothing).
Best-effort tasks that an earlier action pipelined (preempt does) are un-pipelined and retried
first, as Volcano does. Each placement is committed at once when the job is ready; no gang
statement is involved.
"""

from __future__ import annotations

import time

from batch.model.info import JobInfo
from batch.model.status import TaskStatus
from batch.scheduler.actionlib.selection import pending_tasks
from batch.scheduler.framework.arguments import Arg
from batch.scheduler.framework.decisions import PendingReason
from batch.scheduler.framework.registry import Action
from batch.scheduler.framework.session import Session
from batch.scheduler.framework.statement import Statement


class Backfill(Action):
    name = "backfill"
    ARGUMENTS = (Arg("predicateErrorCacheEnable", "bool", True, "accepted (Volcano)"),)

    def execute(self, ssn: Session) -> None:
        t0 = time.perf_counter()
        placer = ssn.placer
        qkey = ssn.dispatch.queue_order_key()
        jkey = ssn.dispatch.job_order_key()
        unpiped: set[str] = set()
        active = ssn.active_jobs()
        for job in active:
            if job.counts[TaskStatus.PIPELINED]:
                for t in list(job.tasks.values()):
                    if t.best_effort and t.status is TaskStatus.PIPELINED:
                        ssn.unplace(t)
                        unpiped.add(t.uid)
        if unpiped:
            ssn.pipelines[:] = [p for p in ssn.pipelines if p.uid not in unpiped]
        # the count first: most jobs have no best-effort task, and it spares them a call
        jobs: list[JobInfo] = [j for j in active if j.pending_best_effort and not j.is_pending()]
        jobs.sort(key=lambda j: (qkey(ssn.queues[j.queue]), jkey(j)))
        for job in jobs:
            if ssn.dispatch.job_valid(job) is not None:
                continue
            for task in pending_tasks(ssn, job, best_effort=True):
                got = placer.select(task)
                if got is None or not got[1]:
                    msg, hist = placer.explain(task)
                    ssn.record_fit_error(job, task, msg)
                    ssn.set_reason(
                        PendingReason(job.uid, "Unschedulable", msg, details={"fit": hist}),
                        overwrite=False,
                    )
                    continue
                stmt = Statement(ssn)
                stmt.allocate(task, got[0])
                if ssn.dispatch.job_ready(job):
                    stmt.commit()
        ssn.timings["backfill"] = time.perf_counter() - t0
