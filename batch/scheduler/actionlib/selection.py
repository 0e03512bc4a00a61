"""Which jobs and tasks an action works on, in the order the plugins give.

allocate and backfill take a job's pending, ungated tasks of one kind (best-effort or not) in
TaskOrder; preempt, reclaim and the gang actions take the admitted, valid, starving jobs and
their pending tasks. Jobs with a ``networkTopology`` are told apart because the evicting actions
treat them separately (Volcano skips them unless topology-aware preemption is on).
"""

from __future__ import annotations

from batch.model.info import JobInfo, TaskInfo
from batch.model.status import TaskStatus
from batch.scheduler.framework.session import Session


def pending_tasks(ssn: Session, job: JobInfo, *, best_effort: bool) -> list[TaskInfo]:
    if len(job.tasks) == 1:  # most jobs of a big backlog: no list to build, nothing to sort
        (t,) = job.tasks.values()
        ok = t.status is TaskStatus.PENDING and not t.gated and t.best_effort == best_effort
        return [t] if ok else []
    tasks = [
        t
        for t in job.tasks.values()
        if t.status is TaskStatus.PENDING and not t.gated and t.best_effort == best_effort
    ]
    if len(tasks) > 1:  # one task is in order already (most jobs of a big backlog)
        tasks.sort(key=ssn.dispatch.task_order_key())
    return tasks


def starving_jobs(ssn: Session) -> list[JobInfo]:
    """Admitted, valid, starving jobs with pending ungated tasks."""
    out = []
    for job in ssn.active_jobs():
        if job.is_pending() or job.queue not in ssn.queues:
            continue
        if job.counts[TaskStatus.PENDING] - job.gated_pending <= 0:
            continue
        if not ssn.dispatch.job_starving(job):
            continue
        if ssn.dispatch.job_valid(job) is not None:
            continue
        out.append(job)
    return out


def preemptor_tasks(ssn: Session, job: JobInfo) -> list[TaskInfo]:
    key = ssn.dispatch.task_order_key()
    tasks = [t for t in job.tasks.values() if t.status is TaskStatus.PENDING and not t.gated]
    tasks.sort(key=key)
    return tasks


def has_topology(job: JobInfo) -> bool:
    nt = job.network_topology
    return bool(nt) and isinstance(nt, dict) and bool(nt)
