"""allocate: gang placement of pending tasks — Volcano's allocate action
(docs/volcano-semantics.md#allocate).

Jobs that are valid, admitted (Inqueue; promoted here when ``enqueue`` is not configured) and in
an existing queue are ordered per queue by JobOrder; queues by QueueOrder. A popped queue that is
Overused is dropped for the session. A popped job's pending tasks (TaskOrder; best-effort and
scheduling-gated tasks excluded) are placed inside one Statement: Allocatable(queue, task) must
hold, the node is chosen by the placement engine (Idle fit -> allocate, FutureIdle-only fit ->
pipeline), and once the job is ready with tasks left it is pushed back to compete again. Then the
statement is committed when JobReady, kept when JobPipelined, else discarded (all-or-nothing).

Arguments (``configurations: - name: allocate``): ``predicateErrorCacheEnable`` (accepted, the
engine always reuses masks), and the node-sampling knobs ``minNodesToFind`` (100),
``minPercentageOfNodesToFind`` (5), ``percentageOfNodesToFind`` (0 = adaptive) — sampling is on
only when one of them is given; by default every feasible node is scored.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Collection
from typing import ClassVar

import numpy as np

from batch.api.resources import format_resource_list
from batch.model.info import JobInfo, QueueInfo, TaskInfo
from batch.model.status import TaskStatus
from batch.scheduler.actionlib.keptruns import Entry, KeptRuns
from batch.scheduler.actionlib.pq import PriorityQueue
from batch.scheduler.actionlib.selection import pending_tasks
from batch.scheduler.framework.arguments import Arg, Arguments, ConfigError
from batch.scheduler.framework.decisions import PendingReason
from batch.scheduler.framework.hooks import DeferredQueues
from batch.scheduler.framework.jobmemo import answer
from batch.scheduler.framework.registry import Action
from batch.scheduler.framework.session import Session
from batch.scheduler.framework.statement import Statement


def gang_shortfall(ssn: Session, job: JobInfo, short_by: int) -> dict[str, str]:
    """Per-resource amount the next ``short_by`` pending tasks need beyond all free capacity."""
    pending = [t for t in job.tasks.values() if t.status is TaskStatus.PENDING and not t.gated]
    if not pending or short_by <= 0:
        return {}
    nd = ssn.nodes
    taken = pending[:short_by]
    key = (tuple(sorted({t.template.tid for t in taken})), len(taken), len(nd.log))
    memo: dict[tuple[object, ...], dict[str, str]] = ssn.scratch.setdefault("shortfall", {})
    hit = memo.get(key)
    if hit is not None:
        return dict(hit)
    need = np.zeros_like(job.allocated)
    for t in taken:
        need += t.req
    free = nd.free_total()
    gap = np.maximum(need - free[: len(need)], 0)
    out = format_resource_list(ssn.resources.to_dict(gap))
    memo[key] = out
    return dict(out)


def _gang_failure(ssn: Session, job: JobInfo, placed: int) -> PendingReason:
    """The reason of a job whose statement is discarded (computed before the discard)."""
    short = job.min_available - job.ready_task_num() - job.waiting_task_num()
    short -= job.pending_best_effort
    prev = ssn.reasons.get(job.uid)
    base = prev.message if prev is not None else "no further task could be placed"
    kind = "GangShort" if placed else (prev.kind if prev is not None else "GangShort")
    shortfall = gang_shortfall(ssn, job, short)
    msg = (
        f"gang short by {max(short, 0)} of minAvailable {job.min_available}: {base}"
        if kind == "GangShort"
        else base
    )
    return PendingReason(
        job.uid,
        kind,
        msg,
        short_by=max(short, 0),
        shortfall=shortfall,
        details=dict(prev.details) if prev is not None else {},
    )


class _Pass:
    """One allocate pass: the jobs to try per queue (JobOrder), their pending tasks, and the
    outcomes of failed attempts by shape (``Allocate._shape``) with the change-log position
    they were computed at."""

    __slots__ = (
        "deferred",
        "fail_memo",
        "fail_pos",
        "memo_ok",
        "per_queue",
        "shapes",
        "ssn",
        "worksheet",
    )

    def __init__(self, ssn: Session, memo_ok: bool) -> None:
        self.ssn = ssn
        self.memo_ok = memo_ok
        #: job uid -> (the job, its version, its shape before an attempt): kept with the
        #: configuration's answers (``_shape``); None when they are not kept
        self.shapes = _kept_shapes(ssn) if memo_ok and KEEP_SHAPES else None
        #: the fair-share plugin's queue answers with its handler deferred, while one-task
        #: jobs are placed (``hooks.DeferredQueues``; flushed before any other step)
        self.deferred: DeferredQueues | None = None
        self.per_queue: dict[str, PriorityQueue[JobInfo]] = {}
        #: job uid -> its tasks still to try, the next one last (``list.pop``); None: not
        #: listed yet, for a job kept at its version (``tasks``: most of a backlog's jobs are
        #: never tried, their failures replayed)
        self.worksheet: dict[str, list[TaskInfo] | None] = {}
        self.fail_memo: dict[tuple[object, ...], tuple[int, PendingReason]] = {}
        #: the newest change-log position a failure was stored at (-1: none)
        self.fail_pos = -1

    def collect(self) -> None:
        """The admitted, valid jobs with pending tasks (promoting Pending jobs to Inqueue when
        ``enqueue`` is not configured), per queue in JobOrder."""
        ssn = self.ssn
        enqueue_on = "enqueue" in ssn.config.actions
        by_queue: dict[str, list[JobInfo]] = {}
        worksheet = self.worksheet
        # which jobs to try reads the job and JobValid: kept by job version when JobValid is
        # pure per job (``framework/jobmemo.py``); without ``enqueue`` this pass changes jobs
        table = ssn.dispatch.job_table("allocate", ssn.hooks.job_valid) if enqueue_on else None
        verdict_of = functools.partial(self._verdict, enqueue_on=enqueue_on)
        # each queue's order kept from the last session (``actionlib/keptruns.py``): a job
        # kept at its version is valid, has pending tasks (a single task is its worksheet) and
        # needs no key; ``by_queue`` gets the others
        kept = KeptRuns.of(ssn, table) if table is not None else None
        index = kept.index if kept is not None else {}
        stale: list[tuple[str, Entry]] = []
        hits = 0
        for job in ssn.active_jobs():
            got = index.get(job.uid)
            if got is not None and got[1][2] is job and got[1][1] == job.version:
                hits += 1
                worksheet[job.uid] = None
                if job.queue not in by_queue:
                    by_queue[job.queue] = []
                continue
            verdict = verdict_of(job) if table is None else answer(table, verdict_of, job)
            if verdict is not True:
                if isinstance(verdict, str):
                    ssn.set_reason(PendingReason(job.uid, "InvalidJob", verdict))
                continue
            tasks = _listed(ssn, job)
            if not tasks:
                continue
            worksheet[job.uid] = tasks
            lst = by_queue.get(job.queue)
            if lst is None:
                lst = by_queue[job.queue] = []
            if got is not None:
                stale.append(got)
            lst.append(job)
        jkey = ssn.dispatch.job_order_key()
        if kept is not None:
            kept.update(by_queue, stale, hits, worksheet, jkey)
        for name, lst in by_queue.items():
            if kept is not None:
                self.per_queue[name] = kept.queue(name, jkey)
                continue
            pq = self.per_queue[name] = PriorityQueue(jkey)
            pq.extend(lst)

    def tasks(self, job: JobInfo) -> list[TaskInfo]:
        """``job``'s worksheet, listed now if it was left for later (a job kept at its
        version)."""
        tasks = self.worksheet[job.uid]
        if tasks is None:
            tasks = self.worksheet[job.uid] = _listed(self.ssn, job)
        return tasks

    def _verdict(self, job: JobInfo, enqueue_on: bool) -> bool | str | None:
        """True: try ``job``; a message: it is not valid; None: leave it (not admitted, or
        nothing to place)."""
        if job.is_pending():
            if enqueue_on:
                return None
            self.ssn.set_phase(job, "Inqueue")
        if not job.counts[TaskStatus.PENDING] and job.is_ready():
            return None  # nothing to place, and close drops any reason a ready job gets
        vr = self.ssn.dispatch.job_valid(job)
        if vr is not None:
            return vr.message or vr.reason
        return True

    def replay(self, shape: tuple[object, ...], job: JobInfo) -> bool:
        """Give ``job`` the reason of an identical failed attempt at this change-log position
        (True), if there was one."""
        ssn = self.ssn
        hit = self.fail_memo.get(shape)
        if hit is None or hit[0] != len(ssn.nodes.log):
            return False
        r = hit[1]
        ssn.set_reason(
            PendingReason(
                job.uid, r.kind, r.message, r.short_by, dict(r.shortfall), dict(r.details)
            )
        )
        del self.worksheet[job.uid]  # popped, never pushed again: its tasks are done with
        return True


def _listed(ssn: Session, job: JobInfo) -> list[TaskInfo]:
    """A worksheet: ``job``'s pending tasks in TaskOrder, the next one last (a fresh list)."""
    tasks = pending_tasks(ssn, job, best_effort=False)
    tasks.reverse()
    return tasks


#: what a failed attempt depends on (``Allocate._shape``)
Shape = tuple[object, ...]

#: keep each job's shape before an attempt across sessions, by its version (exact; tests switch
#: it off to compare)
KEEP_SHAPES = True


def _kept_shapes(ssn: Session) -> dict[str, tuple[JobInfo, int, Shape | None]] | None:
    """The shapes kept with ``ssn``'s configuration (None when its answers are not kept).

    A job at the version a shape was worked out at is in that very state: its pending tasks,
    their order (TaskOrder is the configuration's), templates and nominated nodes, its counts
    and queue are those the shape was made of."""
    memos = ssn.dispatch.memos
    if memos is None:
        return None
    got = memos.derived.get("allocate-shapes")
    if not isinstance(got, dict) or len(got) > 2 * len(ssn.jobs) + 1024:  # departed jobs
        got = memos.derived["allocate-shapes"] = {}
    return got


class Allocate(Action):
    name = "allocate"
    ARGUMENTS = (
        Arg("predicateErrorCacheEnable", "bool", True, "accepted (the engine always reuses masks)"),
        Arg("gateRemovalWorkerNum", "int", 5, "accepted (Volcano)"),
        Arg(
            "minNodesToFind",
            "int",
            100,
            "node sampling: at least this many feasible nodes (sampling is on when any sampling "
            "key is given)",
            min=1,
        ),
        Arg(
            "minPercentageOfNodesToFind",
            "int",
            5,
            "node sampling: at least this percentage of nodes",
            min=0,
            max=100,
        ),
        Arg(
            "percentageOfNodesToFind",
            "int",
            0,
            "node sampling: this percentage of nodes (0: adaptive)",
            min=0,
            max=100,
        ),
    )
    #: reuse the outcome of an identical failed attempt (exact; tests switch it off to compare)
    use_memo: ClassVar[bool] = True
    #: after a replayed failure, go on with the same queue's next jobs while it would pop again
    #: anyway (exact; tests switch it off to compare)
    drain_replays: ClassVar[bool] = True
    #: a job with one task left is tried without a statement unless it needs one (exact;
    #: tests switch it off to compare)
    single_path: ClassVar[bool] = True

    def __init__(self, arguments: Arguments) -> None:
        super().__init__(arguments)
        self.error_cache = arguments.get_bool("predicateErrorCacheEnable", True)
        knobs = ("minNodesToFind", "minPercentageOfNodesToFind", "percentageOfNodesToFind")
        self.sample: tuple[int, int, int] | None = None
        if any(k in arguments for k in knobs):
            mn = arguments.get_int("minNodesToFind", 100)
            mp = arguments.get_int("minPercentageOfNodesToFind", 5)
            pct = arguments.get_int("percentageOfNodesToFind", 0)
            if mn < 1 or not 0 <= mp <= 100 or not 0 <= pct <= 100:
                raise ConfigError(
                    "configurations[allocate]: minNodesToFind must be >= 1 and the percentages "
                    "within 0..100"
                )
            self.sample = (mn, mp, pct)

    def execute(self, ssn: Session) -> None:
        t0 = time.perf_counter()
        ssn.placer.sample = self.sample
        run = _Pass(ssn, self._memo_ok(ssn))
        run.collect()
        # deferred queue answers serve one-task jobs only (gangs take statements); a worksheet
        # not listed yet may be of one task (the answers are exact either way, and cost
        # nothing without a deferred placement)
        one_task = self.single_path and any(
            ws is None or len(ws) == 1 for ws in run.worksheet.values()
        )
        got = ssn.dispatch.deferred_queues() if one_task else None
        run.deferred = got[0] if got is not None else None
        overused = got[0].overused if got is not None else ssn.dispatch.overused
        queues: PriorityQueue[QueueInfo] = PriorityQueue(
            got[1] if got is not None else ssn.dispatch.queue_order_key()
        )
        queues.extend(ssn.queues[name] for name in run.per_queue)
        try:
            self._loop(run, queues, overused)
        finally:
            if run.deferred is not None:
                run.deferred.flush()
        ssn.timings["allocate"] = time.perf_counter() - t0

    def _loop(
        self,
        run: _Pass,
        queues: PriorityQueue[QueueInfo],
        overused: Callable[[QueueInfo], bool],
    ) -> None:
        """Pop queues (QueueOrder) and try each popped queue's next job (JobOrder) until no
        queue has jobs left; an Overused queue is dropped."""
        ssn = run.ssn
        while queues:
            queue = queues.pop()
            jobs = run.per_queue[queue.name]
            if not jobs:
                continue
            if overused(queue):
                for j in jobs.items():
                    ssn.set_reason(
                        PendingReason(
                            j.uid,
                            "QueueOverused",
                            f"queue {queue.name!r} has reached its deserved share",
                        ),
                        overwrite=False,
                    )
                continue
            job = jobs.pop()
            # a failure is replayed only at the log position it was stored at
            shape = self._shape(run, queue, job) if run.fail_pos == len(ssn.nodes.log) else None
            if shape is not None and run.replay(shape, job):
                self._drain(run, queue, jobs, queues)
            else:
                self._attempt(run, queue, job, jobs)
            if jobs:
                queues.push(queue)

    def _memo_ok(self, ssn: Session) -> bool:
        """The failed-attempt memo (see _shape) holds when no callback can tell two jobs of one
        shape apart."""
        placer = ssn.placer
        return (
            self.use_memo
            and self.sample is None
            and not placer.scalar_callbacks
            and not ssn.hooks.pre_predicate
            and not placer.dyn_preds_active()
        )

    def _drain(
        self,
        run: _Pass,
        queue: QueueInfo,
        jobs: PriorityQueue[JobInfo],
        queues: PriorityQueue[QueueInfo],
    ) -> None:
        """After a replayed failure nothing changed (no placement, so no share, key or overused
        answer moved): while ``queue`` would pop again right away, go on with its next jobs
        without pushing and popping it, replaying their failures; the first job that is not a
        replay gets a real attempt, then the caller pushes the queue as usual."""
        if not self.drain_replays or not jobs or not queues.pops_next(queue):
            return
        while jobs:
            job = jobs.pop()
            shape = self._shape(run, queue, job)
            if shape is None or not run.replay(shape, job):
                self._attempt(run, queue, job, jobs)
                return

    def _attempt(
        self,
        run: _Pass,
        queue: QueueInfo,
        job: JobInfo,
        jobs: PriorityQueue[JobInfo],
    ) -> None:
        """Place ``job``'s pending tasks in one statement; commit, keep pipelined or discard.
        A failure that placed nothing is stored by shape, worked out from the state before
        the attempt (which such a failure leaves as it was)."""
        ssn = run.ssn
        tasks = run.tasks(job)
        log_before = len(ssn.nodes.log)
        fresh = run.memo_ok and job.uid not in ssn.reasons
        before = tuple(tasks) if fresh else None
        fails_before = len(ssn.fit_errors.get(job.uid, ()))
        ready: bool | None = None
        stmt: Statement | None
        if self.single_path and len(tasks) == 1:
            stmt, placed, ready = _place_single(ssn, queue, job, tasks, run.deferred)
        else:
            if run.deferred is not None:
                run.deferred.flush()
            stmt = Statement(ssn)
            placed = self._allocate_job(ssn, queue, job, tasks, stmt, jobs)
        if ready is None:
            ready = ssn.dispatch.job_ready(job)
        if ready:
            if stmt is not None:
                stmt.commit()
            if len(ssn.fit_errors.get(job.uid, ())) == fails_before:
                ssn.reasons.pop(job.uid, None)
        elif ssn.dispatch.job_pipelined(job):
            if stmt is not None:
                stmt.keep_pipelined()
            ssn.set_reason(
                PendingReason(job.uid, "Pipelined", "waiting for resources being released")
            )
        else:
            self._failed(run, queue, job, stmt, placed, log_before, before)

    def _failed(
        self,
        run: _Pass,
        queue: QueueInfo,
        job: JobInfo,
        stmt: Statement | None,
        placed: int,
        log_before: int,
        before: tuple[TaskInfo, ...] | None,
    ) -> None:
        """The job is neither ready nor pipelined: undo its statement and give it its gang
        failure (stored by shape when the attempt placed nothing)."""
        ssn = run.ssn
        reason = _gang_failure(ssn, job, placed)
        if stmt is not None:
            stmt.discard()
        shape = None
        if before is not None and len(ssn.nodes.log) == log_before:
            shape = self._shape(run, queue, job, before)
        ssn.set_reason(reason)
        if shape is not None:
            run.fail_memo[shape] = (log_before, reason)
            run.fail_pos = log_before

    @staticmethod
    def _shape(
        run: _Pass, queue: QueueInfo, job: JobInfo, tasks: Collection[TaskInfo] | None = None
    ) -> tuple[object, ...] | None:
        """What a failed attempt of ``job`` depends on, when nothing else does.

        Two jobs with the same shape, tried at the same change-log position with nothing placed
        in between, fail identically: same tasks (templates, roles) against the same node and
        queue state, with the same gang counters. ``tasks``: the job's pending tasks as they
        were before an attempt (default: its worksheet now). Jobs with a previous reason,
        nominated nodes, volatile templates or a network topology are never memoized.
        """
        if tasks is None:  # before an attempt (after one, the caller saved what it was)
            if job.uid in run.ssn.reasons:
                return None
            shapes = run.shapes
            if shapes is not None:
                kept = shapes.get(job.uid)
                if kept is not None and kept[0] is job and kept[1] == job.version:
                    return kept[2]
                shape = Allocate._shape(run, queue, job, run.tasks(job))
                shapes[job.uid] = (job, job.version, shape)
                return shape
            tasks = run.tasks(job)
        if not run.memo_ok or job.network_topology is not None:
            return None
        tids = []
        for t in tasks:
            if t.nominated_node or t.template.volatile:
                return None
            tids.append(t.template.tid)
        return (
            queue.name,
            job.min_available,
            tuple(tids),
            tuple(t.role for t in tasks) if job.min_task_member else None,
            tuple(sorted(job.min_task_member.items())) if job.min_task_member else (),
            tuple(job.counts),  # decides the ready, waiting and valid task numbers
            job.pending_best_effort,
            len(job.tasks),
        )

    def _allocate_job(
        self,
        ssn: Session,
        queue: QueueInfo,
        job: JobInfo,
        tasks: list[TaskInfo],
        stmt: Statement,
        jobs: PriorityQueue[JobInfo],
    ) -> int:
        placer = ssn.placer
        failed_roles: set[str] = set()
        placed = 0
        while tasks:
            task = tasks.pop()
            if task.status is not TaskStatus.PENDING:
                continue
            if not ssn.dispatch.allocatable(queue, task):
                _not_allocatable(ssn, queue, job)
                continue
            if task.role in failed_roles:
                continue
            err = ssn.dispatch.pre_predicate(task)
            got = None if err else placer.select(task)
            if got is None:
                _unschedulable(ssn, job, task, err)
                failed_roles.add(task.role)
                if not job.need_continue_allocating(failed_roles):
                    break
                continue
            idx, fits_idle = got
            if fits_idle:
                stmt.allocate(task, idx)
            else:
                stmt.pipeline(task, idx)
            placed += 1
            if tasks and ssn.dispatch.job_ready(job):
                jobs.push(job)
                break
        return placed


def _not_allocatable(ssn: Session, queue: QueueInfo, job: JobInfo) -> None:
    ssn.set_reason(
        PendingReason(
            job.uid,
            "NotAllocatable",
            f"queue {queue.name!r} quota (deserved share) does not allow the task's request",
        ),
        overwrite=False,
    )


def _unschedulable(ssn: Session, job: JobInfo, task: TaskInfo, err: str | None) -> None:
    """``task`` fits no node (``err``: a PrePredicate's message)."""
    hist: dict[str, int]
    if err:
        msg, hist = err, {}
    else:
        msg, hist = ssn.placer.explain(task)
    ssn.record_fit_error(job, task, msg)
    ssn.set_reason(PendingReason(job.uid, "Unschedulable", msg, details={"fit": hist}))


def _place_single(
    ssn: Session,
    queue: QueueInfo,
    job: JobInfo,
    tasks: list[TaskInfo],
    deferred: DeferredQueues | None,
) -> tuple[Statement | None, int, bool | None]:
    """``Allocate._allocate_job`` for a worksheet of one task, without a statement when the
    task is placed on Idle and the job is then ready (committed here: its Binding and Bind).
    Returns (the statement of what is left to commit, keep or undo, or None; how many tasks
    were placed; JobReady when it was asked, else None). With ``deferred``, the queue's
    Allocatable and the allocation handler are its (flushed before a statement is made)."""
    task = tasks.pop()
    if task.status is not TaskStatus.PENDING:
        return None, 0, None
    dispatch = ssn.dispatch
    allocatable = deferred.allocatable if deferred is not None else dispatch.allocatable
    if not allocatable(queue, task):
        _not_allocatable(ssn, queue, job)
        return None, 0, None
    err = dispatch.pre_predicate(task)
    got = None if err else ssn.placer.select(task)
    if got is None:
        _unschedulable(ssn, job, task, err)  # with no task left, the job stops either way
        return None, 0, None
    idx, fits_idle = got
    if not fits_idle:
        if deferred is not None:
            deferred.flush()
        stmt = Statement(ssn)
        stmt.pipeline(task, idx)
        return stmt, 1, None
    if _bind_single(ssn, job, task, idx, deferred):
        return None, 1, True
    stmt = Statement(ssn)
    stmt.placed(task)
    return stmt, 1, False


def _bind_single(
    ssn: Session, job: JobInfo, task: TaskInfo, idx: int, deferred: DeferredQueues | None
) -> bool:
    """Place ``task`` on node ``idx``'s Idle; when ``job`` is then ready, commit it as
    ``Statement.commit`` does (Binding, its Bind) and return True, else leave it Allocated
    (and the deferred answers flushed)."""
    if deferred is None:
        ssn.place(task, idx, TaskStatus.ALLOCATED)
        if not ssn.dispatch.job_ready(job):
            return False
        ssn.set_status_placed(task, TaskStatus.BINDING)
        ssn.record_bind(task)
        return True
    # no handler sees the task before JobReady, which counts Allocated and Binding alike
    # (gang's ready statuses): placed as the commit leaves it, moved back if not ready
    ssn.place(task, idx, TaskStatus.BINDING, fire=False)
    deferred.allocated(task)
    if ssn.dispatch.job_ready(job):
        ssn.record_bind(task)
        return True
    ssn.set_status_placed(task, TaskStatus.ALLOCATED)
    deferred.flush()
    return False
