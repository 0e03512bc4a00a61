"""The scheduling session: extension points with Volcano's tier/vote semantics, and state.

A session opens on a ``ClusterCache`` without copying its object graph: node resource matrices
are copied (a few MB), everything else is mutated in place through ``place``/``unplace``/
``evict``/``unevict`` which journal each change; ``close`` builds the ``Decisions`` and then undoes
the journal, so the cache is exactly as before (the Kubernetes shell confirms binds with
``ClusterCache.assume_bind``).

Combination rules (volcano.md §4.5): orders — first non-zero plugin result decides (keys are
compared lexicographically, which is the same thing); predicates — all must pass; node scores —
summed; Overused — any; Allocatable/Preemptive/JobReady — all; JobPipelined/JobEnqueueable —
votes (Reject wins, a Permit in a tier decides, all-abstain falls through to the next tier);
JobStarving — the first tier that registers any, AND; JobValid — first failure; Preemptable/
Reclaimable — per-tier intersection.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from batch.model.cache import ClusterCache
from batch.model.info import JobInfo, QueueInfo, TaskInfo, TaskTemplate
from batch.model.nodes import NodeArrays
from batch.model.resources import IntVec
from batch.model.status import TaskStatus
from batch.scheduler.framework.arguments import Arguments
from batch.scheduler.framework.decisions import (
    Bind,
    Event,
    Eviction,
    PendingReason,
    Pipeline,
    QueueMetrics,
)
from batch.scheduler.framework.registry import PLUGINS, Plugin
from batch.scheduler.framework.votes import ABSTAIN, PERMIT, REJECT

if TYPE_CHECKING:
    from batch.scheduler.framework.conf import PluginOption, SchedulerConfig
    from batch.scheduler.framework.placement import Placer

FloatVec = npt.NDArray[np.float64]
BoolVec = npt.NDArray[np.bool_]

JobCmp = Callable[[JobInfo, JobInfo], int]
QueueCmp = Callable[[QueueInfo, QueueInfo], int]
TaskCmp = Callable[[TaskInfo, TaskInfo], int]
#: vector filter: (template, nodes) -> [(kube-style reason, failing-node mask)], in order
BatchPredicate = Callable[[TaskTemplate, "SessionNodes"], list[tuple[str, BoolVec]]]
#: per-task filter over nodes that depends on in-session state (ports, inter-pod affinity)
DynamicPredicate = Callable[[TaskInfo, "SessionNodes"], list[tuple[str, BoolVec]]]
#: scalar filter for one (task, node index): None = fits, else the reason
ScalarPredicate = Callable[[TaskInfo, int], str | None]
#: dynamic score over node indexes ``idx`` (an int array or a full slice)
#: (an int ``idx`` asks for one node's score as a float: the per-placement fast path)
BatchScore = Callable[[TaskTemplate, "SessionNodes", Any], Any]
#: static (state-independent) score over all nodes, computed once per template and session
StaticScore = Callable[[TaskTemplate, "SessionNodes", BoolVec], FloatVec]
ScalarScore = Callable[[TaskInfo, int], float]
Victims = Callable[[TaskInfo, list[TaskInfo]], tuple[list[TaskInfo], int]]
#: a hard victim filter: (point "preemptable"|"reclaimable", preemptor, victims) -> kept victims
VictimGuard = Callable[[str, TaskInfo, list[TaskInfo]], list[TaskInfo]]


class TopologyPreemption(Protocol):
    """What topology-aware preemption needs of the network-topology plugin."""

    def preemption_domains(self, ssn: Session, job: JobInfo) -> Sequence[object]:
        """Domains to try for ``job``, best first."""

    def pin(self, job: JobInfo, domain: Any) -> None:
        """Keep ``job``'s placement inside ``domain`` until ``unpin``."""

    def unpin(self, job: JobInfo) -> None: ...


@dataclass(slots=True, frozen=True)
class ValidateResult:
    passed: bool
    reason: str = ""
    message: str = ""


class SessionNodes:
    """The session's node view: mutable copies of used/releasing/pipelined, shared metadata."""

    def __init__(self, cache: ClusterCache) -> None:
        arrays = cache.nodes
        n = arrays.count
        self.arrays: NodeArrays = arrays
        self.n = n
        self.dims = len(cache.resources)
        self.alloc = arrays.alloc[:, :n]
        self.used = arrays.used[:, :n].copy()
        self.releasing = arrays.releasing[:, :n].copy()
        self.pipelined = arrays.pipelined[:, :n].copy()
        self.idle = self.alloc - self.used
        self.valid: BoolVec = (arrays.schedulable[:n] & arrays.present[:n]).copy()
        self.has_future = bool(self.releasing.any() or self.pipelined.any())
        self.log: list[int] = []  # node indexes changed in this session, in order
        self._ports: dict[tuple[str, str, int], npt.NDArray[np.int32]] = {}
        self.placed: dict[int, list[TaskInfo]] = {}  # in-session additions per node
        self.placed_anti = 0  # in-session placed tasks with required pod anti-affinity
        self._free: tuple[int, IntVec] | None = None
        self._cols: dict[int, tuple[int, tuple[list[int], list[int], list[int]]]] = {}

    def name(self, idx: int) -> str:
        return self.arrays.name_of(idx)

    def cols(self, idx: int) -> tuple[list[int], list[int], list[int]]:
        """(allocatable, used, future idle) of one node as Python ints (scalar fast paths)."""
        pos = len(self.log)
        hit = self._cols.get(idx)
        if hit is not None and hit[0] == pos:
            return hit[1]
        alloc = self.alloc[:, idx].tolist()
        used = self.used[:, idx].tolist()
        if self.has_future:
            fut = (self.idle[:, idx] + self.releasing[:, idx] - self.pipelined[:, idx]).tolist()
        else:
            fut = [a - u for a, u in zip(alloc, used, strict=True)]
        got = (alloc, used, fut)
        self._cols[idx] = (pos, got)
        return got

    def future_idle(self) -> IntVec:
        return self.idle + self.releasing - self.pipelined

    def free_total(self) -> IntVec:
        """Σ over schedulable nodes of max(0, FutureIdle), per dimension (cached per change)."""
        pos = len(self.log)
        if self._free is None or self._free[0] != pos:
            fut = self.future_idle() if self.has_future else self.idle
            self._free = (pos, np.clip(fut[:, self.valid], 0, None).sum(axis=1))
        return self._free[1]

    def port_counts(self, port: tuple[str, str, int]) -> npt.NDArray[np.int32] | None:
        own = self._ports.get(port)
        if own is not None:
            return own
        base = self.arrays.ports.get(port)
        return base[: self.n] if base is not None else None

    def add_ports(self, idx: int, ports: Iterable[tuple[str, str, int]], sign: int) -> None:
        for p in ports:
            own = self._ports.get(p)
            if own is None:
                base = self.arrays.ports.get(p)
                own = (
                    base[: self.n].copy() if base is not None else np.zeros(self.n, dtype=np.int32)
                )
                self._ports[p] = own
            own[idx] += sign


class Session:
    """One scheduling cycle over a cache (see module docstring)."""

    def __init__(
        self,
        cache: ClusterCache,
        config: SchedulerConfig,
        *,
        now: float,
        uid: str | None = None,
    ) -> None:
        t0 = time.perf_counter()
        self.cache = cache
        self.config = config
        self.now = now
        self.uid = uid or f"session-{cache.generation}-{int(now * 1000)}"
        self.resources = cache.resources
        self.nodes = SessionNodes(cache)
        nd = self.nodes
        self.total_resource: IntVec = nd.alloc[:, nd.valid].sum(axis=1).astype(np.int64)
        self.queues: dict[str, QueueInfo] = cache.queues
        self.jobs: dict[str, JobInfo] = {}
        self.reasons: dict[str, PendingReason] = {}
        for job in cache.jobs.values():
            if job.podgroup is None:
                continue
            if job.queue not in self.queues:
                self.reasons[job.uid] = PendingReason(
                    job.uid, "QueueMissing", f"queue {job.queue!r} does not exist"
                )
                continue
            job.priority = cache.job_priority(job)
            self.jobs[job.uid] = job
        self.journal: list[tuple[TaskInfo, TaskStatus, str, int]] = []
        self.phase_journal: list[tuple[JobInfo, str]] = []
        #: job uid -> (job, its version before this session first changed it)
        self._versions: dict[str, tuple[JobInfo, int]] = {}
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
        # extension points: point -> tiers -> [(plugin name, fn)]
        self._fns: dict[str, list[list[tuple[str, Any]]]] = {}
        self._flat_cache: dict[str, list[Any]] = {}
        self._keys: dict[str, Callable[[Any], Any]] = {}
        self._ntiers = len(config.tiers)
        self._cur: tuple[int, PluginOption] | None = None
        self.handlers: list[tuple[Callable[[TaskInfo], None], Callable[[TaskInfo], None]]] = []
        self.plugins: list[Plugin] = []
        self._placer: Placer | None = None
        for ti, tier in enumerate(config.tiers):
            for opt in tier.plugins:
                plugin = PLUGINS[opt.name](Arguments(f"plugin {opt.name}", opt.arguments))
                plugin.option = opt
                self.plugins.append(plugin)
                self._cur = (ti, opt)
                t_plugin = time.perf_counter()
                plugin.on_session_open(self)
                self.plugin_timings[(opt.name, "OnSessionOpen")] = time.perf_counter() - t_plugin
        self._cur = None
        self.timings["open"] = time.perf_counter() - t0

    # -- metrics ---------------------------------------------------------------------------
    def publish_queue_metrics(
        self,
        queue: str,
        *,
        deserved: npt.NDArray[Any],
        real_capacity: npt.NDArray[Any],
        inqueue: npt.NDArray[Any],
        request: npt.NDArray[Any] | None,
        share: float,
        overused: bool,
    ) -> None:
        """Record what a fair-share plugin computed for ``queue`` (exported as metrics)."""
        self.queue_metrics[queue] = QueueMetrics(
            self.resources.names, deserved, real_capacity, inqueue, request, share, overused
        )

    # -- registration ----------------------------------------------------------------------
    def plugin_option(self, name: str) -> PluginOption | None:
        return self.config.plugin(name)

    def _add(self, point: str, fn: Any, *, gate: str | None = None) -> None:
        if self._cur is None:
            raise RuntimeError("extension points can only be registered during on_session_open")
        ti, opt = self._cur
        if not opt.enabled(gate or point):
            return
        tiers = self._fns.get(point)
        if tiers is None:
            tiers = self._fns[point] = [[] for _ in range(self._ntiers)]
        tiers[ti].append((opt.name, fn))
        self._flat_cache.pop(point, None)
        self._keys.pop(point, None)

    def _flat(self, point: str) -> list[Any]:
        got = self._flat_cache.get(point)
        if got is None:
            got = [fn for tier in self._fns.get(point, ()) for _, fn in tier]
            if self._cur is None:
                self._flat_cache[point] = got
        return got

    def has(self, point: str) -> bool:
        return bool(self._flat(point))

    def add_job_order_key(self, fn: Callable[[JobInfo], Any]) -> None:
        self._add("job_order", ("key", fn))

    def add_job_order_fn(self, fn: JobCmp) -> None:
        self._add("job_order", ("cmp", fn))

    def add_queue_order_key(self, fn: Callable[[QueueInfo], Any]) -> None:
        self._add("queue_order", ("key", fn))

    def add_queue_order_fn(self, fn: QueueCmp) -> None:
        self._add("queue_order", ("cmp", fn))

    def add_task_order_key(self, fn: Callable[[TaskInfo], Any]) -> None:
        self._add("task_order", ("key", fn))

    def add_task_order_fn(self, fn: TaskCmp) -> None:
        self._add("task_order", ("cmp", fn))

    def add_victim_queue_order_fn(
        self, fn: Callable[[QueueInfo, QueueInfo, QueueInfo], int]
    ) -> None:
        self._add("victim_queue_order", fn)

    def add_batch_predicate(self, fn: BatchPredicate) -> None:
        self._add("predicate", ("batch", fn))

    def add_dynamic_predicate(self, fn: DynamicPredicate, *, per_job: bool = False) -> None:
        """``per_job``: the answer depends on which job the task belongs to (not only on its
        template and the in-session placements), so failures and explanations of one job may
        not be reused for another of the same shape."""
        self._add("predicate", ("dynamic-job" if per_job else "dynamic", fn))

    def add_predicate_fn(self, fn: ScalarPredicate) -> None:
        self._add("predicate", ("scalar", fn))

    def add_pre_predicate_fn(self, fn: Callable[[TaskInfo], str | None]) -> None:
        self._add("pre_predicate", fn)

    def add_batch_node_order_fn(self, fn: BatchScore) -> None:
        self._add("node_order", ("batch", fn))

    def add_static_node_order_fn(self, fn: StaticScore) -> None:
        self._add("node_order", ("static", fn))

    def add_node_order_fn(self, fn: ScalarScore) -> None:
        self._add("node_order", ("scalar", fn))

    def add_best_node_fn(self, fn: Callable[[TaskInfo, dict[int, float]], int | None]) -> None:
        self._add("best_node", fn)

    def add_preemptable_fn(self, fn: Victims) -> None:
        self._add("preemptable", fn)

    def add_reclaimable_fn(self, fn: Victims) -> None:
        self._add("reclaimable", fn)

    def add_unified_evictable_fn(self, fn: Victims) -> None:
        self._add("unified_evictable", fn)

    def add_overused_fn(self, fn: Callable[[QueueInfo], bool]) -> None:
        self._add("overused", fn)

    def add_allocatable_fn(self, fn: Callable[[QueueInfo, TaskInfo], bool]) -> None:
        self._add("allocatable", fn)

    def add_preemptive_fn(self, fn: Callable[[QueueInfo, Sequence[TaskInfo]], bool]) -> None:
        self._add("preemptive", fn)

    def add_job_ready_fn(self, fn: Callable[[JobInfo], bool]) -> None:
        self._add("job_ready", fn)

    def add_job_pipelined_fn(self, fn: Callable[[JobInfo], int]) -> None:
        self._add("job_pipelined", fn)

    def add_job_valid_fn(self, fn: Callable[[JobInfo], ValidateResult | None]) -> None:
        self._add("job_valid", fn)

    def add_job_enqueueable_fn(self, fn: Callable[[JobInfo], int]) -> None:
        self._add("job_enqueueable", fn)

    def add_job_enqueued_fn(self, fn: Callable[[JobInfo], None]) -> None:
        self._add("job_enqueued", fn)

    def add_job_starving_fn(self, fn: Callable[[JobInfo], bool]) -> None:
        self._add("job_starving", fn)

    def add_target_job_fn(self, fn: Callable[[list[JobInfo]], JobInfo | None]) -> None:
        self._add("target_job", fn)

    def add_reserved_nodes_fn(self, fn: Callable[[], None]) -> None:
        self._add("reserved_nodes", fn)

    def add_victim_tasks_fn(self, fn: Callable[[list[TaskInfo]], list[TaskInfo]]) -> None:
        self._add("victim_tasks", fn)

    def add_hypernode_order_fn(self, fn: Callable[..., dict[str, float]]) -> None:
        self._add("hypernode_order", fn)

    def add_hypernode_gradient_fn(self, fn: Callable[..., list[list[str]]]) -> None:
        self._add("hypernode_gradient", fn)

    def add_victim_guard(self, fn: VictimGuard) -> None:
        """A hard victim filter of preempt/reclaim, applied after the tiers (framework/eviction)."""
        self._add("victim_guard", fn)

    def add_deserved_fn(self, fn: Callable[[str], FloatVec | None]) -> None:
        """A fair-share plugin's deserved vector of a queue (None: not computed for it)."""
        self._add("deserved", fn)

    def add_queue_at_deserved_fn(self, fn: Callable[[str], bool]) -> None:
        """True while a queue's allocation is within its deserved share on every resource."""
        self._add("queue_at_deserved", fn)

    def add_victim_job_floor_fn(self, point: str, fn: Callable[[JobInfo], bool]) -> None:
        """At ``point`` ("preemptable"|"reclaimable") this plugin never gives a task of a job for
        which ``fn`` is true (lets strict victim selection drop such jobs up front)."""
        self._add(f"{point}_job_floor", fn, gate=point)

    def add_victim_queue_floor_fn(self, point: str, fn: Callable[[str], bool]) -> None:
        """As ``add_victim_job_floor_fn``, for every task of a queue (by name)."""
        self._add(f"{point}_queue_floor", fn, gate=point)

    def add_topology_preemption(self, provider: TopologyPreemption) -> None:
        """The HyperNode domains topology-aware preemption tries, one after the other."""
        self._add("topology_preemption", provider)

    def add_event_handler(
        self,
        on_allocate: Callable[[TaskInfo], None],
        on_deallocate: Callable[[TaskInfo], None],
    ) -> None:
        self.handlers.append((on_allocate, on_deallocate))

    # -- orders ----------------------------------------------------------------------------
    def _order_key(self, point: str, fallback: Callable[[Any], Any]) -> Callable[[Any], Any]:
        entries: list[tuple[str, Any]] = self._flat(point)
        if all(kind == "key" for kind, _ in entries):
            fns = [fn for _, fn in entries]
            if not fns:
                return lambda x: (*fallback(x),)
            if len(fns) == 1:
                f0 = fns[0]
                return lambda x: (f0(x), *fallback(x))
            if len(fns) == 3:
                f0, f1, f2 = fns
                return lambda x: (f0(x), f1(x), f2(x), *fallback(x))
            return lambda x: (*(f(x) for f in fns), *fallback(x))

        def cmp(a: Any, b: Any) -> int:
            for kind, fn in entries:
                if kind == "key":
                    ka, kb = fn(a), fn(b)
                    r = -1 if ka < kb else (1 if kb < ka else 0)
                else:
                    r = fn(a, b)
                if r:
                    return int(r)
            fa, fb = fallback(a), fallback(b)
            return -1 if fa < fb else (1 if fb < fa else 0)

        return functools.cmp_to_key(cmp)

    def _cached_key(self, point: str, fallback: Callable[[Any], Any]) -> Callable[[Any], Any]:
        got = self._keys.get(point)
        if got is None:
            got = self._order_key(point, fallback)
            if self._cur is None:
                self._keys[point] = got
        return got

    def job_order_key(self) -> Callable[[JobInfo], Any]:
        return self._cached_key("job_order", lambda j: (j.creation, j.uid))

    def queue_order_key(self) -> Callable[[QueueInfo], Any]:
        return self._cached_key("queue_order", lambda q: (q.creation, q.uid))

    def task_order_key(self) -> Callable[[TaskInfo], Any]:
        return self._cached_key("task_order", TaskInfo.sort_key)

    def victim_queue_order(self, a: QueueInfo, b: QueueInfo, preemptor: QueueInfo) -> int:
        for fn in self._flat("victim_queue_order"):
            r = int(fn(a, b, preemptor))
            if r:
                return r
        key = self.queue_order_key()
        ka, kb = key(a), key(b)
        return 1 if ka < kb else (-1 if kb < ka else 0)

    # -- boolean and vote dispatch ---------------------------------------------------------
    def overused(self, queue: QueueInfo) -> bool:
        return any(fn(queue) for fn in self._flat("overused"))

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        return all(fn(queue, task) for fn in self._flat("allocatable"))

    def preemptive(self, queue: QueueInfo, tasks: Sequence[TaskInfo]) -> bool:
        return all(fn(queue, tasks) for fn in self._flat("preemptive"))

    def job_ready(self, job: JobInfo) -> bool:
        return all(fn(job) for fn in self._flat("job_ready"))

    def _vote(self, point: str, job: JobInfo) -> tuple[bool, str]:
        for tier in self._fns.get(point, ()):
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
        return self._vote("job_pipelined", job)[0]

    def job_enqueueable(self, job: JobInfo) -> tuple[bool, str]:
        """(permitted, name of the rejecting plugin or '')."""
        return self._vote("job_enqueueable", job)

    def job_enqueued(self, job: JobInfo) -> None:
        for fn in self._flat("job_enqueued"):
            fn(job)

    def job_valid(self, job: JobInfo) -> ValidateResult | None:
        for fn in self._flat("job_valid"):
            r: ValidateResult | None = fn(job)
            if r is not None and not r.passed:
                return r
        return None

    def job_starving(self, job: JobInfo) -> bool:
        for tier in self._fns.get("job_starving", ()):
            if tier:
                return all(fn(job) for _, fn in tier)
        return False

    def pre_predicate(self, task: TaskInfo) -> str | None:
        for fn in self._flat("pre_predicate"):
            err = fn(task)
            if err:
                return str(err)
        return None

    def victims(
        self, point: str, preemptor: TaskInfo, candidates: list[TaskInfo]
    ) -> list[TaskInfo]:
        """Volcano's tiered victim choice at ``point``: per-tier intersection, first tier with an
        answer decides."""
        for tier in self._fns.get(point, ()):
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

    def preemptable(self, preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        return self.victims("preemptable", preemptor, candidates)

    def reclaimable(self, reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        return self.victims("reclaimable", reclaimer, candidates)

    def victim_tasks(self, tasks: list[TaskInfo]) -> list[TaskInfo]:
        for tier in self._fns.get("victim_tasks", ()):
            out: dict[str, TaskInfo] = {}
            for _, fn in tier:
                for t in fn(tasks):
                    out[t.uid] = t
            if out:
                return list(out.values())
        return []

    def target_job(self, jobs: list[JobInfo]) -> JobInfo | None:
        for fn in self._flat("target_job"):
            return fn(jobs)  # type: ignore[no-any-return]
        return None

    def victim_guards(self) -> list[VictimGuard]:
        return self._flat("victim_guard")

    def deserved(self, queue: str) -> FloatVec | None:
        """The first fair-share plugin's deserved vector of ``queue`` (None without one)."""
        for fn in self._flat("deserved"):
            got: FloatVec | None = fn(queue)
            if got is not None:
                return got
        return None

    def queue_at_deserved(self) -> Callable[[str], bool] | None:
        """The fair-share rule "allocated <= deserved" by queue name (None without one)."""
        fns: list[Callable[[str], bool]] = self._flat("queue_at_deserved")
        return fns[0] if fns else None

    def victim_job_floor(self, point: str) -> Callable[[JobInfo], bool] | None:
        fns: list[Callable[[JobInfo], bool]] = self._flat(f"{point}_job_floor")
        if not fns:
            return None
        if len(fns) == 1:
            return fns[0]
        return lambda j: any(fn(j) for fn in fns)

    def victim_queue_floor(self, point: str) -> Callable[[str], bool] | None:
        fns: list[Callable[[str], bool]] = self._flat(f"{point}_queue_floor")
        if not fns:
            return None
        if len(fns) == 1:
            return fns[0]
        return lambda q: any(fn(q) for fn in fns)

    def topology_preemption(self) -> TopologyPreemption | None:
        got: list[TopologyPreemption] = self._flat("topology_preemption")
        return got[0] if got else None

    def victims_strict(
        self, point: str, preemptor: TaskInfo, candidates: list[TaskInfo]
    ) -> list[TaskInfo]:
        """Every non-abstaining callback of every tier filters the candidates in turn (none
        answering: no victims)."""
        victims = list(candidates)
        answered = False
        for tier in self._fns.get(point, ()):
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

    # -- placement engine ------------------------------------------------------------------
    @property
    def placer(self) -> Placer:
        if self._placer is None:
            from batch.scheduler.framework.placement import Placer

            self._placer = Placer(self)
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
            self._versions[job.uid] = (job, job.version)

    def place(self, task: TaskInfo, idx: int, status: TaskStatus) -> None:
        """Pending ``task`` -> Allocated/Pipelined on node ``idx`` (fires allocate handlers)."""
        nd = self.nodes
        self._journal(task, task.status)
        req = task.req
        if status is TaskStatus.PIPELINED:
            nd.pipelined[:, idx] += req
            nd.has_future = True
        else:
            nd.used[:, idx] += req
            nd.idle[:, idx] -= req
        nd.log.append(idx)
        if task.template.host_ports:
            nd.add_ports(idx, task.template.host_ports, 1)
        nd.placed.setdefault(idx, []).append(task)
        if task.template.pod_anti_affinity:
            nd.placed_anti += 1
        job = self._job_of(task)
        if job is not None:
            job.set_status(task, status)
        else:
            task.status = status
        task.node_name = nd.name(idx)
        task.node_idx = idx
        for on_alloc, _ in self.handlers:
            on_alloc(task)

    def unplace(self, task: TaskInfo) -> None:
        """Undo ``place`` (task back to Pending; fires deallocate handlers)."""
        nd = self.nodes
        idx = task.node_idx
        self._journal(task, task.status)
        req = task.req
        if task.status is TaskStatus.PIPELINED:
            nd.pipelined[:, idx] -= req
        else:
            nd.used[:, idx] -= req
            nd.idle[:, idx] += req
        nd.log.append(idx)
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
        for _, on_dealloc in self.handlers:
            on_dealloc(task)

    def evict(self, task: TaskInfo) -> TaskStatus:
        """Running/Bound ``task`` -> Releasing (fires deallocate handlers); returns old status."""
        nd = self.nodes
        old = task.status
        self._journal(task, old)
        if task.node_idx >= 0:
            nd.releasing[:, task.node_idx] += task.req
            nd.has_future = True
            nd.log.append(task.node_idx)
        job = self.jobs.get(task.job_id) if task.job_id else None
        if job is not None:
            job.set_status(task, TaskStatus.RELEASING)
        else:
            task.status = TaskStatus.RELEASING
        for _, on_dealloc in self.handlers:
            on_dealloc(task)
        return old

    def unevict(self, task: TaskInfo, status: TaskStatus) -> None:
        nd = self.nodes
        self._journal(task, task.status)
        if task.node_idx >= 0:
            nd.releasing[:, task.node_idx] -= task.req
            nd.log.append(task.node_idx)
        job = self.jobs.get(task.job_id) if task.job_id else None
        if job is not None:
            job.set_status(task, status)
        else:
            task.status = status
        for on_alloc, _ in self.handlers:
            on_alloc(task)

    def set_status(self, task: TaskInfo, status: TaskStatus) -> None:
        """Status change without resource effect (Allocated -> Binding at commit)."""
        self._journal(task, task.status)
        job = self._job_of(task)
        if job is not None:
            job.set_status(task, status)
        else:
            task.status = status

    def set_phase(self, job: JobInfo, phase: str) -> None:
        self.phase_journal.append((job, job.phase))
        if job.uid not in self._versions:
            self._versions[job.uid] = (job, job.version)
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
        self._fns.clear()
        self._flat_cache.clear()
        self._keys.clear()
        self.handlers.clear()
        self.plugins.clear()
        self._placer = None
        self.scratch.clear()

    def rollback(self) -> None:
        """Undo every in-session change to cache objects (called by ``close``)."""
        for task, status, node_name, node_idx in reversed(self.journal):
            job = self.jobs.get(task.job_id) if task.job_id else None
            if job is not None and task.uid in job.tasks:
                job.set_status(task, status)
            else:
                task.status = status
            task.node_name = node_name
            task.node_idx = node_idx
        self.journal.clear()
        for job, phase in reversed(self.phase_journal):
            job.phase = phase
        self.phase_journal.clear()
        for job, version in self._versions.values():
            job.version = version
        self._versions.clear()
