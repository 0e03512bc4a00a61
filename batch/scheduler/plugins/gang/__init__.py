"""gang: Volcano's gang plugin — all-or-nothing jobs (docs/volcano-semantics.md#plugins,
#task-status, #podgroup-phase).

JobValid: enough valid tasks for minAvailable (and per-role minTaskMember). JobOrder: jobs that
are not ready yet go first. JobReady / JobPipelined / JobStarving: the readiness helpers of §4.2.
Preemptable/Reclaimable: victims only from jobs whose ready count exceeds minAvailable, at most
the surplus per job. On session close: an ``Unschedulable`` condition (reason
NotEnoughResources, message "<k>/<n> tasks in gang unschedulable: <why>", n being the number of
tasks but at least minMember, where Volcano prints 0 before the pods exist; transitionID =
session uid) for every job that is not ready, a ``Scheduled`` condition for ready ones, and a
Warning event ``Unschedulable`` for not-ready jobs in phase Pending/Inqueue/Unknown.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from batch.api.timestamps import format_epoch
from batch.model.info import JobInfo, TaskInfo
from batch.scheduler.framework.close import close_jobs
from batch.scheduler.framework.decisions import Event
from batch.scheduler.framework.hooks import Hooks, ValidateResult
from batch.scheduler.framework.registry import Plugin
from batch.scheduler.framework.session import Session
from batch.scheduler.framework.votes import PERMIT, REJECT


class GangPlugin(Plugin):
    name = "gang"
    ARGUMENTS = ()

    keeps_callbacks = True

    def register_kept(self, hooks: Hooks) -> None:
        def valid(job: JobInfo) -> ValidateResult | None:
            vt = job.valid_task_num()
            if vt < job.min_available:
                return ValidateResult(
                    False,
                    "NotEnoughPods",
                    f"Not enough valid tasks for gang-scheduling, valid: {vt}, "
                    f"min: {job.min_available}",
                )
            if not job.check_task_valid():
                return ValidateResult(
                    False,
                    "NotEnoughPodsOfTask",
                    "Not enough valid pods of each task for gang-scheduling",
                )
            return None

        hooks.add_job_valid_fn(valid, pure=True)
        hooks.add_job_order_key(lambda j: 1 if j.is_ready() else 0, pure=True)
        hooks.add_job_ready_fn(lambda j: j.is_ready() and j.check_task_ready())
        hooks.add_job_pipelined_fn(
            lambda j: PERMIT if (j.is_pipelined() and j.check_task_pipelined()) else REJECT
        )
        hooks.add_job_starving_fn(lambda j: j.is_starving(), pure=True)

        def victims(_: TaskInfo, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            jobs = self.ssn.jobs
            surplus: dict[str, int] = {}
            out: list[TaskInfo] = []
            for t in candidates:
                job = jobs.get(t.job_id or "")
                if job is None:
                    continue
                left = surplus.get(job.uid)
                if left is None:
                    left = job.ready_task_num() - job.min_available
                if left > 0:
                    out.append(t)
                    left -= 1
                surplus[job.uid] = left
            return out, PERMIT

        hooks.add_preemptable_fn(victims)
        hooks.add_reclaimable_fn(victims)

        def at_minimum(job: JobInfo) -> bool:
            return job.ready_task_num() <= job.min_available

        # gang's victim rule above never gives a task of a job at (or below) its minimum
        hooks.add_victim_job_floor_fn("preemptable", at_minimum)
        hooks.add_victim_job_floor_fn("reclaimable", at_minimum)
        hooks.add_unified_evictable_fn(lambda _, c: (list(c), PERMIT))

    def on_session_close(self, ssn: Session) -> None:
        now = format_epoch(ssn.now)
        # every ready job gets the same condition, and unready jobs that say the same thing
        # share one as well: one object each (close copies what it keeps)
        scheduled = {
            "type": "Scheduled",
            "status": "True",
            "transitionID": ssn.uid,
            "lastTransitionTime": now,
            "reason": "tasks in gang are ready to be scheduled",
            "message": "",
        }
        # a ready gang's Unschedulable condition from before turns False (issue 34.4)
        cleared = {**scheduled, "type": "Unschedulable", "status": "False"}
        unschedulable: dict[tuple[int, int, str], dict[str, Any]] = {}
        conditions, reasons = ssn.podgroup_conditions, ssn.reasons
        visit = close_jobs(ssn)  # the others are ready, and would be given `scheduled` again
        jobs = ssn.jobs.values() if visit is None else visit
        if ONE_PASS:
            _conditions(ssn, jobs, scheduled, cleared, now)
            return
        for job in jobs:
            if job.is_ready():
                cond = scheduled
            else:
                reason = reasons.get(job.uid)
                said = (
                    max(job.min_available - job.ready_task_num(), 0),
                    # before admission the gang's pods do not exist yet: it still has minMember
                    max(len(job.tasks), job.min_available),
                    reason.message if reason is not None else "pod group is not ready",
                )
                cond = unschedulable.get(said) or _unschedulable(ssn.uid, now, said, unschedulable)
                if job.phase in _WARN_PHASES:
                    ssn.event(job, "Warning", "Unschedulable", cond["message"])
            kept = conditions.get(job.uid)
            if kept is None:
                kept = conditions[job.uid] = [cond]
            else:
                kept.append(cond)
            if cond is scheduled and _unschedulable_true(job.conditions):
                kept.append(cleared)


#: the phases whose unready gangs get a Warning event
_WARN_PHASES = frozenset(("Pending", "Inqueue", "Unknown", ""))
#: close in one pass with the per-job calls folded in (``_conditions``; exact: tests switch it
#: off and compare)
ONE_PASS = True


def _conditions(
    ssn: Session,
    jobs: Iterable[JobInfo],
    scheduled: dict[str, Any],
    cleared: dict[str, Any],
    now: str,
) -> None:
    """``on_session_close``'s loop over ``jobs`` as one pass: each job's ready count read once
    (``JobInfo.is_ready`` is ready tasks plus pending best-effort ones against minAvailable),
    the Warning event appended as ``Session.event`` does, and a job's earlier conditions only
    looked at when it has some. The conditions and events are the plain loop's."""
    unschedulable: dict[tuple[int, int, str], dict[str, Any]] = {}
    conditions, reasons, events, session = ssn.podgroup_conditions, ssn.reasons, ssn.events, ssn.uid
    for job in jobs:
        ready, minimum = job.ready_task_num(), job.min_available
        if ready + job.pending_best_effort >= minimum:
            cond = scheduled
        else:
            reason = reasons.get(job.uid)
            size = len(job.tasks)
            said = (
                minimum - ready,  # > 0: the job is not ready
                size if size > minimum else minimum,
                reason.message if reason is not None else "pod group is not ready",
            )
            cond = unschedulable.get(said) or _unschedulable(session, now, said, unschedulable)
            if job.phase in _WARN_PHASES:
                message = cond["message"]
                events.append(
                    Event("PodGroup", job.namespace, job.name, "Warning", "Unschedulable", message)
                )
        kept = conditions.get(job.uid)
        if kept is None:
            kept = conditions[job.uid] = [cond]
        else:
            kept.append(cond)
        if cond is scheduled and job.conditions and _unschedulable_true(job.conditions):
            kept.append(cleared)


def _unschedulable_true(conditions: list[dict[str, Any]]) -> bool:
    return any(c.get("type") == "Unschedulable" and c.get("status") == "True" for c in conditions)


def _unschedulable(
    session: str, now: str, said: tuple[int, int, str], memo: dict[tuple[int, int, str], Any]
) -> dict[str, Any]:
    """The Unschedulable condition of a gang ``said[0]`` of ``said[1]`` tasks short (why:
    ``said[2]``), kept in ``memo``."""
    unready, size, why = said
    cond = memo[said] = {
        "type": "Unschedulable",
        "status": "True",
        "transitionID": session,
        "lastTransitionTime": now,
        "reason": "NotEnoughResources",
        "message": f"{unready}/{size} tasks in gang unschedulable: {why}",
    }
    return cond
