"""The vector placement engine: fit masks, scores and node choice for one task at a time.

For every task template (tasks with the same requests and constraints share one) the engine keeps,
per session, the static predicate mask, the fit masks on Idle and on FutureIdle
(Idle + Releasing - Pipelined) and the summed node scores as numpy arrays over all nodes. After a
placement only the changed node's entries are recomputed (lazily, from the session's change log),
so placing a task costs a few vector operations (argmax over nodes) plus O(1) bookkeeping rather
than a Python loop over nodes.

Node choice follows Volcano's allocate: the nominated node first; then nodes that fit Idle (the
first gradient), else nodes that fit only FutureIdle (pipelining); highest total score wins, ties
go to the lowest node slot (deterministic, where Volcano picks at random). Optional kube-style
node sampling (minNodesToFind / minPercentageOfNodesToFind / percentageOfNodesToFind) limits the
scored candidates to the first k feasible nodes from a rotating start, like kube-scheduler.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable
from typing import Any, ClassVar

import numpy as np

from batch.model.cache import ClusterCache
from batch.model.info import TaskInfo, TaskTemplate
from batch.scheduler.framework.hooks import (
    BatchPredicate,
    BatchPredicateHook,
    BatchScore,
    BatchScoreHook,
    DynamicPredicate,
    DynamicPredicateHook,
    Hooks,
    ScalarPredicate,
    ScalarScore,
    StaticScore,
    StaticScoreHook,
)
from batch.scheduler.framework.nodes import BoolVec, FloatVec, SessionNodes

NEG = -np.inf


def resource_reason(name: str) -> str:
    return "Too many pods" if name == "pods" else f"Insufficient {name}"


#: a template's own placements caught up one node at a time before it gets ``Levels``
LEVELS_AFTER = 16

#: keep each template's from-scratch state (``KeptTemplates``) across sessions and refresh
#: only the nodes changed since (exact; tests switch it off to compare)
KEEP_TEMPLATES = True
#: templates ``KeptTemplates`` holds at most (the least recently used go first)
KEPT_LIMIT = 256


class Levels:
    """A template's node scores and Idle fits after j more of its own pods on each node,
    over the node state when built (``base``): level j of every node is one vector step
    (the scores of shifted ``used`` columns), made when a node first reaches it. ``lv[i]`` is
    how many of the template's pods the session placed on node i since (-1: node i changed
    otherwise, and is recomputed as before). ``heap`` holds (-value, node) for every value a
    node's Idle entry took since (the current one is its smallest entry that still matches):
    its head is argmax's answer, lowest node first on ties, without a pass over all nodes."""

    __slots__ = ("base", "fit", "heap", "lv", "score")

    def __init__(self, used: Any, m_idle: FloatVec) -> None:
        self.base = used.copy()
        self.lv: list[int] = [0] * len(m_idle)
        self.score: dict[int, FloatVec] = {}
        self.fit: dict[int, BoolVec] = {}
        idx = np.flatnonzero(m_idle > NEG)
        self.heap = list(zip((-m_idle[idx]).tolist(), idx.tolist(), strict=True))
        heapq.heapify(self.heap)

    def best(self, m_idle: FloatVec) -> int | None:
        """The node argmax over ``m_idle`` picks (None when no node fits)."""
        h = self.heap
        while h:
            neg, i = h[0]
            if m_idle[i] == -neg:
                return i
            heapq.heappop(h)
        return None


class TemplateState:
    __slots__ = (
        "dims",
        "fitv",
        "has_future",
        "levels",
        "m_fut",
        "m_idle",
        "own",
        "pos",
        "score",
        "static_ok",
        "static_reasons",
        "static_score",
        "tmpl",
    )

    def __init__(self, tmpl: TaskTemplate) -> None:
        self.tmpl = tmpl
        nz = np.flatnonzero(tmpl.fit > 0)
        self.dims: list[int] = [int(d) for d in nz]
        self.fitv: list[int] = [int(tmpl.fit[d]) for d in nz]
        self.static_ok: BoolVec = np.zeros(0, dtype=np.bool_)
        self.static_reasons: list[tuple[str, BoolVec]] = []
        self.static_score: FloatVec | None = None
        self.score: FloatVec = np.zeros(0)
        self.m_idle: FloatVec = np.zeros(0)
        self.m_fut: FloatVec = np.zeros(0)
        self.pos = 0
        self.has_future = False
        self.own = 0  # own placements caught up one node at a time (see LEVELS_AFTER)
        self.levels: Levels | None = None

    def copy(self) -> TemplateState:
        """A state to change on its own: fresh score and fit vectors, the static mask,
        reasons and score shared (nothing changes those in place)."""
        out = TemplateState.__new__(TemplateState)
        out.tmpl, out.dims, out.fitv = self.tmpl, self.dims, self.fitv
        out.static_ok, out.static_reasons = self.static_ok, self.static_reasons
        out.static_score = self.static_score
        out.score, out.m_idle, out.m_fut = self.score.copy(), self.m_idle.copy(), self.m_fut.copy()
        out.pos, out.has_future, out.own, out.levels = self.pos, self.has_future, 0, None
        return out


class KeptTemplates:
    """Per template, what a session's ``Placer`` computes from scratch (static mask, reasons
    and score; scores and fit masks over all nodes), kept in ``ClusterCache.derived`` across
    sessions that share ``key`` (the predicate and score callbacks, the node membership,
    metadata and allocatable generations, the resource names): each entry is exact for the
    cache's node state at ``NodeArrays`` stamp ``stamp`` but on the nodes in ``dirty``. A
    session refreshes the nodes touched since (``NodeArrays.touched_since``) that it has not
    changed itself (their columns are the cache's), then copies the entry and refreshes the
    nodes it changed. Only with ``local`` batch scores (a node's score reads its own columns)."""

    KEY = "placement.templates"

    __slots__ = ("entries", "key")

    def __init__(self, key: tuple[Any, ...]) -> None:
        self.key = key
        #: template id -> (state, stamp, dirty nodes), least recently used first
        self.entries: dict[int, tuple[TemplateState, int, set[int]]] = {}

    @classmethod
    def of(cls, derived: dict[str, Any], key: tuple[Any, ...]) -> KeptTemplates:
        kept = derived.get(cls.KEY)
        if not isinstance(kept, cls) or kept.key != key:
            kept = derived[cls.KEY] = cls(key)
        return kept

    def state(self, placer: Placer, tmpl: TaskTemplate) -> TemplateState:
        nd = placer.nodes
        moved = nd.moved()
        got = self.entries.pop(tmpl.tid, None)
        redo = None
        if got is not None and got[0].tmpl is tmpl and got[0].has_future == nd.has_future:
            touched = nd.arrays.touched_since(got[1])
            if touched is not None and max(touched, default=-1) < nd.n:
                redo = touched | got[2]
        if got is None or redo is None:
            st = placer.fresh_state(tmpl)
            kept, dirty = st.copy(), set(moved)
        else:
            kept = got[0]
            placer.refresh(kept, redo - moved)
            dirty = redo & moved
            st = kept.copy()
            placer.refresh(st, moved)
        st.pos = len(nd.log)
        self.entries[tmpl.tid] = (kept, nd.open_stamp, dirty)
        if len(self.entries) > KEPT_LIMIT:
            del self.entries[next(iter(self.entries))]
        return st


class Placer:
    """Per-session placement engine (``ssn.placer``)."""

    #: scores of a template's nodes after its own placements from ``Levels`` (exact; tests
    #: switch it off to compare)
    use_levels: ClassVar[bool] = True

    def __init__(self, nodes: SessionNodes, hooks: Hooks, cache: ClusterCache) -> None:
        self.cache = cache
        self.nodes = nodes
        self.batch_preds: list[BatchPredicate] = []
        self.dyn_preds: list[DynamicPredicate] = []
        self.per_job_preds = False  # some dynamic predicate answers differently per job
        self.scalar_preds: list[ScalarPredicate] = []
        for pred in hooks.predicate.flat():
            if isinstance(pred, BatchPredicateHook):
                self.batch_preds.append(pred.fn)
            elif isinstance(pred, DynamicPredicateHook):
                self.dyn_preds.append(pred.fn)
                self.per_job_preds = self.per_job_preds or pred.per_job
            else:
                self.scalar_preds.append(pred.fn)
        self.batch_scores: list[BatchScore] = []
        self.static_scores: list[StaticScore] = []
        self.scalar_scores: list[ScalarScore] = []
        self.local_scores = True  # every batch score is ``local`` (BatchScoreHook)
        for score in hooks.node_order.flat():
            if isinstance(score, BatchScoreHook):
                self.batch_scores.append(score.fn)
                self.local_scores = self.local_scores and score.local
            elif isinstance(score, StaticScoreHook):
                self.static_scores.append(score.fn)
            else:
                self.scalar_scores.append(score.fn)
        self.best_node = hooks.best_node.flat()
        self.states: dict[int, TemplateState] = {}
        self.sample: tuple[int, int, int] | None = None  # (minNodes, minPct, pct)
        self.start = 0
        self._explain: dict[int, tuple[int, str, dict[str, int]]] = {}
        self.kept = self._kept_templates(nodes, cache)

    def _kept_templates(self, nd: SessionNodes, cache: ClusterCache) -> KeptTemplates | None:
        if not (KEEP_TEMPLATES and self.local_scores):
            return None
        arrays = nd.arrays
        key = (
            tuple(self.batch_preds),
            tuple(self.static_scores),
            tuple(self.batch_scores),
            arrays,
            arrays.meta_gen,
            arrays.alloc_gen,
            nd.n,
            nd.dims,
            cache.resources.version,
        )
        return KeptTemplates.of(cache.derived, key)

    @property
    def scalar_callbacks(self) -> bool:
        """A callback scores or filters one node at a time (``_slow_pick`` chooses then)."""
        return bool(self.scalar_preds or self.scalar_scores or self.best_node)

    # -- template state --------------------------------------------------------------------
    def state(self, tmpl: TaskTemplate) -> TemplateState:
        st = self.states.get(tmpl.tid)
        nd = self.nodes
        if st is None:
            kept = self.kept
            if kept is not None and nd.has_future == nd.open_future:
                st = self.states[tmpl.tid] = kept.state(self, tmpl)
            else:
                st = self.states[tmpl.tid] = self.fresh_state(tmpl)
            return st
        log = nd.log
        if st.pos < len(log) or (nd.has_future and not st.has_future):
            new = log[st.pos :]
            if nd.has_future and not st.has_future:
                self._full(st)
            elif len(new) <= 4:
                self._catch_up(st)
            elif len(new) * 8 > nd.n:
                self._full(st)
            else:
                self._partial(st, np.unique(np.asarray(new, dtype=np.intp)))
        return st

    def fresh_state(self, tmpl: TaskTemplate) -> TemplateState:
        """``tmpl``'s state computed from scratch over all nodes."""
        st = TemplateState(tmpl)
        self._static(st)
        self._full(st)
        return st

    def refresh(self, st: TemplateState, idx: set[int]) -> None:
        """Recompute the nodes ``idx`` of ``st`` (its scores and fit masks) from the session's
        columns: one at a time when few, else with vector steps (``_partial``)."""
        if len(idx) * 8 > self.nodes.n:
            self._partial(st, np.asarray(sorted(idx), dtype=np.intp))
        else:
            for i in idx:
                self._one(st, i)

    def _catch_up(self, st: TemplateState) -> None:
        """Refresh the few nodes changed since ``st.pos``: from the template's ``Levels`` where
        a node changed only by the template's own placements, else one node at a time."""
        nd = self.nodes
        start, end = st.pos, len(nd.log)
        lv_tab = st.levels
        if lv_tab is None:
            for i in set(nd.log[start:end]):
                self._one(st, i)
            st.own += nd.log_tids[start:end].count(st.tmpl.tid)
            st.pos = end
            if st.own >= LEVELS_AFTER and self._levels_ok():
                st.levels = Levels(nd.used, st.m_idle)
            return
        lv, mine = lv_tab.lv, st.tmpl.tid
        touched = set()
        for k in range(start, end):
            i = nd.log[k]
            lv[i] = lv[i] + 1 if nd.log_tids[k] == mine and lv[i] >= 0 else -1
            touched.add(i)
        m_idle, heap = st.m_idle, lv_tab.heap
        for i in touched:
            j = lv[i]
            if j < 0:
                self._one(st, i)
            else:
                if j not in lv_tab.score:
                    self._level(st, lv_tab, j)
                score = float(lv_tab.score[j][i])
                st.score[i] = score
                m_idle[i] = score if lv_tab.fit[j][i] else NEG
            if m_idle[i] > NEG:
                heapq.heappush(heap, (-float(m_idle[i]), i))
        st.pos = end

    def _levels_ok(self) -> bool:
        return self.use_levels and self.local_scores and not self.nodes.has_future

    def _level(self, st: TemplateState, tab: Levels, j: int) -> None:
        """Level ``j`` of ``tab``: every node's score and Idle fit with ``j`` more of the
        template's pods on top of ``tab.base`` (the ``local`` scores of shifted columns)."""
        nd = self.nodes
        used = tab.base + j * st.tmpl.req[:, None]
        kept, nd.used = nd.used, used
        try:
            tab.score[j] = self._scores(st, slice(None))
        finally:
            nd.used = kept
        fit = st.static_ok.copy()
        for d, v in zip(st.dims, st.fitv, strict=True):
            fit &= nd.alloc[d] - used[d] >= v
        tab.fit[j] = fit

    def _one(self, st: TemplateState, i: int) -> None:
        """Recompute node ``i`` for ``st`` with Python scalars (the per-placement fast path)."""
        nd = self.nodes
        alloc, used, fut = nd.cols(i)
        ok = bool(st.static_ok[i])
        fit_idle = ok
        fit_fut = ok
        if ok:
            for d, v in zip(st.dims, st.fitv, strict=True):
                if alloc[d] - used[d] < v:
                    fit_idle = False
                if fut[d] < v:
                    fit_fut = False
        if nd.has_future:
            fit_idle = fit_idle and fit_fut  # idle promised to a pipelined task is not free
        score = 0.0
        for fn in self.batch_scores:
            score += fn(st.tmpl, nd, i)
        if st.static_score is not None:
            score += float(st.static_score[i])
        st.score[i] = score
        st.m_idle[i] = score if fit_idle else NEG
        if nd.has_future:
            st.m_fut[i] = score if (fit_fut and not fit_idle) else NEG

    def _static(self, st: TemplateState) -> None:
        nd = self.nodes
        ok = nd.valid.copy()
        reasons: list[tuple[str, BoolVec]] = []
        for fn in self.batch_preds:
            for reason, fail in fn(st.tmpl, nd):
                reasons.append((reason, fail))
                ok &= ~fail
        st.static_ok = ok
        st.static_reasons = reasons
        if self.static_scores:
            total = np.zeros(nd.n)
            for sfn in self.static_scores:
                total += sfn(st.tmpl, nd, ok)
            st.static_score = total
        else:
            st.static_score = None

    def _scores(self, st: TemplateState, idx: Any) -> FloatVec:
        nd = self.nodes
        if isinstance(idx, slice):
            out = np.zeros(nd.n)
        else:
            out = np.zeros(len(idx))
        for fn in self.batch_scores:
            out += fn(st.tmpl, nd, idx)
        if st.static_score is not None:
            out += st.static_score[idx]
        return out

    def _fits(self, st: TemplateState, idx: Any) -> tuple[BoolVec, BoolVec | None]:
        nd = self.nodes
        ok = st.static_ok[idx]
        idle = nd.idle
        fit_idle = ok.copy()
        for d, v in zip(st.dims, st.fitv, strict=True):
            fit_idle &= idle[d, idx] >= v
        if not nd.has_future:
            return fit_idle, None
        fut = ok.copy()
        rel, pip = nd.releasing, nd.pipelined
        for d, v in zip(st.dims, st.fitv, strict=True):
            fut &= (idle[d, idx] + rel[d, idx] - pip[d, idx]) >= v
        # A node is a candidate only if its FutureIdle holds the task
        # (docs/volcano-semantics.md#allocate): idle capacity that a pipelined task will need once
        # the releasing pods are gone is not free.
        fit_idle &= fut
        return fit_idle, fut & ~fit_idle

    def _full(self, st: TemplateState) -> None:
        nd = self.nodes
        full = slice(None)
        fit_idle, fut = self._fits(st, full)
        st.score = self._scores(st, full)
        st.m_idle = np.where(fit_idle, st.score, NEG)
        st.m_fut = np.where(fut, st.score, NEG) if fut is not None else np.full(nd.n, NEG)
        st.has_future = nd.has_future
        st.pos = len(nd.log)
        st.levels = None

    def _partial(self, st: TemplateState, idx: Any) -> None:
        nd = self.nodes
        fit_idle, fut = self._fits(st, idx)
        score = self._scores(st, idx)
        st.score[idx] = score
        st.m_idle[idx] = np.where(fit_idle, score, NEG)
        if fut is not None:
            st.m_fut[idx] = np.where(fut, score, NEG)
        st.pos = len(nd.log)
        st.levels = None

    # -- selection ---------------------------------------------------------------------------
    def _dynamic_fail(self, task: TaskInfo) -> BoolVec | None:
        fail: BoolVec | None = None
        for fn in self.dyn_preds:
            for _, mask in fn(task, self.nodes):
                fail = mask.copy() if fail is None else (fail | mask)
        return fail

    def _num_to_find(self, n: int) -> int:
        assert self.sample is not None
        min_nodes, min_pct, pct = self.sample
        if n < min_nodes or pct >= 100:
            return n
        if pct <= 0:
            pct = max(min_pct, 50 - n // 125)
        k = n * pct // 100
        return max(k, min_nodes)

    def _sampled(self, arr: FloatVec) -> FloatVec:
        feas = np.flatnonzero(arr > NEG)
        k = self._num_to_find(int(self.nodes.valid.sum()))
        if len(feas) <= k:
            return arr
        pos = int(np.searchsorted(feas, self.start))
        take = np.concatenate([feas[pos:], feas[:pos]])[:k]
        self.start = (int(take[-1]) + 1) % max(self.nodes.n, 1)
        out = np.full_like(arr, NEG)
        out[take] = arr[take]
        return out

    def select(self, task: TaskInfo) -> tuple[int, bool] | None:
        """Best node for ``task``: (node index, fits Idle) or None when no node fits."""
        st = self.state(task.template)
        extra = self._dynamic_fail(task)
        nd = self.nodes
        levels = st.levels
        plain = self.sample is None and not self.scalar_callbacks  # argmax decides
        if levels is not None and extra is None and not task.nominated_node and plain:
            best = levels.best(st.m_idle)  # levels exist only without FutureIdle
            return None if best is None else (best, True)
        for idle_gradient, base in ((True, st.m_idle), (False, st.m_fut)):
            if not idle_gradient and not nd.has_future:
                break
            arr = base if extra is None else np.where(extra, NEG, base)
            if task.nominated_node:
                ni = nd.arrays.by_name.get(task.nominated_node)
                if ni is not None and ni < nd.n and arr[ni] > NEG and self._scalar_ok(task, ni):
                    return ni, idle_gradient
            if self.sample is not None:
                arr = self._sampled(arr)
            if self.scalar_callbacks:
                got = self._slow_pick(task, arr)
                if got is not None:
                    return got, idle_gradient
                continue
            i = int(arr.argmax())
            if arr[i] > NEG:
                return i, idle_gradient
        return None

    def fits_node(self, task: TaskInfo, idx: int, *, future: bool = True) -> str | None:
        """None when ``task`` passes every predicate on node ``idx`` and fits its Idle (or, with
        ``future``, its FutureIdle = Idle + Releasing - Pipelined); else the first reason.
        For preempt/reclaim style per-node checks after tentative evictions."""
        st = self.state(task.template)
        nd = self.nodes
        if not nd.valid[idx]:
            return "node(s) not ready"
        for reason, fail in st.static_reasons:
            if fail[idx]:
                return reason
        alloc, used, fut = nd.cols(idx)
        names = self.cache.resources.names
        for d, v in zip(st.dims, st.fitv, strict=True):
            have = fut[d] if future else alloc[d] - used[d]
            if have < v:
                return resource_reason(names[d])
        for fn in self.dyn_preds:
            for reason, mask in fn(task, nd):
                if mask[idx]:
                    return reason
        return self._first_scalar_error(task, idx)

    def _scalar_ok(self, task: TaskInfo, idx: int) -> bool:
        return all(fn(task, idx) is None for fn in self.scalar_preds)

    def _slow_pick(self, task: TaskInfo, arr: FloatVec) -> int | None:
        cand = np.flatnonzero(arr > NEG)
        scores = {int(i): float(arr[i]) for i in cand}
        if self.scalar_scores:
            for i in scores:
                scores[i] += sum(fn(task, i) for fn in self.scalar_scores)
        ok = {i: s for i, s in scores.items() if self._scalar_ok(task, i)}
        if not ok:
            return None
        for fn in self.best_node:
            best = fn(task, ok)
            if best is not None:
                return int(best)
        return min(ok, key=lambda i: (-ok[i], i))

    # -- explanations ----------------------------------------------------------------------
    def explain(self, task: TaskInfo) -> tuple[str, dict[str, int]]:
        """kube-scheduler style "0/N nodes are available: ..." and the reason histogram."""
        tmpl = task.template
        nd = self.nodes
        cacheable = not tmpl.volatile and not self.dyn_preds_active()
        if cacheable:
            hit = self._explain.get(tmpl.tid)
            if hit is not None and hit[0] == len(nd.log):
                return hit[1], hit[2]
        counts = self._reason_counts(task)
        total = int(nd.valid.sum())
        parts = sorted(f"{c} {r}" for r, c in counts.items())
        msg = f"0/{total} nodes are available: " + ", ".join(parts) + "."
        if not parts:
            msg = f"0/{total} nodes are available."
        hist = dict(counts)
        if cacheable:
            self._explain[tmpl.tid] = (len(nd.log), msg, hist)
        return msg, hist

    def _reason_counts(self, task: TaskInfo) -> Counter[str]:
        """How many valid nodes fail ``task`` for each reason; a node counts once, under the
        first stage that rejects it: static predicates, resources (every lacking one), dynamic
        predicates, then the first failing scalar predicate."""
        st = self.state(task.template)
        nd = self.nodes
        remaining = nd.valid.copy()
        counts: Counter[str] = Counter()
        _count_failures(counts, remaining, st.static_reasons)
        fut = nd.future_idle() if nd.has_future else nd.idle
        lacking = np.zeros(nd.n, dtype=np.bool_)
        names = self.cache.resources.names
        for d, v in zip(st.dims, st.fitv, strict=True):
            lack = remaining & (fut[d] < v)
            c = int(lack.sum())
            if c:
                counts[resource_reason(names[d])] += c
                lacking |= lack
        remaining &= ~lacking
        for fn in self.dyn_preds:
            _count_failures(counts, remaining, fn(task, nd))
        if self.scalar_preds:
            for i in np.flatnonzero(remaining):
                err = self._first_scalar_error(task, int(i))
                if err:
                    counts[err] += 1
        return counts

    def _first_scalar_error(self, task: TaskInfo, idx: int) -> str | None:
        for sp in self.scalar_preds:
            err = sp(task, idx)
            if err:
                return err
        return None

    def dyn_preds_active(self) -> bool:
        """Can a dynamic predicate tell two tasks of the same template apart (per job, or
        through in-session pod (anti-)affinity)?"""
        return self.per_job_preds or (
            bool(self.dyn_preds)
            and (bool(self.cache.anti_affinity_tasks) or self.nodes.placed_anti > 0)
        )


def _count_failures(
    counts: Counter[str], remaining: BoolVec, failures: Iterable[tuple[str, BoolVec]]
) -> None:
    """Count each (reason, failing-node mask) on the nodes still ``remaining``, then drop the
    failing nodes from ``remaining`` (in place), so a node is counted under one reason only."""
    for reason, fail in failures:
        c = int((remaining & fail).sum())
        if c:
            counts[reason] += c
            remaining &= ~fail
