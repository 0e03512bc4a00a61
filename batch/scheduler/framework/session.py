"""The scheduling session: the state one cycle works on and the journal that undoes it.

A session opens on a ``ClusterCache`` without copying its object graph: node resource matrices
are copied (``SessionNodes``, a few MB), everything else is mutated in place through ``place``/
``unplace``/``evict``/``unevict``, which journal each change; ``close`` builds the ``Decisions``
and then undoes the journal, so the cache is exactly as before (the Kubernetes shell confirms
binds with ``ClusterCache.assume_bind``).

A session has three parts: this state and journal; ``ssn.hooks`` (framework/hooks.py), the typed
extension points its plugins register callbacks on when it opens; and ``ssn.dispatch``
(framework/dispatch.py), which combines those callbacks with Volcano's tier rules for the
actions.

The session is given its plugins already built (``batch.scheduler.cycle.open_session`` builds
them from the registry), so it imports neither the registry nor anything above it: the modules it
imports (hooks, dispatch, placement, nodes) never import it back.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy.typing as npt

from batch.model.cache import ClusterCache
from batch.model.info import JobInfo, QueueInfo, TaskInfo
from batch.model.resources import IntVec, add_column
from batch.model.status import ALLOCATED_STATUS, TaskStatus
from batch.scheduler.framework import jobmemo
from batch.scheduler.framework.decisions import (
    Bind,
    Event,
    Eviction,
    PendingReason,
    Pipeline,
    QueueMetrics,
)
from batch.scheduler.framework.dispatch import Dispatch
from batch.scheduler.framework.hooks import Hooks
from batch.scheduler.framework.instances import forget_sessions
from batch.scheduler.framework.jobindex import JobIndex
from batch.scheduler.framework.nodes import SessionNodes
from batch.scheduler.framework.placement import Placer

if TYPE_CHECKING:
    from batch.scheduler.framework.conf import PluginOption, SchedulerConfig


#: each plugin's open is one ``Hooks.open_plugin`` call, timed by one clock reading (False:
#: the window's steps called one by one, each plugin timed by two readings)
FOLD_OPEN = True
#: ``active_jobs`` once per change of the touched jobs, merged by ``JobInfo.ordinal`` (the
#: ``jobs`` order) instead of by a position table of every job (exact; tests switch it off)
KEEP_ACTIVE = True
_ORDINAL = operator.attrgetter("ordinal")


class SessionPlugin(Protocol):
    """What a session needs of a plugin (``registry.Plugin`` is the base class of them all)."""

    name: ClassVar[str]
    #: the configuration entry the plugin was built from (set by the session)
    option: PluginOption | None
    #: its ``register_kept`` callbacks read the session from ``ssn`` (``registry.Plugin``)
    keeps_callbacks: ClassVar[bool]
    ssn: Session

    def register_kept(self, hooks: Hooks) -> None: ...

    def on_session_open(self, ssn: Session) -> None: ...

    def on_session_close(self, ssn: Session) -> None: ...


class Session:
    """One scheduling cycle over a cache (see module docstring)."""

    #: passes over jobs skip settled ones (``active_jobs``); tests switch it off to compare
    skip_settled: ClassVar[bool] = True

    def __init__(
        self,
        cache: ClusterCache,
        config: SchedulerConfig,
        plugins: Sequence[Sequence[SessionPlugin]],
        *,
        now: float,
        uid: str | None = None,
        hooks: Hooks | None = None,
    ) -> None:
        """Open a session; ``plugins`` holds one built plugin per entry of ``config.tiers``,
        tier by tier (``registry.build_plugins``). ``hooks``: empty extension points (of as
        many tiers) to fill, kept from an earlier, released session (else new ones)."""
        t0 = time.perf_counter()
        self.cache = cache
        self.config = config
        self.now = now
        self.uid = uid or f"session-{cache.generation}-{int(now * 1000)}"
        self.resources = cache.resources
        self.nodes = SessionNodes(cache)
        nd = self.nodes
        self.total_resource: IntVec = nd.alloc_total()
        self.queues: dict[str, QueueInfo] = cache.queues
        self.jobs: dict[str, JobInfo] = {}
        self.reasons: dict[str, PendingReason] = {}
        #: jobs with work left at open (see ``active_jobs``), in ``jobs`` order
        self._open_jobs: list[JobInfo] = []
        #: the job index was rebuilt from every job (passes that follow changes start afresh)
        self.jobs_rebuilt = True
        self._take_jobs(cache)
        self._open_uids = {j.uid for j in self._open_jobs}
        self.journal: list[tuple[TaskInfo, TaskStatus, str, int]] = []
        self.phase_journal: list[tuple[JobInfo, str]] = []
        #: job uid -> (job, its version before this session first changed it)
        self._versions: dict[str, tuple[JobInfo, int]] = {}
        #: the jobs of ``_versions`` that were not open, in that order (``active_jobs``)
        self._touched: list[JobInfo] = []
        #: ``active_jobs`` with touched jobs: (how many were touched then, the jobs)
        self._active: tuple[int, list[JobInfo]] = (0, [])
        self.binds: list[Bind] = []
        self.pipelines: list[Pipeline] = []
        self.evictions: list[Eviction] = []
        self.events: list[Event] = []
        self.podgroup_conditions: dict[str, list[dict[str, Any]]] = {}
        #: per job: uid of the last task that failed to fit -> kube-style message
        self.fit_errors: dict[str, dict[str, str]] = {}
        self.timings: dict[str, float] = {}
        self.plugin_timings: dict[tuple[str, str], float] = {}
        #: per queue, filled by the fair-share plugin at close (metrics)
        self.queue_metrics: dict[str, QueueMetrics] = {}
        #: free-form per-session memo space for actions and plugins
        self.scratch: dict[str, Any] = {}
        self.closed = False
        #: the action executing (plugins may answer an action alone: proportion lets only
        #: allocate and backfill place work beyond a queue's share on borrowed room)
        self.action = ""
        ntiers = len(config.tiers)
        if hooks is None or hooks.in_use or len(hooks.job_order.tiers) != ntiers:
            hooks = Hooks(ntiers)
        self.hooks = hooks
        memos = None
        if jobmemo.KEEP:
            memos = jobmemo.JobMemos.of(
                cache.derived, config, rebuilt=self.jobs_rebuilt, jobs=len(self.jobs)
            )
        self.dispatch = Dispatch(self.hooks, memos)
        self.plugins: list[SessionPlugin] = []
        self._placer: Placer | None = None
        self._open_plugins(plugins)
        # the session's changes are undone at close: the change log keeps them aside, so the
        # state kept across sessions need not look at the jobs again (``rollback``)
        cache.changes.hold()
        self.timings["open"] = time.perf_counter() - t0

    def _take_jobs(self, cache: ClusterCache) -> None:
        """The jobs this session schedules (a PodGroup in an existing queue), with their
        priority, and which of them are not settled (``active_jobs``): from the cache's
        ``JobIndex``, brought up to date for the jobs that changed."""
        index = JobIndex.of(cache)
        self.jobs_rebuilt = index.refresh(cache, full=not self.skip_settled)
        self.jobs = index.jobs  # the index's own dict: sessions never change it
        self.reasons = index.missing_reasons()
        self._open_jobs = index.open_list()

    def active_jobs(self) -> list[JobInfo]:
        """The jobs a pass over jobs with work left has to visit, in ``jobs`` order: those not
        settled when the session opened (not admitted, pending or pipelined tasks, or fewer
        ready tasks than minAvailable) and those this session changed since. A settled job
        has nothing to place, admit or explain, so allocate, backfill, the starving-job scans
        and close's reasons skip it without testing it."""
        if not self.skip_settled:
            return list(self.jobs.values())
        if not self._touched:  # nothing changed yet (most calls): no pass over it
            return list(self._open_jobs)
        if KEEP_ACTIVE:
            return list(self._active_kept())
        jobs = self.jobs
        touched = [j for j in self._touched if j.uid in jobs]
        if not touched:
            return list(self._open_jobs)
        pos = {uid: i for i, uid in enumerate(jobs)}
        return sorted([*self._open_jobs, *touched], key=lambda j: pos[j.uid])

    def _active_kept(self) -> list[JobInfo]:
        """``active_jobs`` as the session's touched jobs now make it, worked out once per
        change of them (``_touched`` only grows until the rollback): the open jobs are in
        ``jobs`` order already, which is the order of their ordinals (``JobIndex``), so the
        sort merges the touched ones in."""
        n = len(self._touched)
        if self._active[0] != n:
            jobs = self.jobs
            touched = [j for j in self._touched if j.uid in jobs]
            merged = sorted([*self._open_jobs, *touched], key=_ORDINAL) if touched else []
            self._active = (n, merged)
        return self._active[1] or self._open_jobs

    def _open_plugins(self, plugins: Sequence[Sequence[SessionPlugin]]) -> None:
        """Let the configured plugins, tier by tier, register their callbacks; a plugin that
        keeps callbacks registers those once per ``Hooks`` (a kit's: ``cycle.Kit``) and is
        given the session they answer for (``Hooks.open_plugin``)."""
        if not FOLD_OPEN:
            self._open_plugins_stepwise(plugins)
            return
        tiers = zip(self.config.tiers, plugins, strict=True)
        hooks, timings, clock = self.hooks, self.plugin_timings, time.perf_counter
        t = clock()
        for ti, (tier, built) in enumerate(tiers):
            for opt, plugin in zip(tier.plugins, built, strict=True):
                plugin.option = opt
                self.plugins.append(plugin)
                hooks.open_plugin(ti, opt, plugin, self)
                now = clock()
                timings[(opt.name, "OnSessionOpen")] = now - t
                t = now

    def _open_plugins_stepwise(self, plugins: Sequence[Sequence[SessionPlugin]]) -> None:
        """``_open_plugins`` a step of the registration window at a time (``FOLD_OPEN`` off)."""
        tiers = zip(self.config.tiers, plugins, strict=True)
        hooks, timings, clock = self.hooks, self.plugin_timings, time.perf_counter
        for ti, (tier, built) in enumerate(tiers):
            for opt, plugin in zip(tier.plugins, built, strict=True):
                plugin.option = opt
                self.plugins.append(plugin)
                t_plugin = clock()
                hooks.begin(ti, opt)
                try:
                    if plugin.keeps_callbacks:
                        plugin.ssn = self
                        if not hooks.kept(plugin):
                            hooks.keep()
                            plugin.register_kept(hooks)
                            hooks.kept_by(plugin)
                    plugin.on_session_open(self)
                finally:
                    hooks.end()
                timings[(opt.name, "OnSessionOpen")] = clock() - t_plugin

    # -- metrics ---------------------------------------------------------------------------
    def publish_queue_metrics(
        self,
        queue: str,
        *,
        deserved: npt.NDArray[Any],
        real_capacity: npt.NDArray[Any],
        inqueue: npt.NDArray[Any],
        request: npt.NDArray[Any] | None,
        share: Callable[[], float],
        overused: Callable[[], bool],
    ) -> None:
        """Record what a fair-share plugin computed for ``queue`` (exported as metrics); its
        share and overused answers are asked for when a reader wants them."""
        self.queue_metrics[queue] = QueueMetrics(
            self.resources.names, deserved, real_capacity, inqueue, request, share, overused
        )

    def plugin_option(self, name: str) -> PluginOption | None:
        return self.config.plugin(name)

    # -- placement engine ------------------------------------------------------------------
    @property
    def placer(self) -> Placer:
        if self._placer is None:  # built once the plugins registered their callbacks
            self._placer = Placer(self.nodes, self.hooks, self.cache)
        return self._placer

    # -- state changes (journaled) ---------------------------------------------------------
    def _job_of(self, task: TaskInfo) -> JobInfo | None:
        return self.jobs.get(task.job_id) if task.job_id else None

    def _journal(self, task: TaskInfo, status: TaskStatus) -> None:
        """Record ``task``'s state, and its job's version before the session first touched it
        (rollback restores both: a job's version then again names its state)."""
        self.journal.append((task, status, task.node_name, task.node_idx))
        job = self._job_of(task)
        if job is not None and job.uid not in self._versions:
            self._first_change(job)

    def _first_change(self, job: JobInfo) -> None:
        """Keep ``job``'s version from before the session (and note it when it was not open)."""
        self._versions[job.uid] = (job, job.version)
        if job.uid not in self._open_uids:
            self._touched.append(job)

    def place(self, task: TaskInfo, idx: int, status: TaskStatus, *, fire: bool = True) -> None:
        """Pending ``task`` -> Allocated/Pipelined on node ``idx`` (fires allocate handlers;
        ``fire=False``: the caller does their work, ``hooks.DeferredQueues``)."""
        nd = self.nodes
        job = self.jobs.get(task.job_id) if task.job_id else None
        # _journal, with the job looked up once
        self.journal.append((task, task.status, task.node_name, task.node_idx))
        if job is not None and job.uid not in self._versions:
            self._first_change(job)
        req = task.req
        if status is TaskStatus.PIPELINED:
            nd.own_future()
            add_column(nd.pipelined, idx, req)
            nd.has_future = True
        else:
            add_column(nd.used, idx, req)
            add_column(nd.idle, idx, req, -1)
        nd.changed(idx, task.template.tid)
        if task.template.host_ports:
            nd.add_ports(idx, task.template.host_ports, 1)
        nd.placed.setdefault(idx, []).append(task)
        if task.template.pod_anti_affinity:
            nd.placed_anti += 1
        if job is not None:
            job.set_status(task, status)
        else:
            task.status = status
        task.node_name = nd.name(idx)
        task.node_idx = idx
        if fire:
            for h in self.hooks.handlers:
                h.on_allocate(task)

    def unplace(self, task: TaskInfo) -> None:
        """Undo ``place`` (task back to Pending; fires deallocate handlers)."""
        nd = self.nodes
        idx = task.node_idx
        self._journal(task, task.status)
        req = task.req
        if task.status is TaskStatus.PIPELINED:
            nd.own_future()
            add_column(nd.pipelined, idx, req, -1)
        else:
            add_column(nd.used, idx, req, -1)
            add_column(nd.idle, idx, req)
        nd.changed(idx)
        if task.template.host_ports:
            nd.add_ports(idx, task.template.host_ports, -1)
        lst = nd.placed.get(idx)
        if lst is not None and task in lst:
            lst.remove(task)
            if task.template.pod_anti_affinity:
                nd.placed_anti -= 1
        job = self._job_of(task)
        if job is not None:
            job.set_status(task, TaskStatus.PENDING)
        else:
            task.status = TaskStatus.PENDING
        task.node_name = ""
        task.node_idx = -1
        for h in self.hooks.handlers:
            h.on_deallocate(task)

    def evict(self, task: TaskInfo) -> TaskStatus:
        """Running/Bound ``task`` -> Releasing (fires deallocate handlers); returns old status."""
        nd = self.nodes
        old = task.status
        self._journal(task, old)
        if task.node_idx >= 0:
            nd.own_future()
            nd.releasing[:, task.node_idx] += task.req
            nd.has_future = True
            nd.changed(task.node_idx)
        job = self.jobs.get(task.job_id) if task.job_id else None
        if job is not None:
            job.set_status(task, TaskStatus.RELEASING)
        else:
            task.status = TaskStatus.RELEASING
        for h in self.hooks.handlers:
            h.on_deallocate(task)
        return old

    def unevict(self, task: TaskInfo, status: TaskStatus) -> None:
        nd = self.nodes
        self._journal(task, task.status)
        if task.node_idx >= 0:
            nd.own_future()
            nd.releasing[:, task.node_idx] -= task.req
            nd.changed(task.node_idx)
        job = self.jobs.get(task.job_id) if task.job_id else None
        if job is not None:
            job.set_status(task, status)
        else:
            task.status = status
        for h in self.hooks.handlers:
            h.on_allocate(task)

    def set_status(self, task: TaskInfo, status: TaskStatus) -> None:
        """Status change without resource effect (Allocated -> Binding at commit)."""
        self._journal(task, task.status)
        job = self._job_of(task)
        if job is not None:
            job.set_status(task, status)
        else:
            task.status = status

    def set_status_placed(self, task: TaskInfo, status: TaskStatus) -> None:
        """``set_status`` for a task this session placed (Allocated -> Binding at commit): its
        state before the session is journaled already (rollback restores a task's first
        entry only), so nothing is journaled again."""
        job = self._job_of(task)
        if job is not None:
            job.set_status(task, status)
        else:
            task.status = status

    def set_phase(self, job: JobInfo, phase: str) -> None:
        self.phase_journal.append((job, job.phase))
        if job.uid not in self._versions:
            self._first_change(job)
        job.phase = phase
        job.touch()

    def record_bind(self, task: TaskInfo) -> None:
        self.binds.append(
            Bind(task.namespace, task.name, task.uid, task.node_name, task.job_id or "")
        )

    def record_pipeline(self, task: TaskInfo) -> None:
        self.pipelines.append(
            Pipeline(task.namespace, task.name, task.uid, task.node_name, task.job_id or "")
        )

    def record_eviction(self, task: TaskInfo, reason: str) -> None:
        self.evictions.append(
            Eviction(task.namespace, task.name, task.uid, reason, task.job_id or "")
        )
        if task.job_id and task.job_id in self.jobs:
            job = self.jobs[task.job_id]
            self.event(
                job, "Normal", "Evict", f"Pod {task.namespace}/{task.name} evicted: {reason}"
            )

    def event(self, job: JobInfo, type_: str, reason: str, message: str) -> None:
        self.events.append(Event("PodGroup", job.namespace, job.name, type_, reason, message))

    def set_reason(self, reason: PendingReason, *, overwrite: bool = True) -> None:
        if overwrite or reason.job_id not in self.reasons:
            self.reasons[reason.job_id] = reason

    def record_fit_error(self, job: JobInfo, task: TaskInfo, message: str) -> None:
        self.fit_errors.setdefault(job.uid, {})[task.uid] = message

    def release(self) -> None:
        """Drop callbacks, plugins and engine state after close.

        Plugins' closures reference the session, so without this the whole session (node
        copies, template arrays, journal) would wait for Python's cyclic collector.
        """
        self.hooks.clear()
        self.dispatch.release()
        forget_sessions(self.plugins)
        self.plugins.clear()
        self._placer = None
        self.scratch.clear()

    def rollback(self, undone: dict[tuple[str, int], list[Any]] | None = None) -> None:
        """Undo every in-session change to cache objects (called by ``close``).

        ``undone`` (optional) receives, per (queue, ``id`` of a task request), the request and
        the net number of the queue's tasks the session had made allocated (Allocated,
        Binding, Bound or Running) that the rollback takes back (negative: evicted ones)."""
        # a task's first entry holds its state before the session: restore that one only
        # (counters are sums, so the order of the restores does not matter)
        first: dict[int, tuple[TaskInfo, TaskStatus, str, int]] = {}
        for entry in self.journal:
            first.setdefault(id(entry[0]), entry)
        for task, status, node_name, node_idx in first.values():
            job = self.jobs.get(task.job_id) if task.job_id else None
            if job is not None and task.uid in job.tasks:
                if undone is not None:
                    now_alloc = task.status in ALLOCATED_STATUS
                    if now_alloc != (status in ALLOCATED_STATUS):
                        key = (job.queue, id(task.req))
                        got = undone.get(key)
                        if got is None:
                            got = undone[key] = [task.req, 0]
                        got[1] += 1 if now_alloc else -1
                job.restore_status(task, status)  # its version is restored below
            else:
                task.status = status
            task.node_name = node_name
            task.node_idx = node_idx
        self.journal.clear()
        for job, phase in reversed(self.phase_journal):
            job.phase = phase
        self.phase_journal.clear()
        for job, version in self._versions.values():
            job.restore_version(version)
        # every job the session changed is back at its version from before: none is marked
        self.cache.changes.release(self._versions.keys())
        self._versions.clear()
        self._touched.clear()
        self._active = (0, [])

    def touched_uids(self) -> list[str]:
        """The jobs this session changed so far (its rollback restores them)."""
        return list(self._versions)
