"""Session close: pending reasons, PodGroup and Queue status, then undo of in-session state.

PodGroup phase (docs/volcano-semantics.md#podgroup-phase): Unknown when the job has Running tasks
and this session set an Unschedulable condition; otherwise with scheduled =
#Running/Bound/Failed/Succeeded + #Releasing still on a node: scheduled >= minMember -> Completed
when every scheduled task finished, else Running; below minMember -> Pending unless the phase is
Inqueue (stays Inqueue). Queue ``allocated`` = Σ Resreq of Allocated/Binding/Bound/Running tasks,
also added to ancestors.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from batch.model.info import JobInfo
from batch.model.resources import IntVec
from batch.model.status import TaskStatus
from batch.scheduler.framework.aggregate import JobSums
from batch.scheduler.framework.decisions import Decisions, PendingReason
from batch.scheduler.framework.session import Session

UNSCHEDULABLE = "Unschedulable"
SCHEDULED = "Scheduled"
_PHASE_COUNT_KEY = {
    "Pending": "pending",
    "Inqueue": "inqueue",
    "Running": "running",
    "Unknown": "unknown",
    "Completed": "completed",
}


def job_phase(job: JobInfo, *, unschedulable_now: bool) -> str:
    c = job.counts
    if c[TaskStatus.RUNNING] and unschedulable_now:
        return "Unknown"
    releasing_on_node = (
        sum(1 for t in job.tasks.values() if t.status is TaskStatus.RELEASING and t.node_name)
        if c[TaskStatus.RELEASING]
        else 0
    )
    finished = c[TaskStatus.SUCCEEDED] + c[TaskStatus.FAILED]
    scheduled = c[TaskStatus.RUNNING] + c[TaskStatus.BOUND] + finished + releasing_on_node
    if scheduled >= job.min_available and scheduled > 0:
        return "Completed" if finished == scheduled else "Running"
    if job.min_available <= 0 and scheduled == 0 and job.phase not in ("Pending", "", "Inqueue"):
        return job.phase
    return "Inqueue" if job.phase == "Inqueue" else "Pending"


def _merge_conditions(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = [dict(c) for c in old]  # decisions never alias the cache's objects
    for cond in new:
        for i, c in enumerate(out):
            if c.get("type") == cond.get("type"):
                out[i] = cond
                break
        else:
            out.append(cond)
    return out


def _allocated(job: JobInfo) -> IntVec:
    return job.allocated


def _status(ssn: Session, job: JobInfo, new_conds: list[dict[str, Any]]) -> dict[str, Any]:
    """The PodGroup status ``job`` should have after this session (module docstring)."""
    unsched = any(
        c.get("type") == UNSCHEDULABLE and c.get("transitionID") == ssn.uid for c in new_conds
    )
    c = job.counts
    return {
        "phase": job_phase(job, unschedulable_now=unsched),
        "running": c[TaskStatus.RUNNING],
        "succeeded": c[TaskStatus.SUCCEEDED],
        "failed": c[TaskStatus.FAILED],
        "conditions": _merge_conditions(job.conditions, new_conds),
    }


def _said(cond: dict[str, Any], memo: dict[int, tuple[Any, ...]]) -> tuple[Any, ...]:
    """What a condition says (type, status, reason, message), once per condition object (a
    plugin may give many jobs the same one; every condition lives until close ends)."""
    said = memo.get(id(cond))
    if said is None:
        said = memo[id(cond)] = (
            cond.get("type"),
            cond.get("status"),
            cond.get("reason"),
            cond.get("message"),
        )
    return said


def fill_reasons(ssn: Session) -> None:
    """Make sure every job with unplaced work has a pending reason (and no other job has one:
    settled jobs only need their reason dropped, if an action gave them one)."""
    with_reason = [ssn.jobs[uid] for uid in ssn.reasons if uid in ssn.jobs]
    for job in (*ssn.active_jobs(), *with_reason):
        if job.is_ready() and not job.counts[TaskStatus.PENDING]:
            ssn.reasons.pop(job.uid, None)
            continue
        if job.uid in ssn.reasons:
            continue
        if job.is_ready():
            continue  # elastic tasks beyond minAvailable wait without a gang reason
        pending = job.counts[TaskStatus.PENDING]
        if pending and job.gated_pending == pending:
            ssn.reasons[job.uid] = PendingReason(
                job.uid, "SchedulingGated", f"{pending} pod(s) have scheduling gates"
            )
        elif job.is_pipelined():
            ssn.reasons[job.uid] = PendingReason(
                job.uid, "Pipelined", "waiting for resources that are being released"
            )
        elif job.is_pending():
            ssn.reasons[job.uid] = PendingReason(
                job.uid, "NotEnqueued", "PodGroup is Pending: not admitted by enqueue"
            )
        else:
            short = job.min_available - job.ready_task_num() - job.pending_best_effort
            ssn.reasons[job.uid] = PendingReason(
                job.uid,
                "NotConsidered",
                f"{short} more task(s) needed for the gang; none were tried this session",
                short_by=max(short, 0),
            )


def close_session(ssn: Session) -> Decisions:
    """Run plugins' on_session_close, build the Decisions, undo the session's changes."""
    t0 = time.perf_counter()
    try:
        fill_reasons(ssn)
        for plugin in ssn.plugins:
            t_plugin = time.perf_counter()
            plugin.on_session_close(ssn)
            ssn.plugin_timings[(plugin.name, "OnSessionClose")] = time.perf_counter() - t_plugin
        d = Decisions(
            session_uid=ssn.uid,
            binds=ssn.binds,
            pipelines=ssn.pipelines,
            evictions=ssn.evictions,
            events=ssn.events,
            pending_reasons=ssn.reasons,
        )
        res = ssn.resources
        allocated = JobSums.of(ssn.cache, "close-allocated", (res.capacity,))
        allocated.refresh(ssn.jobs, _allocated)
        q_alloc = allocated.sums
        q_counts: dict[str, dict[str, int]] = {}
        # A job's status depends on its state (JobInfo.version) and on what this session's
        # conditions say (type, status, reason, message): when neither changed, the status of
        # an earlier session is reused, with that session's transitionID and time (a condition's
        # lastTransitionTime then means what Kubernetes says it means).
        memo: dict[str, tuple[int, list[tuple[Any, ...]], dict[str, Any]]] = (
            ssn.cache.derived.setdefault("close-status", {})
        )
        if len(memo) > 2 * len(ssn.jobs) + 64:  # forget departed jobs
            for uid in [u for u in memo if u not in ssn.jobs]:
                del memo[uid]
        said_of: dict[int, tuple[Any, ...]] = {}  # id(condition) -> what it says
        for job in ssn.jobs.values():
            new_conds = ssn.podgroup_conditions.get(job.uid) or []
            said = [_said(c, said_of) for c in new_conds]
            kept = memo.get(job.uid)
            if kept is not None and kept[0] == job.version and kept[1] == said:
                status = kept[2]
            else:
                status = _status(ssn, job, new_conds)
                memo[job.uid] = (job.version, said, status)
            d.podgroup_status[(job.namespace, job.name)] = status
            counts = q_counts.get(job.queue)
            if counts is None:
                counts = q_counts[job.queue] = dict.fromkeys(_PHASE_COUNT_KEY.values(), 0)
            counts[_PHASE_COUNT_KEY.get(status["phase"], "unknown")] += 1
        # propagate to ancestors
        total: dict[str, np.ndarray[Any, np.dtype[np.int64]]] = {}
        for qname, vec in q_alloc.items():
            seen: set[str] = set()
            name = qname
            while name and name not in seen:
                seen.add(name)
                if name in total:
                    total[name] = total[name] + vec
                else:
                    total[name] = vec.copy()
                q = ssn.queues.get(name)
                name = q.parent if q is not None else ""
        for qname in ssn.queues:
            qvec = total.get(qname)
            d.queue_status[qname] = {
                "allocated": res.to_list(qvec if qvec is not None else res.zeros()),
                **q_counts.get(qname, dict.fromkeys(_PHASE_COUNT_KEY.values(), 0)),
            }
        d.timings = ssn.timings
        d.plugin_timings = ssn.plugin_timings
        d.queue_metrics = ssn.queue_metrics
    finally:
        ssn.rollback()
        ssn.release()
        ssn.closed = True
    ssn.timings["close"] = time.perf_counter() - t0
    return d
