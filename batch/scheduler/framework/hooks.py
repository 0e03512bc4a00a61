"""The extension points of a session: one typed point per hook, filled by plugins at open.

A plugin's ``on_session_open`` registers callbacks through ``ssn.hooks.add_*``; each point keeps
its callbacks per tier with the name of the plugin that registered them, so ``Dispatch``
(framework/dispatch.py) can apply Volcano's tier rules (docs/volcano-semantics.md#tiers). Every
point is a ``Point`` of one callback type, so mypy checks each callback against the hook it is given
to. Points that take several kinds of callback (orders: a sort key or a comparison; predicates and
node scores: vector, per-task or scalar) wrap them in a small frozen dataclass per kind.

A configuration's enable switches (``enablePreemptable: false``, ...) turn points off per plugin:
a callback for a switched-off point is dropped at registration (``PluginOption.enabled``).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeAlias, TypeVar

import numpy as np
import numpy.typing as npt

from batch.model.info import JobInfo, QueueInfo, TaskInfo, TaskTemplate
from batch.model.resources import IntVec
from batch.scheduler.framework.nodes import BoolVec, FloatVec, SessionNodes

if TYPE_CHECKING:
    from batch.scheduler.framework.conf import PluginOption

T = TypeVar("T")
F = TypeVar("F")

#: vector filter: (template, nodes) -> [(kube-style reason, failing-node mask)], in order
BatchPredicate = Callable[[TaskTemplate, SessionNodes], list[tuple[str, BoolVec]]]
#: per-task filter over nodes that depends on in-session state (ports, inter-pod affinity)
DynamicPredicate = Callable[[TaskInfo, SessionNodes], list[tuple[str, BoolVec]]]
#: scalar filter for one (task, node index): None = fits, else the reason
ScalarPredicate = Callable[[TaskInfo, int], str | None]
#: dynamic score over node indexes ``idx`` (an int array or a full slice)
#: (an int ``idx`` asks for one node's score as a float: the per-placement fast path)
BatchScore = Callable[[TaskTemplate, SessionNodes, Any], Any]
#: static (state-independent) score over all nodes, computed once per template and session
StaticScore = Callable[[TaskTemplate, SessionNodes, BoolVec], FloatVec]
ScalarScore = Callable[[TaskInfo, int], float]
#: Preemptable/Reclaimable: (preemptor, candidates) -> (victims, vote)
Victims = Callable[[TaskInfo, list[TaskInfo]], tuple[list[TaskInfo], int]]
#: a hard victim filter: (point "preemptable"|"reclaimable", preemptor, victims) -> kept victims
VictimGuard = Callable[[str, TaskInfo, list[TaskInfo]], list[TaskInfo]]
JobCmp = Callable[[JobInfo, JobInfo], int]
QueueCmp = Callable[[QueueInfo, QueueInfo], int]
TaskCmp = Callable[[TaskInfo, TaskInfo], int]
#: (victim queue a, victim queue b, preemptor's queue) -> <0 when a should give first
VictimQueueCmp = Callable[[QueueInfo, QueueInfo, QueueInfo], int]
#: which evicting point a victim floor or guard is about
VICTIM_POINTS = ("preemptable", "reclaimable")
#: what a plugin declares of a job callback's answers (``Hooks.add_job_order_key`` and the
#: other job points): False (the default) — they may read session state; True — they read only
#: the job, in the state its ``JobInfo.version`` names, and its ``priority``; a function — they
#: read that and what the function returns (a hashable token, asked once a session). Answers
#: declared so are kept across sessions by job version (``framework/jobmemo.py``).
Pure: TypeAlias = bool | Callable[[], object]
#: ``Point.clear`` puts back a snapshot of each tier's kept entries, and only in the tiers
#: that were given entries since (exact; tests switch it off to compare)
CLEAR_TO_SNAPSHOT = True
#: ``Point.purity`` works out which entries a point holds once per point version (it asks the
#: tokens every time; exact; tests switch it off to compare)
PURITY_BY_VERSION = True


@dataclass(slots=True, frozen=True)
class ValidateResult:
    passed: bool
    reason: str = ""
    message: str = ""


class TopologyPreemption(Protocol):
    """What topology-aware preemption needs of the network-topology plugin."""

    def preemption_domains(self, job: JobInfo) -> Sequence[object]:
        """Domains to try for ``job``, best first."""

    def pin(self, job: JobInfo, domain: Any) -> None:
        """Keep ``job``'s placement inside ``domain`` until ``unpin``."""

    def unpin(self, job: JobInfo) -> None: ...

    def domain_nodes(self, domain: Any) -> npt.NDArray[np.intp]:
        """The node indexes of ``domain``."""


@dataclass(slots=True, frozen=True)
class OrderKey(Generic[T]):
    """An order given as a sort key (compared with ``<``; the cheap form)."""

    fn: Callable[[T], Any]


@dataclass(slots=True, frozen=True)
class OrderCmp(Generic[T]):
    """An order given as a three-way comparison (Volcano's ``LessFn`` form)."""

    fn: Callable[[T, T], int]


Order: TypeAlias = OrderKey[T] | OrderCmp[T]


@dataclass(slots=True, frozen=True)
class BatchPredicateHook:
    fn: BatchPredicate


@dataclass(slots=True, frozen=True)
class DynamicPredicateHook:
    fn: DynamicPredicate
    #: the answer depends on the job, not only on the template and in-session placements
    per_job: bool


@dataclass(slots=True, frozen=True)
class ScalarPredicateHook:
    fn: ScalarPredicate


PredicateHook: TypeAlias = BatchPredicateHook | DynamicPredicateHook | ScalarPredicateHook


@dataclass(slots=True, frozen=True)
class BatchScoreHook:
    fn: BatchScore
    #: node i's score reads only node i's ``alloc`` and ``used`` columns and the template
    local: bool = False


@dataclass(slots=True, frozen=True)
class StaticScoreHook:
    fn: StaticScore


@dataclass(slots=True, frozen=True)
class ScalarScoreHook:
    fn: ScalarScore


ScoreHook: TypeAlias = BatchScoreHook | StaticScoreHook | ScalarScoreHook


@dataclass(slots=True, frozen=True)
class EventHandler:
    """Called after every in-session allocation and deallocation (Volcano's EventHandler)."""

    on_allocate: Callable[[TaskInfo], None]
    on_deallocate: Callable[[TaskInfo], None]


class DeferredQueues(Protocol):
    """A fair-share plugin's queue answers with its allocation handler's work deferred:
    allocate asks these instead of the QueueOrder key, Overused and Allocatable callbacks and
    the event handler they stand for (``stands_for``), calls ``allocated`` instead of the
    handler's ``on_allocate`` and ``flush`` before anything else reads or changes the plugin's
    queues. Exact: the same answers, and after ``flush`` the same state, as the handler called
    after each placement (``Dispatch.deferred_queues``)."""

    def stands_for(
        self,
    ) -> tuple[
        Callable[[QueueInfo], Any],
        Callable[[QueueInfo], bool],
        Callable[[QueueInfo, TaskInfo], bool],
        EventHandler,
    ]: ...

    def key(self, queue: QueueInfo) -> Any: ...

    def overused(self, queue: QueueInfo) -> bool: ...

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool: ...

    def allocated(self, task: TaskInfo) -> None: ...

    def flush(self) -> None: ...


class Point(Generic[F]):
    """One extension point: (plugin name, callback) per tier, in the order of the plugins
    that registered them (registration order within a plugin)."""

    __slots__ = (
        "_base",
        "_flat",
        "_purity",
        "gate",
        "kept",
        "name",
        "pure",
        "ranks",
        "tiers",
        "version",
    )

    def __init__(self, name: str, ntiers: int, *, gate: str | None = None) -> None:
        self.name = name
        #: the extension point whose enable switch turns this one off (default: its own name)
        self.gate = gate or name
        self.tiers: list[list[tuple[str, F]]] = [[] for _ in range(ntiers)]
        #: per tier, the rank (``Hooks.begin``) of the plugin that registered each entry
        self.ranks: list[list[int]] = [[] for _ in range(ntiers)]
        #: per tier, what each entry's plugin declared of its answers (``Pure``)
        self.pure: list[list[Pure]] = [[] for _ in range(ntiers)]
        #: per tier, which entries ``clear`` keeps (registered in a ``Hooks.keep`` window)
        self.kept: list[list[bool]] = [[] for _ in range(ntiers)]
        self._flat: list[F] | None = None
        self.version = 0
        #: per tier, its kept entries (``tiers``, ``ranks``, ``pure``, ``kept``), as ``clear``
        #: leaves them; None until a ``clear`` works it out (a kept ``add`` forgets it)
        self._base: list[tuple[tuple[Any, ...], ...]] | None = None
        #: (version, ``_entries()`` at that version): what ``purity`` asks of the entries
        self._purity: tuple[int, tuple[object, ...] | None, tuple[Callable[[], object], ...]] = (
            -1,
            None,
            (),
        )

    def add(
        self, tier: int, plugin: str, fn: F, rank: int = 0, pure: Pure = False, kept: bool = False
    ) -> None:
        """Add ``fn`` after the entries of plugins ranked up to ``rank`` (kept entries of
        later plugins stay after it); ``kept``: ``clear`` leaves it."""
        ranks = self.ranks[tier]
        at = len(ranks) if not ranks or ranks[-1] <= rank else bisect_right(ranks, rank)
        self.tiers[tier].insert(at, (plugin, fn))
        ranks.insert(at, rank)
        self.pure[tier].insert(at, pure)
        self.kept[tier].insert(at, kept)
        self._flat = None
        self.version += 1
        if kept:
            self._base = None

    def purity(self) -> tuple[tuple[object, ...], tuple[object, ...]] | None:
        """When every entry declared its answers pure per job (``Pure``): which entries these
        are (plugin, rank, code, tier by tier) and the tokens the declared ones give now;
        None when an entry did not declare it."""
        got = self._purity
        if got[0] != self.version or not PURITY_BY_VERSION:
            got = self._purity = (self.version, *self._entries())
        entries, tokens = got[1], got[2]
        if entries is None:
            return None
        return entries, tuple([p() for p in tokens]) if tokens else ()

    def _entries(self) -> tuple[tuple[object, ...] | None, tuple[Callable[[], object], ...]]:
        """``purity``'s entries (None when one is not pure) and the token functions, in order."""
        entries: list[object] = []
        tokens: list[Callable[[], object]] = []
        for ti, (tier, ranks, pure) in enumerate(
            zip(self.tiers, self.ranks, self.pure, strict=True)
        ):
            for (plugin, fn), rank, p in zip(tier, ranks, pure, strict=True):
                if p is False:
                    return None, ()
                entries.append((ti, plugin, rank, _code_of(fn)))
                if p is not True:
                    tokens.append(p)
        return tuple(entries), tuple(tokens)

    def flat(self) -> list[F]:
        """Every callback, tier by tier."""
        if self._flat is None:
            self._flat = [fn for tier in self.tiers for _, fn in tier]
        return self._flat

    def __bool__(self) -> bool:
        return bool(self.flat())

    def clear(self) -> None:
        """Drop every entry but the kept ones: a kept plugin's callbacks of one session (drf's
        hierarchy) go with it as any other plugin's."""
        if CLEAR_TO_SNAPSHOT:
            self._restore()
            return
        for i, kept in enumerate(self.kept):
            if all(kept):
                continue
            some = any(kept)
            _keep_only(self.tiers[i], kept, some)
            _keep_only(self.ranks[i], kept, some)
            _keep_only(self.pure[i], kept, some)
            _keep_only(kept, kept, some)
        self._flat = None
        self.version += 1

    def _restore(self) -> None:
        """``clear`` by the snapshot of the kept entries: entries are only ever added between
        two clears, so a tier as long as its snapshot holds just those."""
        base = self._base
        if base is None:
            base = self._base = [
                tuple(_kept_of(vs, kept) for vs in (tier, ranks, pure, kept))
                for tier, ranks, pure, kept in zip(
                    self.tiers, self.ranks, self.pure, self.kept, strict=True
                )
            ]
        for i, (fns, ranks, pure, kept) in enumerate(base):
            if len(self.tiers[i]) != len(fns):
                self.tiers[i][:] = fns
                self.ranks[i][:] = ranks
                self.pure[i][:] = pure
                self.kept[i][:] = kept
        self._flat = None
        self.version += 1


def _kept_of(values: list[Any], kept: list[bool]) -> tuple[Any, ...]:
    return tuple(v for v, k in zip(values, kept, strict=True) if k)


def _keep_only(values: list[T], kept: list[bool], some: bool) -> None:
    """Leave the ``values`` whose ``kept`` flag is set (``some``: any is)."""
    if some:
        values[:] = [v for v, k in zip(values, kept, strict=True) if k]
    else:
        values.clear()


def _code_of(fn: object) -> object:
    """What tells two sessions' callbacks apart: the code of the function (a closure made
    again each session has the same), through an order's wrapper."""
    inner = getattr(fn, "fn", fn)
    return getattr(inner, "__code__", type(inner))


def _victim_points(name: str, ntiers: int) -> dict[str, Point[Any]]:
    return {p: Point(f"{p}_{name}", ntiers, gate=p) for p in VICTIM_POINTS}


class Opening(Protocol):
    """What ``Hooks.open_plugin`` needs of a plugin (``session.SessionPlugin``)."""

    keeps_callbacks: ClassVar[bool]
    ssn: Any

    def register_kept(self, hooks: Hooks) -> None: ...

    def on_session_open(self, ssn: Any) -> None: ...


class Hooks:
    """The typed extension points of one session and the registration API plugins use."""

    def __init__(self, ntiers: int) -> None:
        n = ntiers
        self.job_order: Point[Order[JobInfo]] = Point("job_order", n)
        self.queue_order: Point[Order[QueueInfo]] = Point("queue_order", n)
        self.task_order: Point[Order[TaskInfo]] = Point("task_order", n)
        self.victim_queue_order: Point[VictimQueueCmp] = Point("victim_queue_order", n)
        self.predicate: Point[PredicateHook] = Point("predicate", n)
        self.pre_predicate: Point[Callable[[TaskInfo], str | None]] = Point("pre_predicate", n)
        self.node_order: Point[ScoreHook] = Point("node_order", n)
        self.best_node: Point[Callable[[TaskInfo, dict[int, float]], int | None]] = Point(
            "best_node", n
        )
        self.preemptable: Point[Victims] = Point("preemptable", n)
        self.reclaimable: Point[Victims] = Point("reclaimable", n)
        self.unified_evictable: Point[Victims] = Point("unified_evictable", n)
        self.overused: Point[Callable[[QueueInfo], bool]] = Point("overused", n)
        self.allocatable: Point[Callable[[QueueInfo, TaskInfo], bool]] = Point("allocatable", n)
        self.preemptive: Point[Callable[[QueueInfo, Sequence[TaskInfo]], bool]] = Point(
            "preemptive", n
        )
        self.job_ready: Point[Callable[[JobInfo], bool]] = Point("job_ready", n)
        self.job_pipelined: Point[Callable[[JobInfo], int]] = Point("job_pipelined", n)
        self.job_valid: Point[Callable[[JobInfo], ValidateResult | None]] = Point("job_valid", n)
        self.job_enqueueable: Point[Callable[[JobInfo], int]] = Point("job_enqueueable", n)
        self.job_enqueued: Point[Callable[[JobInfo], None]] = Point("job_enqueued", n)
        self.job_starving: Point[Callable[[JobInfo], bool]] = Point("job_starving", n)
        self.target_job: Point[Callable[[list[JobInfo]], JobInfo | None]] = Point("target_job", n)
        self.reserved_nodes: Point[Callable[[], None]] = Point("reserved_nodes", n)
        self.victim_tasks: Point[Callable[[list[TaskInfo]], list[TaskInfo]]] = Point(
            "victim_tasks", n
        )
        self.hypernode_order: Point[Callable[..., dict[str, float]]] = Point("hypernode_order", n)
        self.hypernode_gradient: Point[Callable[..., list[list[str]]]] = Point(
            "hypernode_gradient", n
        )
        # Tephra's points: what actions used to ask of a plugin by its name
        self.victim_guard: Point[VictimGuard] = Point("victim_guard", n)
        self.deserved: Point[Callable[[str], FloatVec | None]] = Point("deserved", n)
        self.queue_at_deserved: Point[Callable[[str], bool]] = Point("queue_at_deserved", n)
        self.held_beyond_share: Point[Callable[[JobInfo], IntVec | None]] = Point(
            "held_beyond_share", n
        )
        self.job_floor: dict[str, Point[Callable[[JobInfo], bool]]] = _victim_points("job", n)
        self.queue_floor: dict[str, Point[Callable[[str], bool]]] = _victim_points("queue", n)
        self.topology_preemption: Point[TopologyPreemption] = Point("topology_preemption", n)
        #: not tiered, not switchable; actions add their own during execute as well
        self.handlers: list[EventHandler] = []
        #: per session, like ``handlers`` (``add_deferred_queues``)
        self.deferred_queues: list[DeferredQueues] = []
        #: the registration window: tier, the plugin's option, its gates' answers (``_gates``)
        self._cur: tuple[int, PluginOption, dict[str, bool]] | None = None
        #: the rank of the plugin whose window is open (its position in the configuration)
        self._rank = -1
        #: ranks of plugins whose callbacks ``clear`` keeps (``keep``), with the plugin
        self._kept: dict[int, object] = {}
        self._keeping = False
        #: every point, and those given a callback since the last ``clear`` (what it empties)
        self._all: tuple[Point[Any], ...] = tuple(self._walk())
        self._filled: list[Point[Any]] = []
        #: per option (by id, with the option itself): which gates are enabled, as asked so
        #: far (a kit's hooks see the same options every session)
        self._gates: dict[int, tuple[PluginOption, dict[str, bool]]] = {}
        #: a session registered callbacks here and has not been released (``clear``) yet
        self.in_use = False

    # -- the registration window -------------------------------------------------------
    @contextmanager
    def opening(self, tier: int, option: PluginOption) -> Iterator[None]:
        """Callbacks registered inside belong to ``option``'s plugin in ``tier``."""
        self.begin(tier, option)
        try:
            yield
        finally:
            self.end()

    def begin(self, tier: int, option: PluginOption) -> None:
        """Open the registration window of ``option``'s plugin in ``tier`` (``opening``);
        the plugins of a session open in the configuration's order, each one rank further."""
        self._rank += 1
        kept = self._gates.get(id(option))
        if kept is None or kept[0] is not option:
            kept = self._gates[id(option)] = (option, {})
        self._cur = (tier, option, kept[1])
        self.in_use = True

    def end(self) -> None:
        self._cur = None
        self._keeping = False

    def kept(self, plugin: object) -> bool:
        """Are the callbacks ``plugin`` registers in the open window kept here already?"""
        return self._kept.get(self._rank) is plugin

    def keep(self) -> None:
        """Until ``kept_by``, the open window registers callbacks that ``clear`` keeps: they
        must read the session they answer for from a kept context (the plugin's ``ssn``), and
        their plugin must open at this rank with the same option every session. (A session
        whose open fails is never released: its hooks are not used again.)"""
        self._keeping = True

    def kept_by(self, plugin: object) -> None:
        """The callbacks registered since ``keep`` are ``plugin``'s; the open window registers
        this session's only again."""
        self._kept[self._rank] = plugin
        self._keeping = False

    def open_plugin(self, tier: int, option: PluginOption, plugin: Opening, ssn: object) -> None:
        """``plugin``'s open in its window, in one call: ``begin``; for a plugin that keeps
        callbacks, ``plugin.ssn`` set and, unless ``kept`` here already, its ``register_kept``
        between ``keep`` and ``kept_by``; its ``on_session_open``; ``end``."""
        self.begin(tier, option)
        try:
            if plugin.keeps_callbacks:
                plugin.ssn = ssn
                if self._kept.get(self._rank) is not plugin:
                    self._keeping = True
                    plugin.register_kept(self)
                    self._kept[self._rank] = plugin
                    self._keeping = False
            plugin.on_session_open(ssn)
        finally:
            self._cur = None
            self._keeping = False

    def _add(self, point: Point[F], fn: F, pure: Pure = False) -> None:
        if self._cur is None:
            raise RuntimeError("extension points can only be registered during on_session_open")
        tier, option, gates = self._cur
        gate = point.gate
        enabled = gates.get(gate)
        if enabled is None:
            enabled = gates[gate] = option.enabled(gate)
        if enabled:
            point.add(tier, option.name, fn, self._rank, pure, self._keeping)
            if not self._keeping:
                self._filled.append(point)

    def registering(self) -> bool:
        return self._cur is not None

    def _walk(self) -> Iterator[Point[Any]]:
        for value in vars(self).values():
            if isinstance(value, Point):
                yield value
            elif isinstance(value, dict):
                yield from value.values()

    def points(self) -> Iterator[Point[Any]]:
        return iter(self._all)

    def clear(self) -> None:
        """Drop every callback but the kept ones (``keep``; plugins' closures reference the
        session); the points are ready for the next session's plugins."""
        for point in set(self._filled):
            point.clear()
        self._filled.clear()
        self.handlers.clear()
        self.deferred_queues.clear()
        self.in_use = False
        self._rank = -1

    # -- orders --------------------------------------------------------------------------
    def add_job_order_key(self, fn: Callable[[JobInfo], Any], *, pure: Pure = False) -> None:
        """``pure``: see ``Pure`` (the key may then be kept across sessions by job version)."""
        self._add(self.job_order, OrderKey(fn), pure)

    def add_job_order_fn(self, fn: JobCmp) -> None:
        self._add(self.job_order, OrderCmp(fn))

    def add_queue_order_key(self, fn: Callable[[QueueInfo], Any]) -> None:
        self._add(self.queue_order, OrderKey(fn))

    def add_queue_order_fn(self, fn: QueueCmp) -> None:
        self._add(self.queue_order, OrderCmp(fn))

    def add_task_order_key(self, fn: Callable[[TaskInfo], Any]) -> None:
        self._add(self.task_order, OrderKey(fn))

    def add_task_order_fn(self, fn: TaskCmp) -> None:
        self._add(self.task_order, OrderCmp(fn))

    def add_victim_queue_order_fn(self, fn: VictimQueueCmp) -> None:
        self._add(self.victim_queue_order, fn)

    # -- placement -----------------------------------------------------------------------
    def add_batch_predicate(self, fn: BatchPredicate) -> None:
        self._add(self.predicate, BatchPredicateHook(fn))

    def add_dynamic_predicate(self, fn: DynamicPredicate, *, per_job: bool = False) -> None:
        """``per_job``: the answer depends on which job the task belongs to (not only on its
        template and the in-session placements), so failures and explanations of one job may
        not be reused for another of the same shape."""
        self._add(self.predicate, DynamicPredicateHook(fn, per_job))

    def add_predicate_fn(self, fn: ScalarPredicate) -> None:
        self._add(self.predicate, ScalarPredicateHook(fn))

    def add_pre_predicate_fn(self, fn: Callable[[TaskInfo], str | None]) -> None:
        self._add(self.pre_predicate, fn)

    def add_batch_node_order_fn(self, fn: BatchScore, *, local: bool = False) -> None:
        """``local``: a node's score reads only that node's ``alloc`` and ``used`` columns (and
        the template), so the engine may work it out for shifted ``used`` columns (the scores
        after more pods of one template, ``placement.Levels``)."""
        self._add(self.node_order, BatchScoreHook(fn, local))

    def add_static_node_order_fn(self, fn: StaticScore) -> None:
        self._add(self.node_order, StaticScoreHook(fn))

    def add_node_order_fn(self, fn: ScalarScore) -> None:
        self._add(self.node_order, ScalarScoreHook(fn))

    def add_best_node_fn(self, fn: Callable[[TaskInfo, dict[int, float]], int | None]) -> None:
        self._add(self.best_node, fn)

    def add_hypernode_order_fn(self, fn: Callable[..., dict[str, float]]) -> None:
        self._add(self.hypernode_order, fn)

    def add_hypernode_gradient_fn(self, fn: Callable[..., list[list[str]]]) -> None:
        self._add(self.hypernode_gradient, fn)

    def add_reserved_nodes_fn(self, fn: Callable[[], None]) -> None:
        self._add(self.reserved_nodes, fn)

    # -- victims -------------------------------------------------------------------------
    def add_preemptable_fn(self, fn: Victims) -> None:
        self._add(self.preemptable, fn)

    def add_reclaimable_fn(self, fn: Victims) -> None:
        self._add(self.reclaimable, fn)

    def add_unified_evictable_fn(self, fn: Victims) -> None:
        self._add(self.unified_evictable, fn)

    def add_victim_tasks_fn(self, fn: Callable[[list[TaskInfo]], list[TaskInfo]]) -> None:
        self._add(self.victim_tasks, fn)

    def add_victim_guard(self, fn: VictimGuard) -> None:
        """A hard victim filter of the evicting actions, applied after the tiers whatever tier
        the plugin sits in (actionlib/victims.py)."""
        self._add(self.victim_guard, fn)

    def add_victim_job_floor_fn(self, point: str, fn: Callable[[JobInfo], bool]) -> None:
        """At ``point`` ("preemptable"|"reclaimable") this plugin never gives a task of a job for
        which ``fn`` is true (strict victim selection drops such jobs up front)."""
        self._add(self.job_floor[point], fn)

    def add_victim_queue_floor_fn(self, point: str, fn: Callable[[str], bool]) -> None:
        """As ``add_victim_job_floor_fn``, for every task of a queue (by name)."""
        self._add(self.queue_floor[point], fn)

    def add_topology_preemption(self, provider: TopologyPreemption) -> None:
        """The HyperNode domains topology-aware preemption tries, one after the other."""
        self._add(self.topology_preemption, provider)

    # -- queues --------------------------------------------------------------------------
    def add_overused_fn(self, fn: Callable[[QueueInfo], bool]) -> None:
        self._add(self.overused, fn)

    def add_allocatable_fn(self, fn: Callable[[QueueInfo, TaskInfo], bool]) -> None:
        self._add(self.allocatable, fn)

    def add_preemptive_fn(self, fn: Callable[[QueueInfo, Sequence[TaskInfo]], bool]) -> None:
        self._add(self.preemptive, fn)

    def add_deserved_fn(self, fn: Callable[[str], FloatVec | None]) -> None:
        """A fair-share plugin's deserved vector of a queue (None: not computed for it)."""
        self._add(self.deserved, fn)

    def add_queue_at_deserved_fn(self, fn: Callable[[str], bool]) -> None:
        """True while a queue's allocation is within its deserved share on every resource."""
        self._add(self.queue_at_deserved, fn)

    def add_held_beyond_share_fn(self, fn: Callable[[JobInfo], IntVec | None]) -> None:
        """Fair share: what queues other than the job's hold (allocated or admitted) beyond
        their fair share and reclaim may give back, when the job's own queue stays within its
        share; an admission budget may count it as free for that job (None: nothing to give)."""
        self._add(self.held_beyond_share, fn)

    # -- jobs ----------------------------------------------------------------------------
    def add_job_ready_fn(self, fn: Callable[[JobInfo], bool]) -> None:
        self._add(self.job_ready, fn)

    def add_job_pipelined_fn(self, fn: Callable[[JobInfo], int]) -> None:
        self._add(self.job_pipelined, fn)

    def add_job_valid_fn(
        self, fn: Callable[[JobInfo], ValidateResult | None], *, pure: Pure = False
    ) -> None:
        self._add(self.job_valid, fn, pure)

    def add_job_enqueueable_fn(self, fn: Callable[[JobInfo], int]) -> None:
        self._add(self.job_enqueueable, fn)

    def add_job_enqueued_fn(self, fn: Callable[[JobInfo], None]) -> None:
        self._add(self.job_enqueued, fn)

    def add_job_starving_fn(self, fn: Callable[[JobInfo], bool], *, pure: Pure = False) -> None:
        self._add(self.job_starving, fn, pure)

    def add_target_job_fn(self, fn: Callable[[list[JobInfo]], JobInfo | None]) -> None:
        self._add(self.target_job, fn)

    # -- events --------------------------------------------------------------------------
    def add_event_handler(
        self,
        on_allocate: Callable[[TaskInfo], None],
        on_deallocate: Callable[[TaskInfo], None],
    ) -> EventHandler:
        """Follow in-session allocations (plugins at open, actions while they run; never a
        kept callback: handlers are dropped with the session)."""
        if self._keeping:
            raise RuntimeError("event handlers cannot be kept across sessions")
        handler = EventHandler(on_allocate, on_deallocate)
        self.handlers.append(handler)
        return handler

    def add_deferred_queues(self, deferred: DeferredQueues) -> None:
        """A fair-share plugin's queue answers with its handler deferred (``DeferredQueues``;
        per session, like event handlers)."""
        if self._keeping:
            raise RuntimeError("deferred queue answers cannot be kept across sessions")
        self.deferred_queues.append(deferred)
