"""reservation: EASY backfill — a big starving gang reserves nodes as they free up.

Volcano's scheduler has no such plugin (docs/volcano-semantics.md#plugins), nor do KAI or Kueue
(peers.md). Without it a large gang can wait forever: every time a node frees, a small job takes
it. With this plugin, the first ``maxReservations`` (default 1) starving gangs with
``minAvailable >= minGangSize`` (default 8), in order of priority then age, each get a
*reservation*: the earliest time ``T`` at which their
missing tasks fit (the "shadow time", computed from the running jobs' estimated end times) and the
nodes they would use then (a later reservation never takes an earlier one's nodes). Other jobs
may still be placed on a reserved node, but only when they
will finish before ``T`` (EASY-backfill rule): ``now + runningEstimate <= T``. A job without an
estimate never lands on reserved nodes; the reserving gang itself may use any node.

Run-time estimates: the PodGroup annotation ``tephra.io/running-estimate`` (a duration: ``90s``,
``30m``, ``1h30m``, or seconds), else the same annotation on the job's pods, else the argument
``defaultRunningEstimate`` (unset = unknown). The Job controller is expected to copy
``Job.spec.runningEstimate`` into that PodGroup annotation (Volcano accepts the field and ignores
it). A running job's end = its earliest pod start (``status.startTime``) + its estimate; pods of
jobs without an estimate never count as freeing (if the gang never fits, ``T`` is unknown and the
reserved nodes are blocked for everyone else).

The restriction is a dynamic predicate, so allocate, backfill and preempt honour it. The
reservation is reported in the gang's pending reason: ``details["reservation"] = {"nodes":
[...], "due": <epoch seconds or None>}``.

The module also registers ``nominated`` (see ``NominatedPlugin``): pods pipelined by preempt or
reclaim keep the resources released for them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from batch.model.info import JobInfo, TaskInfo
from batch.model.status import ALLOCATED_STATUS, TaskStatus
from batch.scheduler.framework.arguments import Arg, Arguments, ConfigError
from batch.scheduler.framework.nodes import BoolVec, SessionNodes
from batch.scheduler.framework.registry import Plugin
from batch.scheduler.framework.session import Session
from batch.scheduler.pluginlib.durations import job_estimate, parse_duration, task_start


@dataclass(slots=True)
class Reservation:
    job: str
    due: float  # math.inf when unknown
    mask: BoolVec

    def node_names(self, nodes: SessionNodes) -> list[str]:
        return [nodes.name(int(i)) for i in np.flatnonzero(self.mask)]


class ReservationPlugin(Plugin):
    name = "reservation"
    ARGUMENTS = (
        Arg("minGangSize", "int", 8, "gangs of at least this many tasks get a reservation", min=1),
        Arg("maxReservations", "int", 1, "reservations held at once", min=0),
        Arg(
            "defaultRunningEstimate",
            "duration",
            None,
            "running time assumed for a pod without an estimate (none: unknown)",
        ),
    )

    def __init__(self, arguments: Arguments) -> None:
        super().__init__(arguments)
        self.min_gang = arguments.get_int("minGangSize", 8)
        self.max_res = arguments.get_int("maxReservations", 1)
        self.default: float | None = None
        if "defaultRunningEstimate" in arguments:
            try:
                self.default = parse_duration(arguments.raw["defaultRunningEstimate"])
            except ValueError as exc:
                raise ConfigError(
                    f"plugin reservation: argument 'defaultRunningEstimate': {exc}"
                ) from None
        if self.min_gang < 1 or self.max_res < 0:
            raise ConfigError(
                "plugin reservation: minGangSize must be >= 1 and maxReservations >= 0"
            )
        self.reservations: list[Reservation] = []
        self._todo: list[JobInfo] = []

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.reservations = []
        cands = [
            j
            for j in ssn.jobs.values()
            if not j.is_pending()
            and j.min_available >= self.min_gang
            and j.is_starving()
            and j.counts[TaskStatus.PENDING] - j.gated_pending > 0
            and ssn.dispatch.job_valid(j) is None
        ]
        if not cands or self.max_res == 0:
            return
        cands.sort(key=lambda j: (-j.priority, j.creation, j.uid))
        self.estimates: dict[str, float | None] = {}
        self._todo = cands[: self.max_res]
        # computed on first use: the placement engine (static masks) exists only after open
        ssn.hooks.add_dynamic_predicate(self._predicate, per_job=True)

    def _ensure(self) -> None:
        if self._todo:
            todo, self._todo = self._todo, []
            for job in todo:
                self.reservations.append(self._reserve(job))

    def estimate(self, job: JobInfo) -> float | None:
        got = self.estimates.get(job.uid, -1.0)
        if got == -1.0:
            got = self.estimates[job.uid] = job_estimate(job, self.default)
        return got

    # -- shadow time ----------------------------------------------------------------------
    def _releases(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.intp], list[TaskInfo]]:
        ssn = self.ssn
        ends: list[float] = []
        nodes: list[int] = []
        tasks: list[TaskInfo] = []
        for job in ssn.jobs.values():
            est = self.estimate(job)
            if est is None:
                continue
            on = [t for t in job.tasks.values() if t.status in ALLOCATED_STATUS and t.node_idx >= 0]
            if not on:
                continue
            end = min(task_start(t) for t in on) + est
            for t in on:
                ends.append(max(end, ssn.now))
                nodes.append(t.node_idx)
                tasks.append(t)
        order = np.argsort(np.asarray(ends, dtype=np.float64), kind="stable")
        return (
            np.asarray(ends, dtype=np.float64)[order],
            np.asarray(nodes, dtype=np.intp)[order],
            [tasks[int(i)] for i in order],
        )

    def _fit(self, free: npt.NDArray[np.int64], tasks: list[TaskInfo]) -> tuple[bool, BoolVec]:
        """Greedy first-fit of ``tasks`` over ``free``: (all fit, nodes used)."""
        nd = self.ssn.nodes
        free = free.copy()
        used = np.zeros(nd.n, dtype=np.bool_)
        placer = self.ssn.placer
        for t in tasks:
            tmpl = t.template
            ok = placer.state(tmpl).static_ok
            dims = np.flatnonzero(tmpl.fit > 0)
            fits = ok.copy()
            for d in dims:
                fits &= free[d] >= tmpl.fit[d]
            # prefer nodes already used by the gang, then the lowest slot
            pick = np.flatnonzero(fits & used)
            if len(pick) == 0:
                pick = np.flatnonzero(fits)
            if len(pick) == 0:
                return False, used
            i = int(pick[0])
            free[:, i] -= tmpl.req
            used[i] = True
        return True, used

    def _reserve(self, job: JobInfo) -> Reservation:
        ssn = self.ssn
        nd = ssn.nodes
        pending = [t for t in job.tasks.values() if t.status is TaskStatus.PENDING and not t.gated]
        pending.sort(key=ssn.dispatch.task_order_key())
        need = max(job.min_available - job.ready_task_num() - job.waiting_task_num(), 1)
        want = pending[:need]
        base = (nd.future_idle() if nd.has_future else nd.idle).copy()
        base[:, ~nd.valid] = -(1 << 40)
        for r in self.reservations:  # an earlier reservation's nodes are not available
            base[:, r.mask] = -(1 << 40)
        ends, where, tasks = self._releases()
        reqs = np.stack([t.req for t in tasks]) if tasks else np.zeros((0, base.shape[0]), np.int64)

        def free_at(k: int) -> npt.NDArray[np.int64]:
            out = base.copy()
            if k:
                np.add.at(out.T, where[:k], reqs[:k])
            return out

        ok, used = self._fit(base, want)
        if ok:
            return Reservation(job.uid, ssn.now, used)
        times = np.unique(ends)
        lo, hi = 0, len(times) - 1
        found: int | None = None
        while lo <= hi:
            mid = (lo + hi) // 2
            k = int(np.searchsorted(ends, times[mid], side="right"))
            if self._fit(free_at(k), want)[0]:
                found = mid
                hi = mid - 1
            else:
                lo = mid + 1
        if found is None:
            _, used = self._fit(free_at(len(ends)), want)
            if not used.any():
                used = nd.valid.copy()
                for r in self.reservations:
                    used &= ~r.mask
            return Reservation(job.uid, math.inf, used)
        k = int(np.searchsorted(ends, times[found], side="right"))
        _, used = self._fit(free_at(k), want)
        return Reservation(job.uid, float(times[found]), used)

    # -- enforcement -----------------------------------------------------------------------
    def _predicate(self, task: TaskInfo, nodes: SessionNodes) -> list[tuple[str, BoolVec]]:
        self._ensure()
        job = self.ssn.jobs.get(task.job_id or "")
        out: list[tuple[str, BoolVec]] = []
        for r in self.reservations:
            if job is not None and job.uid == r.job:
                continue
            est = self.estimate(job) if job is not None else None
            if est is not None and self.ssn.now + est <= r.due:
                continue
            out.append((f"node(s) reserved for gang {r.job}", r.mask))
        return out

    def on_session_close(self, ssn: Session) -> None:
        if getattr(self, "_todo", None):
            self._ensure()
        for r in self.reservations:
            reason = ssn.reasons.get(r.job)
            if reason is not None:
                reason.details["reservation"] = {
                    "nodes": r.node_names(ssn.nodes),
                    "due": None if math.isinf(r.due) else r.due,
                }


class NominatedPlugin(Plugin):
    """nominated: resources freed by a preemption stay with the preemptor.

    A preempting or reclaiming task is pipelined onto the node whose victims it evicted
    (``Decisions.pipelines``); the Kubernetes shell records that as the pod's
    ``status.nominatedNodeName`` (as kube-scheduler does). Until the pod is bound, other jobs'
    tasks may use that node only for what is left after the nominated pods' requests — so the
    released resources cannot be taken by someone else, which would make the preemptor evict
    again (an eviction loop). kube-scheduler honours nominations only against lower-priority
    pods; Tephra holds them against every other job: the evictions were made for this pod.
    """

    name = "nominated"
    ARGUMENTS = ()

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        nd = ssn.nodes
        self.held: dict[int, list[TaskInfo]] = {}
        for job in ssn.active_jobs():  # a job with a pending task is never settled
            if job.counts[TaskStatus.PENDING] == 0:
                continue
            for t in job.tasks.values():
                if t.status is TaskStatus.PENDING and t.nominated_node:
                    idx = nd.arrays.by_name.get(t.nominated_node)
                    if idx is not None and idx < nd.n:
                        self.held.setdefault(idx, []).append(t)
        if self.held:
            ssn.hooks.add_dynamic_predicate(
                self._predicate, per_job=True
            )  # a job's own nominations

    def _predicate(self, task: TaskInfo, nodes: SessionNodes) -> list[tuple[str, BoolVec]]:
        fail = np.zeros(nodes.n, dtype=np.bool_)
        fit = task.template.fit
        dims = np.flatnonzero(fit > 0)
        any_fail = False
        for idx, tasks in self.held.items():
            hold = None
            for t in tasks:
                if t.job_id == task.job_id or t.status is not TaskStatus.PENDING:
                    continue
                hold = t.req.copy() if hold is None else hold + t.req
            if hold is None:
                continue
            _, _, fut = nodes.cols(idx)
            if any(fut[d] - int(hold[d]) < int(fit[d]) for d in dims):
                fail[idx] = True
                any_fail = True
        if not any_fail:
            return []
        return [("node(s) hold resources nominated to a preemptor", fail)]
