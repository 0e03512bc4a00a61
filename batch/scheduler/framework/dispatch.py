"""Dispatch: what the plugins answer together, with Volcano's tier and vote rules.

Actions ask ``ssn.dispatch``; it combines the callbacks of ``ssn.hooks``
(docs/volcano-semantics.md#tiers): orders — the first non-zero plugin result decides (sort keys are
compared lexicographically, which is the same thing), then creation time and uid; Overused — any;
Allocatable/Preemptive/JobReady — all; JobPipelined/JobEnqueueable — votes (Reject wins, a Permit in
a tier decides, all-abstain falls through to the next tier); JobStarving — the first tier that
registers any, AND; JobValid — the first failure; Preemptable/Reclaimable — per-tier intersection,
the first tier with an answer decides (or, strictly, every plugin filters in turn).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from batch.model.info import JobInfo, QueueInfo, TaskInfo
from batch.model.resources import IntVec
from batch.scheduler.framework.hooks import (
    DeferredQueues,
    Hooks,
    Order,
    OrderKey,
    Point,
    TopologyPreemption,
    ValidateResult,
    VictimGuard,
    Victims,
)
from batch.scheduler.framework.jobmemo import JobMemos, Table, answer
from batch.scheduler.framework.nodes import FloatVec
from batch.scheduler.framework.votes import ABSTAIN, PERMIT, REJECT

T = TypeVar("T")

#: the order fallback of jobs and queues: (creation, uid)
_CREATION_UID = operator.attrgetter("creation", "uid")


def _order_key(entries: list[Order[T]], fallback: Callable[[T], Any]) -> Callable[[T], Any]:
    keys = [e.fn for e in entries if isinstance(e, OrderKey)]
    if len(keys) == len(entries):
        if not keys:
            return lambda x: (*fallback(x),)
        if len(keys) == 1:
            f0 = keys[0]
            return lambda x: (f0(x), *fallback(x))
        if len(keys) == 3:
            f0, f1, f2 = keys
            return lambda x: (f0(x), f1(x), f2(x), *fallback(x))
        return lambda x: (*(f(x) for f in keys), *fallback(x))

    def cmp(a: T, b: T) -> int:
        for e in entries:
            if isinstance(e, OrderKey):
                ka, kb = e.fn(a), e.fn(b)
                r = -1 if ka < kb else (1 if kb < ka else 0)
            else:
                r = e.fn(a, b)
            if r:
                return int(r)
        fa, fb = fallback(a), fallback(b)
        return -1 if fa < fb else (1 if fb < fa else 0)

    return functools.cmp_to_key(cmp)


def _any_of(fns: list[Callable[[T], bool]]) -> Callable[[T], bool] | None:
    if not fns:
        return None
    if len(fns) == 1:
        return fns[0]
    return lambda x: any(fn(x) for fn in fns)


class Dispatch:
    """The combined answer of a session's plugins at each extension point."""

    def __init__(self, hooks: Hooks, memos: JobMemos | None = None) -> None:
        self.hooks = hooks
        #: answers kept across sessions for points whose callbacks are pure per job
        self.memos = memos
        self._keys: dict[str, tuple[int, Callable[[Any], Any]]] = {}
        #: per point: (its version, its kept answers or None)
        self._tables: dict[str, tuple[int, Table | None]] = {}
        self._victim_points: dict[str, Point[Victims]] = {
            "preemptable": hooks.preemptable,
            "reclaimable": hooks.reclaimable,
            "unified_evictable": hooks.unified_evictable,
        }

    def release(self) -> None:
        """Drop the combined answers: they close over the session's callbacks, which may
        reference the session (a cycle only the cyclic collector would free)."""
        self._keys.clear()
        self._tables.clear()

    # -- orders --------------------------------------------------------------------------
    def _cached_key(self, point: Point[Order[T]], fallback: Callable[[T], Any]) -> Any:
        got = self._keys.get(point.name)
        if got is not None and got[0] == point.version:
            return got[1]
        key = _order_key(point.flat(), fallback)
        if not self.hooks.registering():
            self._keys[point.name] = (point.version, key)
        return key

    def _table(self, point: Point[Any]) -> Table | None:
        """``point``'s kept answers (``jobmemo``), None when they are not kept."""
        return self.job_table(point.name, point)

    def job_table(self, name: str, *points: Point[Any]) -> Table | None:
        """Kept per-job answers ``name`` (uid -> (version, answer), ``jobmemo``) that read
        only the job and the answers of ``points``; None when they may not be kept (a
        callback of ``points`` is not pure per job, or the switch is off)."""
        version = points[0].version if len(points) == 1 else sum([p.version for p in points])
        got = self._tables.get(name)
        if got is not None and got[0] == version:
            return got[1]
        memos = self.memos
        if memos is None or self.hooks.registering():
            return None
        table = memos.table(name, points)
        self._tables[name] = (version, table)
        return table

    def job_order_key(self) -> Callable[[JobInfo], Any]:
        point = self.hooks.job_order
        k: Callable[[JobInfo], Any] = self._cached_key(point, _CREATION_UID)
        table = self._table(point)
        if table is None:
            return k
        got = self._keys.get("job_order/kept")
        if got is not None and got[0] == point.version:
            return got[1]
        kept = functools.partial(answer, table, k)
        self._keys["job_order/kept"] = (point.version, kept)
        return kept

    def job_order_table(self) -> Table | None:
        """The kept JobOrder keys (``job_order_key`` reads them), None when they are not kept."""
        return self._table(self.hooks.job_order)

    def queue_order_key(self) -> Callable[[QueueInfo], Any]:
        k: Callable[[QueueInfo], Any] = self._cached_key(self.hooks.queue_order, _CREATION_UID)
        return k

    def deferred_queues(self) -> tuple[DeferredQueues, Callable[[QueueInfo], Any]] | None:
        """The session's one ``DeferredQueues`` and the QueueOrder key it answers, when it
        stands for every QueueOrder, Overused and Allocatable callback and every event handler
        (else None: another plugin answers or follows placements too)."""
        hooks = self.hooks
        if len(hooks.deferred_queues) != 1 or len(hooks.handlers) != 1:
            return None
        deferred = hooks.deferred_queues[0]
        key, overused, allocatable, handler = deferred.stands_for()
        orders = hooks.queue_order.flat()
        if not (
            hooks.handlers[0] is handler
            and len(orders) == 1
            and isinstance(orders[0], OrderKey)
            and orders[0].fn is key
            and hooks.overused.flat() == [overused]
            and hooks.allocatable.flat() == [allocatable]
        ):
            return None
        return deferred, _order_key([OrderKey(deferred.key)], _CREATION_UID)

    def task_order_key(self) -> Callable[[TaskInfo], Any]:
        k: Callable[[TaskInfo], Any] = self._cached_key(self.hooks.task_order, TaskInfo.sort_key)
        return k

    def victim_queue_order(self, a: QueueInfo, b: QueueInfo, preemptor: QueueInfo) -> int:
        for fn in self.hooks.victim_queue_order.flat():
            r = int(fn(a, b, preemptor))
            if r:
                return r
        key = self.queue_order_key()
        ka, kb = key(a), key(b)
        return 1 if ka < kb else (-1 if kb < ka else 0)

    # -- queues --------------------------------------------------------------------------
    # the hot answers below loop instead of any()/all() over a generator (same short-circuit,
    # without a generator per call: they are asked for every job and placement)
    def overused(self, queue: QueueInfo) -> bool:
        for fn in self.hooks.overused.flat():  # noqa: SIM110
            if fn(queue):
                return True
        return False

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        for fn in self.hooks.allocatable.flat():  # noqa: SIM110
            if not fn(queue, task):
                return False
        return True

    def preemptive(self, queue: QueueInfo, tasks: Sequence[TaskInfo]) -> bool:
        return all(fn(queue, tasks) for fn in self.hooks.preemptive.flat())

    def deserved(self, queue: str) -> FloatVec | None:
        """The first fair-share plugin's deserved vector of ``queue`` (None without one)."""
        for fn in self.hooks.deserved.flat():
            got = fn(queue)
            if got is not None:
                return got
        return None

    def queue_at_deserved(self) -> Callable[[str], bool] | None:
        """The fair-share rule "allocated <= deserved", by queue name (None without one)."""
        fns = self.hooks.queue_at_deserved.flat()
        return fns[0] if fns else None

    def held_beyond_share(self, job: JobInfo) -> IntVec | None:
        """What other queues hold beyond their fair share that reclaim may give back, free for
        ``job`` (None without fair shares, or when ``job``'s queue would pass its own)."""
        for fn in self.hooks.held_beyond_share.flat():
            got = fn(job)
            if got is not None:
                return got
        return None

    # -- jobs ----------------------------------------------------------------------------
    def job_ready(self, job: JobInfo) -> bool:
        for fn in self.hooks.job_ready.flat():  # noqa: SIM110
            if not fn(job):
                return False
        return True

    def _vote(self, point: Point[Callable[[JobInfo], int]], job: JobInfo) -> tuple[bool, str]:
        for tier in point.tiers:
            permitted = False
            for name, fn in tier:
                v = fn(job)
                if v == REJECT:
                    return False, name
                if v == PERMIT:
                    permitted = True
            if permitted:
                return True, ""
        return True, ""

    def job_pipelined(self, job: JobInfo) -> bool:
        return self._vote(self.hooks.job_pipelined, job)[0]

    def job_enqueueable(self, job: JobInfo) -> tuple[bool, str]:
        """(permitted, name of the rejecting plugin or '')."""
        return self._vote(self.hooks.job_enqueueable, job)

    def job_enqueued(self, job: JobInfo) -> None:
        for fn in self.hooks.job_enqueued.flat():
            fn(job)

    def job_valid(self, job: JobInfo) -> ValidateResult | None:
        table = self._table(self.hooks.job_valid)
        return self._job_valid(job) if table is None else answer(table, self._job_valid, job)

    def _job_valid(self, job: JobInfo) -> ValidateResult | None:
        for fn in self.hooks.job_valid.flat():
            r = fn(job)
            if r is not None and not r.passed:
                return r
        return None

    def job_starving(self, job: JobInfo) -> bool:
        table = self._table(self.hooks.job_starving)
        return self._starving(job) if table is None else answer(table, self._starving, job)

    def _starving(self, job: JobInfo) -> bool:
        for tier in self.hooks.job_starving.tiers:
            if tier:
                return all(fn(job) for _, fn in tier)
        return False

    def target_job(self, jobs: list[JobInfo]) -> JobInfo | None:
        for fn in self.hooks.target_job.flat():
            return fn(jobs)
        return None

    def pre_predicate(self, task: TaskInfo) -> str | None:
        for fn in self.hooks.pre_predicate.flat():
            err = fn(task)
            if err:
                return str(err)
        return None

    # -- victims -------------------------------------------------------------------------
    def victims(
        self, point: str, preemptor: TaskInfo, candidates: list[TaskInfo]
    ) -> list[TaskInfo]:
        """Volcano's tiered victim choice at ``point``: per-tier intersection (a plugin whose
        answer shares nothing with the tier's so far starts it afresh), first tier with an
        answer decides."""
        for tier in self._victim_points[point].tiers:
            victims: list[TaskInfo] | None = None
            for _, fn in tier:
                got, vote = fn(preemptor, candidates)
                if vote == ABSTAIN:
                    continue
                if not got:
                    victims = None
                    break
                if victims is None:
                    victims = list(got)
                else:
                    keep = {t.uid for t in got}
                    inter = [t for t in victims if t.uid in keep]
                    victims = inter if inter else list(got)
            if victims is not None:
                return victims
        return []

    def victims_strict(
        self, point: str, preemptor: TaskInfo, candidates: list[TaskInfo]
    ) -> list[TaskInfo]:
        """Every non-abstaining callback of every tier filters the candidates in turn (none
        answering: no victims)."""
        victims = list(candidates)
        answered = False
        for tier in self._victim_points[point].tiers:
            for _, fn in tier:
                got, vote = fn(preemptor, victims)
                if vote == ABSTAIN:
                    continue
                answered = True
                keep = {t.uid for t in got}
                victims = [t for t in victims if t.uid in keep]
                if not victims:
                    return []
        return victims if answered else []

    def preemptable(self, preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        return self.victims("preemptable", preemptor, candidates)

    def reclaimable(self, reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        return self.victims("reclaimable", reclaimer, candidates)

    def victim_tasks(self, tasks: list[TaskInfo]) -> list[TaskInfo]:
        for tier in self.hooks.victim_tasks.tiers:
            out: dict[str, TaskInfo] = {}
            for _, fn in tier:
                for t in fn(tasks):
                    out[t.uid] = t
            if out:
                return list(out.values())
        return []

    def victim_guards(self) -> list[VictimGuard]:
        return self.hooks.victim_guard.flat()

    def victim_job_floor(self, point: str) -> Callable[[JobInfo], bool] | None:
        """Whether the plugins' victim rules at ``point`` spare every task of a job."""
        return _any_of(self.hooks.job_floor[point].flat())

    def victim_queue_floor(self, point: str) -> Callable[[str], bool] | None:
        """Whether the plugins' victim rules at ``point`` spare every task of a queue."""
        return _any_of(self.hooks.queue_floor[point].flat())

    def topology_preemption(self) -> TopologyPreemption | None:
        got = self.hooks.topology_preemption.flat()
        return got[0] if got else None
