"""Which jobs and tasks an action works on, in the order the plugins give.

allocate and backfill take a job's pending, ungated tasks of one kind (best-effort or not) in
TaskOrder; preempt, reclaim and the gang actions take the admitted, valid, starving jobs and
their pending tasks. Jobs with a ``networkTopology`` are told apart because the evicting actions
treat them separately (Volcano skips them unless topology-aware preemption is on).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from batch.model.info import JobInfo, TaskInfo
from batch.model.status import TaskStatus
from batch.scheduler.actionlib.pq import PriorityQueue
from batch.scheduler.framework.jobmemo import answer
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
    dispatch, hooks = ssn.dispatch, ssn.hooks
    # the verdict reads the job and JobStarving and JobValid: kept by job version when those
    # are pure per job (``framework/jobmemo.py``), asked again for jobs that changed
    table = dispatch.job_table("starving_jobs", hooks.job_starving, hooks.job_valid)
    queues = ssn.queues
    starving = functools.partial(_starving, ssn)
    out = []
    for job in ssn.active_jobs():
        if job.queue not in queues:
            continue
        if starving(job) if table is None else answer(table, starving, job):
            out.append(job)
    return out


def _starving(ssn: Session, job: JobInfo) -> bool:
    """Admitted, with pending ungated tasks, starving and valid."""
    if job.is_pending():
        return False
    if job.counts[TaskStatus.PENDING] - job.gated_pending <= 0:
        return False
    if not ssn.dispatch.job_starving(job):
        return False
    return ssn.dispatch.job_valid(job) is None


def preemptor_tasks(ssn: Session, job: JobInfo) -> list[TaskInfo]:
    key = ssn.dispatch.task_order_key()
    tasks = [t for t in job.tasks.values() if t.status is TaskStatus.PENDING and not t.gated]
    tasks.sort(key=key)
    return tasks


def has_topology(job: JobInfo) -> bool:
    nt = job.network_topology
    return bool(nt) and isinstance(nt, dict) and bool(nt)


def jobs_by_queue(
    jobs: Iterable[JobInfo], key: Callable[[JobInfo], Any]
) -> dict[str, PriorityQueue[JobInfo]]:
    """Per queue, in the order of its first job, a priority queue of its ``jobs`` by ``key``
    (JobOrder): filled by one ``extend`` each, so it pops as pushing them one by one would."""
    grouped: dict[str, list[JobInfo]] = {}
    for job in jobs:
        grouped.setdefault(job.queue, []).append(job)
    out: dict[str, PriorityQueue[JobInfo]] = {}
    for name, queued in grouped.items():
        pq = out[name] = PriorityQueue(key)
        pq.extend(queued)
    return out
