"""Session close: pending reasons, PodGroup and Queue status, then undo of in-session state.

PodGroup phase (docs/volcano-semantics.md#podgroup-phase): Unknown when the job has Running tasks
and this session set an Unschedulable condition; otherwise with scheduled =
#Running/Bound/Failed/Succeeded + #Releasing still on a node: scheduled >= minMember -> Completed
when every scheduled task finished, else Running; below minMember -> Pending unless the phase is
Inqueue (stays Inqueue). Queue ``allocated`` = Σ Resreq of Allocated/Binding/Bound/Running tasks,
also added to ancestors.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Iterable
from typing import Any

from batch.model.changes import Cursor
from batch.model.info import JobInfo
from batch.model.resources import IntVec
from batch.model.status import TaskStatus
from batch.scheduler.framework.aggregate import JobSums
from batch.scheduler.framework.decisions import Decisions, PendingReason
from batch.scheduler.framework.queuestatus import QueueBook, queue_status
from batch.scheduler.framework.session import Session

UNSCHEDULABLE = "Unschedulable"
SCHEDULED = "Scheduled"
#: give jobs with equal status inputs one status object (exact; tests switch it off to compare)
SHARE_STATUSES = True
#: sum queues' ``allocated`` after the rollback plus the session's delta, so jobs the session
#: changed and undid are not summed again (exact; tests switch it off to compare)
SUM_AFTER_ROLLBACK = True
#: work out only the statuses of queues whose figures moved (``QueueBook``; exact; tests
#: switch it off to compare)
QUEUES_THAT_MOVED = True
#: work out PodGroup statuses in one pass with the per-job calls folded in (``_restatus``;
#: exact; tests switch it off to compare)
ONE_PASS = True
#: ``ClusterCache.derived`` key: queue name -> (what its last status said, that status)
_QUEUE_STATUS = "close-queue-status"
_ORDINAL = operator.attrgetter("ordinal")
_PHASE_COUNT_KEY = {
    "Pending": "pending",
    "Inqueue": "inqueue",
    "Running": "running",
    "Unknown": "unknown",
    "Completed": "completed",
}
_NO_COUNTS = dict.fromkeys(_PHASE_COUNT_KEY.values(), 0)


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
        c.get("type") == UNSCHEDULABLE
        and c.get("status") == "True"
        and c.get("transitionID") == ssn.uid
        for c in new_conds
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
    settled jobs only need their reason dropped, if an action gave them one).

    Jobs that have a reason only lose it (when ready with nothing pending); jobs without one
    get one, in ``active_jobs`` order."""
    reasons, get = ssn.reasons, ssn.jobs.get
    pending = TaskStatus.PENDING
    # one pass over the reasons, each job looked up once (most have tasks pending)
    settled = [
        u
        for u in reasons
        if (job := get(u)) is not None and not job.counts[pending] and job.is_ready()
    ]
    for uid in settled:
        del reasons[uid]
    for job in ssn.active_jobs():
        if job.uid not in reasons and not job.is_ready():
            reasons[job.uid] = _missing_reason(job)


def _missing_reason(job: JobInfo) -> PendingReason:
    """Why a job short of its gang that no action explained waits (elastic tasks beyond
    minAvailable wait without a gang reason: the caller asks only for jobs not ready)."""
    pending = job.counts[TaskStatus.PENDING]
    if pending and job.gated_pending == pending:
        return PendingReason(job.uid, "SchedulingGated", f"{pending} pod(s) have scheduling gates")
    if job.is_pipelined():
        return PendingReason(job.uid, "Pipelined", "waiting for resources that are being released")
    if job.is_pending():
        return PendingReason(job.uid, "NotEnqueued", "PodGroup is Pending: not admitted by enqueue")
    short = job.min_available - job.ready_task_num() - job.pending_best_effort
    return PendingReason(
        job.uid,
        "NotConsidered",
        f"{short} more task(s) needed for the gang; none were tried this session",
        short_by=max(short, 0),
    )


def _said_all(
    conds: list[dict[str, Any]],
    said_of: dict[int, tuple[Any, ...]],
    lists: dict[int, list[tuple[Any, ...]]],
) -> list[tuple[Any, ...]]:
    """What ``conds`` say; a lone condition's answer is one list for every job given it."""
    if len(conds) != 1:
        return [_said(c, said_of) for c in conds]
    got = lists.get(id(conds[0]))
    if got is None:
        got = lists[id(conds[0])] = [_said(conds[0], said_of)]
    return got


def _fresh_status(
    ssn: Session,
    job: JobInfo,
    new_conds: list[dict[str, Any]],
    shared: dict[tuple[Any, ...], dict[str, Any]],
) -> dict[str, Any]:
    """``_status``, computed once for jobs that have no conditions of their own yet, no
    releasing tasks, and the same counters, phase, minAvailable and new condition objects
    (their statuses are equal: one object serves them all)."""
    if not SHARE_STATUSES or job.conditions or job.counts[TaskStatus.RELEASING]:
        return _status(ssn, job, new_conds)
    key = (tuple(job.counts), job.phase, job.min_available, *map(id, new_conds))
    status = shared.get(key)
    if status is None:
        status = shared[key] = _status(ssn, job, new_conds)
    return status


class StatusBook:
    """PodGroup statuses kept across sessions (``ClusterCache.derived``): per job the status
    last computed with the version and condition answers it was computed from, the statuses
    of the last session in its job order, and per queue the number of PodGroups per phase."""

    __slots__ = ("config", "cursor", "kept", "moved", "out", "phase_of", "q_counts", "revisit")

    KEY = "close-status"

    def __init__(self, cursor: Cursor) -> None:
        self.cursor = cursor
        #: the configuration the kept statuses were worked out under (another one: start over)
        self.config: object = None
        self.kept: dict[str, tuple[int, list[tuple[Any, ...]], dict[str, Any]]] = {}
        self.out: dict[tuple[str, str], dict[str, Any]] = {}
        #: job uid -> (queue, phase count key, status key, JobInfo.ordinal)
        self.phase_of: dict[str, tuple[str, str, tuple[str, str], int]] = {}
        self.q_counts: dict[str, dict[str, int]] = {}
        #: the queues whose ``q_counts`` moved since ``QueueBook`` last looked
        self.moved: set[str] = set()
        #: the jobs the last session changed: its rollback undid them without a change-log
        #: mark (``ChangeLog.hold``), and their statuses were worked out in its state
        self.revisit: list[str] = []

    @classmethod
    def of(cls, ssn: Session) -> StatusBook:
        book = ssn.cache.derived.get(cls.KEY)
        if not isinstance(book, cls):
            book = ssn.cache.derived[cls.KEY] = cls(Cursor(ssn.cache.changes))
        return book

    def clear(self) -> None:
        self.out, self.phase_of, self.q_counts = {}, {}, {}

    def count(self, job: JobInfo, key: tuple[str, str], status: dict[str, Any]) -> None:
        """Record ``status`` as the job's (its queue's phase counts follow)."""
        self.out[key] = status
        phase = _PHASE_COUNT_KEY.get(status["phase"], "unknown")
        old = self.phase_of.get(job.uid)
        if old is not None:
            if old[0] == job.queue and old[1] == phase:
                return
            self.q_counts[old[0]][old[1]] -= 1
            self.moved.add(old[0])
        self.phase_of[job.uid] = (job.queue, phase, key, job.ordinal)
        counts = self.q_counts.get(job.queue)
        if counts is None:
            counts = self.q_counts[job.queue] = dict.fromkeys(_PHASE_COUNT_KEY.values(), 0)
        counts[phase] += 1
        self.moved.add(job.queue)

    def follow(self, uid: str, job: JobInfo | None) -> None:
        """``uid`` changed: forget its status if it left, or was re-created (the new job
        comes last in the order, as in ``jobs``)."""
        old = self.phase_of.get(uid)
        if old is not None and (job is None or job.ordinal != old[3]):
            self.forget(uid)

    def forget(self, uid: str) -> None:
        old = self.phase_of.pop(uid, None)
        if old is not None:
            self.q_counts[old[0]][old[1]] -= 1
            self.moved.add(old[0])
            del self.out[old[2]]


def close_jobs(ssn: Session) -> list[JobInfo] | None:
    """The jobs whose PodGroup condition and status this close works out, in ``jobs`` order;
    None for every job. The others are settled and unchanged since the last close (neither
    their version nor anything a session says about them moved): gang would give them the
    same Scheduled condition, and their status is the one kept (``StatusBook``). Asked once
    per session (the first call moves the book's cursor)."""
    if "close-jobs" in ssn.scratch:
        got: list[JobInfo] | None = ssn.scratch["close-jobs"]
        return got
    book = StatusBook.of(ssn)
    # the jobs this session changed are active jobs: without them (held) in the log, and
    # looked at again next time, when they are back in their state from before
    changed = book.cursor.changed(held=False)
    if changed is not None and book.revisit:
        changed = list(dict.fromkeys([*changed, *book.revisit]))
    book.revisit = []
    visit: list[JobInfo] | None = None
    same_config, book.config = book.config is ssn.config, ssn.config
    if ssn.skip_settled and same_config and not ssn.jobs_rebuilt and changed is not None:
        jobs = ssn.jobs
        for uid in changed:
            book.follow(uid, jobs.get(uid))
        active = ssn.active_jobs()
        seen = {j.uid for j in active}
        visit = [*active, *(jobs[u] for u in changed if u in jobs and u not in seen)]
        visit.sort(key=_ORDINAL)
    else:
        book.clear()
    ssn.scratch["close-jobs"] = visit
    return visit


def _podgroup_statuses(ssn: Session, d: Decisions) -> dict[str, dict[str, int]]:
    """Fill ``d.podgroup_status``; return the number of PodGroups per queue and phase.

    A job's status depends on its state (JobInfo.version) and on what this session's
    conditions say (type, status, reason, message): when neither changed, the status of an
    earlier session is reused, with that session's transitionID and time (a condition's
    lastTransitionTime then means what Kubernetes says it means). Only ``close_jobs`` are
    looked at; every other job keeps its status."""
    book = StatusBook.of(ssn)
    visit = close_jobs(ssn)
    memo = book.kept
    if len(memo) > 2 * len(ssn.jobs) + 64:  # forget departed jobs
        for uid in [u for u in memo if u not in ssn.jobs]:
            del memo[uid]
    said_of: dict[int, tuple[Any, ...]] = {}  # id(condition) -> what it says
    said_lists: dict[int, list[tuple[Any, ...]]] = {}
    shared: dict[tuple[Any, ...], dict[str, Any]] = {}
    conds_of = ssn.podgroup_conditions
    if visit is not None:  # a plugin other than gang may have given other jobs conditions
        jobs = ssn.jobs
        others = conds_of.keys() - {j.uid for j in visit}  # mostly none: one C pass
        extra = [jobs[u] for u in conds_of if u in others and u in jobs] if others else []
        if extra:
            visit = sorted([*visit, *extra], key=_ORDINAL)
    new: list[tuple[str, str]] | None = None if visit is None else []
    kept_out = book.out
    if ONE_PASS:
        _restatus(ssn, ssn.jobs.values() if visit is None else visit, book, new)
        d.podgroup_status = dict(book.out)
        d.podgroup_status_new = new
        return book.q_counts
    for job in ssn.jobs.values() if visit is None else visit:
        new_conds = conds_of.get(job.uid) or []
        said = _said_all(new_conds, said_of, said_lists)
        kept = memo.get(job.uid)
        if kept is not None and kept[0] == job.version and kept[1] == said:
            status = kept[2]
        else:
            status = _fresh_status(ssn, job, new_conds, shared)
            memo[job.uid] = (job.version, said, status)
        key = (job.namespace, job.name)
        if new is not None and kept_out.get(key) is not status:
            new.append(key)
        book.count(job, key, status)
    d.podgroup_status = dict(book.out)
    d.podgroup_status_new = new
    return book.q_counts


def _restatus(
    ssn: Session, jobs: Iterable[JobInfo], book: StatusBook, new: list[tuple[str, str]] | None
) -> None:
    """``_podgroup_statuses``' loop over ``jobs`` as one pass: what a job's conditions say
    looked up by its lone condition, and ``StatusBook.count`` folded in (its phase counts
    moved only when the job's queue or phase did). The statuses are the plain loop's."""
    said_of: dict[int, tuple[Any, ...]] = {}  # id(condition) -> what it says
    said_lists: dict[int, list[tuple[Any, ...]]] = {}
    shared: dict[tuple[Any, ...], dict[str, Any]] = {}
    conds_of, memo, out, phase_of = ssn.podgroup_conditions, book.kept, book.out, book.phase_of
    phase_key = _PHASE_COUNT_KEY.get
    for job in jobs:
        uid = job.uid
        new_conds = conds_of.get(uid) or []
        said = said_lists.get(id(new_conds[0])) if len(new_conds) == 1 else None
        if said is None:
            said = _said_all(new_conds, said_of, said_lists)
        kept = memo.get(uid)
        if kept is not None and kept[0] == job.version and kept[1] == said:
            status = kept[2]
        else:
            status = _fresh_status(ssn, job, new_conds, shared)
            memo[uid] = (job.version, said, status)
        key = (job.namespace, job.name)
        if new is not None and out.get(key) is not status:
            new.append(key)
        old = phase_of.get(uid)
        if old is None or old[0] != job.queue or old[1] != phase_key(status["phase"], "unknown"):
            book.count(job, key, status)  # its queue's phase counts move
        else:
            out[key] = status


def _queue_statuses(
    ssn: Session, q_alloc: dict[str, IntVec], q_counts: dict[str, dict[str, int]]
) -> dict[str, dict[str, Any]]:
    """Every queue's status: ``allocated`` (its jobs' and its descendants') and the number of
    its PodGroups per phase. A queue whose figures are those of the last close keeps that
    close's status object (``_QUEUE_STATUS``; statuses are never changed once made)."""
    queues = ssn.queues
    total: dict[str, IntVec] = {}
    for qname, vec in q_alloc.items():
        seen: set[str] = set()
        name = qname
        while name and name not in seen:
            seen.add(name)
            acc = total.get(name)
            total[name] = vec if acc is None else acc + vec  # never summed in place
            q = queues.get(name)
            name = q.parent if q is not None else ""
    res = ssn.resources
    kept: dict[str, tuple[Any, dict[str, Any]]] = ssn.cache.derived.setdefault(_QUEUE_STATUS, {})
    if len(kept) > 2 * len(queues) + 64:  # forget departed queues
        kept.clear()
    out: dict[str, dict[str, Any]] = {}
    for qname in queues:
        qvec, counts = total.get(qname), q_counts.get(qname, _NO_COUNTS)
        out[qname] = queue_status(kept, qname, res, qvec, counts)
    return out


def session_alloc_delta(undone: dict[tuple[str, int], list[Any]]) -> dict[str, IntVec]:
    """Per queue, what the session had added to its jobs' ``allocated``, from what its
    rollback took back (``Session.rollback``'s ``undone``): the queue sums of the state after
    the session are those of the state it undoes to plus this. Tasks of one request count
    once per queue (one vector step)."""
    out: dict[str, IntVec] = {}
    for (queue, _), (req, n) in undone.items():
        if n:
            acc = out.get(queue)
            out[queue] = req * n if acc is None else acc + req * n
    return out


def _allocated_sums(ssn: Session) -> JobSums:
    """Per queue, Σ of its jobs' ``allocated`` in the jobs' state now (kept: ``JobSums``)."""
    allocated = JobSums.of(ssn.cache, "close-allocated", (ssn.resources.capacity,))
    allocated.refresh(ssn.jobs, _allocated, follow=ssn.skip_settled)
    return allocated


def _queue_allocated(allocated: JobSums, delta: dict[str, IntVec]) -> dict[str, IntVec]:
    """Per queue, Σ of its jobs' ``allocated`` after the session, worked out after the
    rollback: the kept sums (``JobSums``: a job the session changed and undid is back at the
    version it was summed at) plus the session's ``delta``."""
    if not delta:
        return allocated.sums
    out = dict(allocated.sums)
    for queue, vec in delta.items():
        acc = out.get(queue)
        out[queue] = vec if acc is None else acc + vec
    return out


def _queue_status(
    ssn: Session, sums: JobSums, delta: dict[str, IntVec], q_counts: dict[str, dict[str, int]]
) -> dict[str, dict[str, Any]]:
    """Every queue's status, from its jobs' ``sums`` plus the session's ``delta`` and the
    PodGroups per phase (``q_counts``)."""
    moved = StatusBook.of(ssn).moved
    if not QUEUES_THAT_MOVED:
        moved.clear()
        return _queue_statuses(ssn, _queue_allocated(sums, delta), q_counts)
    book = ssn.cache.derived.get(QueueBook.KEY)
    if not isinstance(book, QueueBook):
        book = ssn.cache.derived[QueueBook.KEY] = QueueBook()
    return book.statuses(ssn.queues, ssn.resources, sums, delta, q_counts, moved, _NO_COUNTS)


def close_session(ssn: Session) -> Decisions:
    """Run plugins' on_session_close, build the Decisions, undo the session's changes."""
    t0 = time.perf_counter()
    undone: dict[tuple[str, int], list[Any]] = {}
    try:
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
            q_counts = _podgroup_statuses(ssn, d)
            after = SUM_AFTER_ROLLBACK
            if not after:  # the slow path: sum the session's own state (its jobs moved)
                sums, delta = _allocated_sums(ssn), {}
            d.timings = ssn.timings
            d.plugin_timings = ssn.plugin_timings
            d.queue_metrics = ssn.queue_metrics
        finally:
            book = StatusBook.of(ssn)
            book.revisit = [*book.revisit, *ssn.touched_uids()]
            ssn.rollback(undone)
        if after:
            sums, delta = _allocated_sums(ssn), session_alloc_delta(undone)
        d.queue_status = _queue_status(ssn, sums, delta, q_counts)
    finally:
        ssn.release()
        ssn.closed = True
    ssn.timings["close"] = time.perf_counter() - t0
    return d
