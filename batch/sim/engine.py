"""Discrete-event simulation of a cluster driven by the real scheduling cycle.

Why this exists: to replay a workload through the scheduler that runs in production, on a
virtual clock, fast. The engine owns a virtual cluster of Kubernetes objects (Nodes, Queues,
PodGroups, Pods) and plays every part around the scheduler:

* the **job controller** — through a lifecycle (`batch.sim.lifecycle`): by default the real
  VCJob reconciler of `batch.controllers` (PodGroup first, pods only once the scheduler moves
  the PodGroup out of Pending, `PodEvicted -> RestartJob` with maxRetry), or a built-in fast
  equivalent of that handshake; a finished job's objects are deleted (`ttlSecondsAfterFinished:
  0`);
* the **API server and kubelet** — a bind sets `spec.nodeName` and the pod runs at once; every
  change reaches the scheduler as a watch event (`SchedulerBackend.apply`);
* the **clock** — events are arrivals, completions and scheduling cycles at the configured
  period; when no cycle can change anything (nothing pending, or the last cycle changed nothing
  and no event arrived) the clock jumps to the next arrival or completion — unless the
  scheduler's decisions may change with time alone while jobs wait
  (``SchedulerBackend.next_change``: a minimum runtime passing, a lost-work bound loosening);
  then an idle cycle runs at that time, or, for a change that may come at any time (attained
  service, aging), at gaps that double from one period up to ``MAX_IDLE_GAP``.

A job's run time starts when `min_available` of its pods run (the whole gang: a distributed
job cannot make progress with part of its workers). GPUs held by bound pods of a job that has
not started are counted as partial-allocation waste.

Policy switches that are not scheduler configuration live in `EngineOptions`: `gang` (PodGroup
minMember = gang size, or 1 for pod-at-a-time baselines), `gate_pods` (the enqueue handshake, or
pods created at arrival like a plain Deployment/Job) and `single_queue` (submit everything to
one queue, for baselines without queues). Metrics are collected on the way
(`batch.sim.metrics`).
"""

from __future__ import annotations

import heapq
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from batch.sim.backend import CycleOutcome, SchedulerBackend
from batch.sim.cluster import QueueSpec, queue_object
from batch.sim.lifecycle import make_lifecycle
from batch.sim.metrics import JobRecord, MetricsRecorder
from batch.sim.objects import (
    KIND_COMPLETE,
    running_status,
)
from batch.sim.workload import SimJob, Workload

__all__ = ["EngineOptions", "SimResult", "Simulation"]

log = logging.getLogger(__name__)

SINGLE_QUEUE = "default"
#: while jobs wait and nothing happens, cycles whose decisions may change with time alone run
#: at gaps doubling from one period up to this (virtual seconds)
MAX_IDLE_GAP = 3600.0

ProgressFn = Callable[[int, int, float], None]  # (jobs finished, jobs total, virtual time)


@dataclass(frozen=True, slots=True)
class EngineOptions:
    period: float = 1.0
    gang: bool = True
    gate_pods: bool = True
    single_queue: bool = False
    scheduler_name: str = "volcano"
    lifecycle: str = "volcano"  # "volcano": the real job reconciler; "fast": built-in handshake
    horizon: float | None = None  # stop at this virtual time (None: derived from the workload)
    estimates: bool = False  # give each job its trace run time as runningEstimate (an oracle)
    samples: int = 400


@dataclass(slots=True)
class SimResult:
    jobs: list[JobRecord]
    metrics: MetricsRecorder
    sessions: int
    session_seconds: float
    events: int
    wall_s: float
    end_time: float
    unfinished: int


class SimPod:
    """A pod of the virtual cluster: its current object and the engine's bookkeeping."""

    __slots__ = ("done", "gpu", "name", "node", "obj")

    def __init__(self, name: str, obj: dict[str, Any], gpu: int) -> None:
        self.name = name
        self.obj = obj
        self.gpu = gpu
        self.node: str | None = None
        self.done = False


class JobRun:
    """One job's life in the simulation (all attempts)."""

    __slots__ = (
        "attempt",
        "bound",
        "complete",
        "finished",
        "held_gpu",
        "held_since",
        "index",
        "job",
        "pg",
        "pods",
        "queue_idx",
        "record",
        "started",
        "state",
    )

    def __init__(self, index: int, job: SimJob, queue_idx: int, record: JobRecord) -> None:
        self.index = index
        self.job = job
        self.queue_idx = queue_idx
        self.record = record
        self.attempt = 0  # bumped whenever a started gang breaks; stale completions are ignored
        self.pg: dict[str, Any] | None = None
        self.pods: dict[str, SimPod] = {}
        self.bound = 0  # pods on a node and not finished
        self.held_gpu = 0  # GPUs of those pods while the job has not started
        self.held_since = 0.0
        self.started = False
        self.complete = False  # the current attempt ran its full run time
        self.finished = False
        self.state: Any = None  # lifecycle-specific (the VCJob object for the reconciler)


class Simulation:
    """One replay of `workload` through `backend` under `options`."""

    def __init__(
        self,
        workload: Workload,
        backend: SchedulerBackend,
        *,
        options: EngineOptions | None = None,
        progress: ProgressFn | None = None,
    ) -> None:
        self.workload = workload
        self.backend = backend
        self.options = options or EngineOptions()
        self.progress = progress
        queues = [q.name for q in workload.cluster.queues]
        for job in workload.jobs:
            if job.queue not in queues:
                queues.append(job.queue)
        self.queue_names = queues
        self._queue_idx = {q: i for i, q in enumerate(queues)}
        self.metrics = MetricsRecorder(workload, queue_names=queues, samples=self.options.samples)
        self.lifecycle = make_lifecycle(self.options.lifecycle, self)
        self.runs: list[JobRun] = []
        self._by_pg: dict[str, JobRun] = {}
        self._pod_owner: dict[str, JobRun] = {}
        self._heap: list[tuple[float, int, int, int, int]] = []  # (t, seq, kind, job, attempt)
        self._seq = 0
        self._pending_pgs = 0  # PodGroups in phase Pending (waiting for enqueue)
        self._unbound = 0  # pods not on a node and not finished
        self._finished = 0
        self._events = 0

    # -- setup ----------------------------------------------------------------------------------

    def _load_cluster(self) -> None:
        cluster = self.workload.cluster
        for node in cluster.node_objects():
            self.backend.apply("Node", "ADDED", node)
        for hn in cluster.hypernode_objects():
            self.backend.apply("HyperNode", "ADDED", hn)
        if self.options.single_queue:
            self.backend.apply("Queue", "ADDED", queue_object(QueueSpec(name=SINGLE_QUEUE)))
            return
        declared = {q.name for q in cluster.queues}
        for q in cluster.queue_objects():
            self.backend.apply("Queue", "ADDED", q)
        for name in self.queue_names:
            if name not in declared:
                self.backend.apply("Queue", "ADDED", queue_object(QueueSpec(name=name)))

    def queue_of(self, run: JobRun) -> str:
        return SINGLE_QUEUE if self.options.single_queue else run.job.queue

    # -- primitives used by the lifecycles ------------------------------------------------------

    def add_pod(self, run: JobRun, obj: dict[str, Any], gpu: int) -> None:
        name = obj["metadata"]["name"]
        pod = SimPod(name, obj, gpu)
        run.pods[name] = pod
        self._pod_owner[name] = run
        self._unbound += 1
        self.backend.apply("Pod", "ADDED", obj)

    def update_pod(self, run: JobRun, pod: SimPod, obj: dict[str, Any], *, notify: bool) -> None:
        pod.obj = obj
        if notify:
            self.backend.apply("Pod", "MODIFIED", obj)

    def finish_pod(self, run: JobRun, pod: SimPod, obj: dict[str, Any], now: float) -> None:
        """The pod terminated (Succeeded/Failed): it no longer holds its node's resources."""
        if pod.done:
            return
        self._unplace(run, pod, now)
        pod.done = True
        self.update_pod(run, pod, obj, notify=True)

    def _unplace(self, run: JobRun, pod: SimPod, now: float) -> None:
        if pod.done:
            return
        if pod.node is None:
            self._unbound -= 1
            return
        self.metrics.gpu_change(now, run.queue_idx, -pod.gpu)
        run.bound -= 1
        if run.started:
            if not run.complete and run.bound < run.job.min_available:
                # The running gang broke: this attempt is over (its completion is now stale).
                run.started = False
                run.attempt += 1
                run.held_since = now
                run.held_gpu = sum(
                    p.gpu
                    for p in run.pods.values()
                    if p is not pod and p.node is not None and not p.done
                )
        else:
            self._account_waste(run, now)
            run.held_gpu -= pod.gpu

    def remove_pod(self, run: JobRun, name: str, now: float) -> None:
        pod = run.pods.pop(name, None)
        if pod is None:
            return
        self._unplace(run, pod, now)
        pod.done = True
        self._pod_owner.pop(name, None)
        self.backend.apply("Pod", "DELETED", pod.obj)

    def put_podgroup(self, run: JobRun, obj: dict[str, Any]) -> None:
        """Create or update the job's PodGroup (ADDED when it has none)."""
        old = run.pg
        if old is not None and old["status"].get("phase") == "Pending":
            self._pending_pgs -= 1
        if obj.get("status", {}).get("phase", "Pending") == "Pending":
            self._pending_pgs += 1
        obj.setdefault("status", {}).setdefault("phase", "Pending")
        run.pg = obj
        self._by_pg[obj["metadata"]["name"]] = run
        self.backend.apply("PodGroup", "ADDED" if old is None else "MODIFIED", obj)

    def remove_podgroup(self, run: JobRun) -> None:
        pg = run.pg
        if pg is None:
            return
        if pg["status"].get("phase") == "Pending":
            self._pending_pgs -= 1
        self._by_pg.pop(pg["metadata"]["name"], None)
        run.pg = None
        self.backend.apply("PodGroup", "DELETED", pg)

    def finish(self, run: JobRun, now: float, *, phase: str) -> None:
        """The job reached a final phase: record it and remove its objects (TTL 0)."""
        if run.finished:
            return
        self._account_waste(run, now)
        run.finished = True
        for name in list(run.pods):
            self.remove_pod(run, name, now)
        self.remove_podgroup(run)
        run.record.finish = now
        run.record.phase = phase
        self._finished += 1
        self.metrics.job_left(run.queue_idx, run.job.gpu_milli)

    def schedule(self, t: float, kind: int, run: JobRun) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, kind, run.index, run.attempt))

    def _account_waste(self, run: JobRun, now: float) -> None:
        if run.held_gpu and not run.started:
            run.record.wasted_gpu_s += run.held_gpu / 1000 * (now - run.held_since)
        run.held_since = now

    def _start(self, run: JobRun, now: float) -> None:
        self._account_waste(run, now)
        run.started = True
        run.held_gpu = 0
        if run.record.start is None:
            run.record.start = now
        self.schedule(now + run.job.run_time, KIND_COMPLETE, run)

    # -- decisions ------------------------------------------------------------------------------

    def _apply(self, outcome: CycleOutcome, now: float) -> bool:
        changed = False
        victims: dict[int, list[str]] = {}
        for _ns, name, _reason in outcome.evictions:
            run = self._pod_owner.get(name)
            if run is None or name not in run.pods:
                continue
            victims.setdefault(run.index, []).append(name)
            run.record.evictions += 1
        for idx, names in victims.items():
            changed = True
            self.metrics.preemptions += 1
            self.lifecycle.pods_evicted(self.runs[idx], names, now)
        bound_runs: dict[int, JobRun] = {}
        for _ns, name, node in outcome.binds:
            run = self._pod_owner.get(name)
            if run is None:
                continue
            pod = run.pods[name]
            if pod.node is not None or pod.done:
                continue
            changed = True
            pod.node = node
            old = pod.obj
            self.update_pod(
                run,
                pod,
                {
                    **old,
                    "spec": {**old["spec"], "nodeName": node},
                    "status": running_status(now),
                },
                notify=True,
            )
            self._unbound -= 1
            if run.record.first_bind is None:
                run.record.first_bind = now
            self.metrics.gpu_change(now, run.queue_idx, pod.gpu)
            run.bound += 1
            if not run.started:
                self._account_waste(run, now)
                run.held_gpu += pod.gpu
                if run.bound >= run.job.min_available:
                    self._start(run, now)
            bound_runs[run.index] = run
        for run in bound_runs.values():
            self.lifecycle.pods_bound(run, now)
        for (_ns, pg_name), phase in outcome.podgroup_phases.items():
            run = self._by_pg.get(pg_name)
            if run is None or run.pg is None:
                continue
            if phase == run.pg["status"].get("phase"):
                continue
            self.put_podgroup(run, {**run.pg, "status": {**run.pg["status"], "phase": phase}})
            self.lifecycle.podgroup_phase(run, phase, now)
            # a new phase is a change (admission reads it: overcommit counts an Inqueue gang's
            # minResources until its PodGroup says Running), so a waiting job is looked at again
            changed = True
        self._record_deserved(outcome, now)
        return changed

    def _record_deserved(self, outcome: CycleOutcome, now: float) -> None:
        """The fairness metrics' yardstick is what the scheduler decided: each trace queue's
        published deserved GPUs (0 for a queue it published nothing for this cycle). One queue
        for everything (the baselines) publishes nothing per trace queue."""
        if outcome.deserved is None or self.options.single_queue:
            return
        for name, i in self._queue_idx.items():
            self.metrics.deserved_now(now, i, outcome.deserved.get(name, 0))

    # -- main loop ------------------------------------------------------------------------------

    def _horizon(self) -> float:
        if self.options.horizon is not None:
            return self.options.horizon
        jobs = self.workload.jobs
        if not jobs:
            return 0.0
        total_gpu = max(self.workload.cluster.gpu_milli_total, 1)
        work = sum(j.run_time * max(j.gpu_milli, 1) for j in jobs) / total_gpu
        longest = max(j.run_time for j in jobs)
        return jobs[-1].submit + 4 * (work + longest) + 86_400.0

    def run(self) -> SimResult:
        wall0 = time.perf_counter()
        self._load_cluster()
        self.runs = self._make_runs()
        horizon = self._horizon()
        loop = _Loop(idle_gap=self.options.period)
        progress_every = max(len(self.runs) // 200, 1)
        while True:
            ts = self._next_cycle(loop, horizon)
            if ts is None:
                break
            self._events_until(loop, ts)  # every event up to the cycle, each at its own time
            self._cycle(loop, ts)
            if self.progress is not None and self._finished // progress_every != loop.reported:
                loop.reported = self._finished // progress_every
                self.progress(self._finished, len(self.runs), loop.now)
        return self._result(loop, wall0)

    def _make_runs(self) -> list[JobRun]:
        runs: list[JobRun] = []
        for i, job in enumerate(self.workload.jobs):
            rec = JobRecord(
                name=job.name,
                queue=job.queue,
                submit=job.submit,
                gpus=job.gpu_milli / 1000,
                pods=job.pods,
                run_time=job.run_time,
            )
            runs.append(JobRun(i, job, self._queue_idx[job.queue], rec))
        return runs

    def _next_cycle(self, loop: _Loop, horizon: float) -> float | None:
        """When the next cycle runs: one period after the last while it changed something and
        work is left, else at the first period boundary at or after the next event, or earlier
        at the idle gap when work waits and time alone may change a decision. None when
        nothing is left or past the horizon (then the clock stops at the horizon)."""
        period = self.options.period
        jobs = self.workload.jobs
        heap = self._heap
        t_evt = jobs[loop.next_arrival].submit if loop.next_arrival < len(jobs) else math.inf
        if heap and heap[0][0] < t_evt:
            t_evt = heap[0][0]
        waiting = bool(self._pending_pgs or self._unbound)
        if loop.dirty and waiting:
            ts = loop.last_session + period
            loop.idle_gap = period
        else:
            ts = t_evt
            if t_evt < math.inf:
                ts = max(math.ceil(t_evt / period) * period, loop.last_session + period)
            wake = self._wake(loop) if waiting and loop.last_session > -math.inf else None
            if wake is not None and wake < ts:
                ts = wake  # nothing happens until then, but time alone may change a decision
            else:
                loop.idle_gap = period
            if ts == math.inf:
                return None
        if ts > horizon:
            loop.now = horizon
            return None
        return ts

    def _wake(self, loop: _Loop) -> float | None:
        """When an idle cycle should run: at the scheduler's next time-driven change (on a
        period boundary), or, for a change that may come at any time, after the idle gap,
        which doubles with each such cycle up to ``MAX_IDLE_GAP``."""
        last, period = loop.last_session, self.options.period
        change = self.backend.next_change(last)
        if change is None:
            return None
        if change > last:
            loop.idle_gap = period
            return max(math.ceil(change / period) * period, last + period)
        wake = last + loop.idle_gap
        loop.idle_gap = min(2 * loop.idle_gap, MAX_IDLE_GAP)
        return wake

    def _events_until(self, loop: _Loop, ts: float) -> None:
        """Arrivals and heap events at or before ``ts``, in time order (arrivals first on ties)."""
        jobs = self.workload.jobs
        n = len(jobs)
        heap = self._heap
        runs = self.runs
        lifecycle = self.lifecycle
        metrics = self.metrics
        next_arrival = loop.next_arrival
        while True:
            if (
                next_arrival < n
                and jobs[next_arrival].submit <= ts
                and (not heap or jobs[next_arrival].submit <= heap[0][0])
            ):
                run = runs[next_arrival]
                next_arrival += 1
                now = run.job.submit
                metrics.advance(now)
                self.backend.at(now)
                metrics.job_arrived(run.queue_idx, run.job.gpu_milli)
                lifecycle.submitted(run, now)
            elif heap and heap[0][0] <= ts:
                now, _seq, kind, idx, attempt = heapq.heappop(heap)
                run = runs[idx]
                metrics.advance(now)
                self.backend.at(now)
                if run.finished or run.attempt != attempt:
                    continue
                if kind == KIND_COMPLETE:
                    if run.started:
                        run.complete = True
                        lifecycle.run_finished(run, now)
                else:
                    lifecycle.wake(run, now)
            else:
                break
            self._events += 1
        loop.next_arrival = next_arrival

    def _cycle(self, loop: _Loop, ts: float) -> None:
        """Advance the clock to ``ts`` and run a scheduling cycle if anything waits."""
        loop.now = ts
        self.metrics.advance(ts)
        loop.last_session = ts
        if self._pending_pgs or self._unbound:
            c0 = time.perf_counter()
            outcome = self.backend.cycle(ts)
            loop.session_seconds += time.perf_counter() - c0
            loop.sessions += 1
            self._events += 1
            loop.dirty = self._apply(outcome, ts)
        else:
            loop.dirty = False

    def _result(self, loop: _Loop, wall0: float) -> SimResult:
        end = loop.now
        runs = self.runs
        for run in runs:
            if not run.finished:
                self._account_waste(run, end)
        self.metrics.close(end)
        if self.progress is not None:
            self.progress(self._finished, len(runs), end)
        return SimResult(
            jobs=[r.record for r in runs],
            metrics=self.metrics,
            sessions=loop.sessions,
            session_seconds=loop.session_seconds,
            events=self._events,
            wall_s=time.perf_counter() - wall0,
            end_time=end,
            unfinished=sum(1 for r in runs if not r.finished),
        )


@dataclass(slots=True)
class _Loop:
    """Where the main loop is: the next arrival, the last cycle and what it did."""

    next_arrival: int = 0
    last_session: float = -math.inf
    dirty: bool = False  # the last cycle changed something
    idle_gap: float = 1.0  # how long after an idle cycle the next one runs (no event before)
    sessions: int = 0
    session_seconds: float = 0.0
    now: float = 0.0
    reported: int = -1  # progress step last reported
