"""Fast paths for many identical single-pod jobs decide exactly what the slow paths decide.

The 100,000-pod benchmark (``benchmarks/cycle.py --gang 1``) is dominated by per-job Python;
the shortcuts it takes (allocate's replay of failed attempts and its queue drain, queue heaps
filled in one step) are each switchable, and these tests compare every bind, pipeline, status,
reason (in order) and event with the switch on and off on random clusters of small jobs.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.model.info import JobInfo
from batch.model.status import ALLOCATED_STATUS, TaskStatus
from batch.scheduler import Decisions, load_config, run_session
from batch.scheduler.actionlib.pq import PriorityQueue
from batch.scheduler.actionlib.selection import jobs_by_queue
from batch.scheduler.actions.allocate import Allocate
from batch.scheduler.config import HELM_DEFAULT_CONFIG, TEPHRA_DEFAULT_CONFIG
from batch.scheduler.framework import close, placement
from batch.scheduler.framework.decisions import PendingReason
from batch.scheduler.framework.session import Session

from .test_incremental import QUEUES, Event, _base, _replay, step
from .util import BASIC, NOW, switched

T = TypeVar("T")

CONFIGS = [load_config(HELM_DEFAULT_CONFIG), load_config(TEPHRA_DEFAULT_CONFIG)]

jobs_st = st.lists(
    st.tuples(
        st.integers(0, 2),  # queue
        st.integers(1, 3),  # pods
        st.integers(1, 3),  # minMember (clamped to pods)
        st.integers(0, 2),  # gpu per pod
        st.integers(1, 3),  # cpu per pod
        st.integers(0, 2),  # creation second (ties on purpose)
        st.sampled_from(["Inqueue", "Inqueue", "Pending"]),
    ),
    min_size=1,
    max_size=30,
)


single_pod_jobs_st = st.lists(
    st.tuples(
        st.integers(0, 2),  # queue
        st.just(1),  # one pod
        st.just(1),  # minMember
        st.integers(0, 1),  # gpu: two shapes per queue, so classes interleave
        st.just(1),  # cpu
        st.integers(0, 2),  # creation second (ties on purpose)
    ),
    min_size=1,
    max_size=60,
)


def cluster_st(
    max_nodes: int = 4, jobs: st.SearchStrategy[list[tuple[Any, ...]]] = jobs_st, busy: bool = True
) -> dict[str, st.SearchStrategy[Any]]:
    """``_cluster``'s arguments as strategies: ``@given(**cluster_st(), ...)``."""
    out: dict[str, st.SearchStrategy[Any]] = {
        "nodes": st.integers(1, max_nodes),
        "weights": st.lists(st.integers(1, 3), min_size=3, max_size=3),
        "jobs": jobs,
    }
    if busy:
        out["busy"] = st.booleans()
    return out


def _cluster(
    nodes: int, weights: list[int], jobs: list[tuple[Any, ...]], busy: bool
) -> ClusterCache:
    c = ClusterCache()
    c.apply("Queue", "ADDED", f.queue("root"))
    for i, w in enumerate(weights):
        c.apply("Queue", "ADDED", f.queue(f"q{i}", weight=w))
    for i in range(nodes):
        c.apply("Node", "ADDED", f.node(f"n{i}", cpu="4", memory="16Gi", gpu=2))
    if busy:
        c.apply("PodGroup", "ADDED", f.podgroup("run", queue="q0", phase="Running"))
        c.apply(
            "Pod",
            "ADDED",
            f.pod("run-0", group="run", gpu=1, cpu="2", node_name="n0", phase="Running"),
        )
    for j, (qi, pods, mm, gpu, cpu, sec, *phase) in enumerate(jobs):
        created = f"2026-01-01T00:00:0{sec}Z"
        c.apply(
            "PodGroup",
            "ADDED",
            f.podgroup(
                f"j{j}",
                queue=f"q{qi}",
                min_member=min(mm, pods),
                phase=phase[0] if phase else "Inqueue",
                created=created,
            ),
        )
        for t in range(pods):
            c.apply(
                "Pod",
                "ADDED",
                f.pod(f"j{j}-{t}", group=f"j{j}", gpu=gpu or None, cpu=str(cpu), created=created),
            )
    return c


def _exact(d: Decisions) -> dict[str, Any]:
    """Everything a session decided, orders included."""
    return {
        "binds": d.binds,
        "pipelines": d.pipelines,
        "evictions": d.evictions,
        "events": d.events,
        "reasons": [
            (k, r.kind, r.message, r.short_by, r.shortfall, r.details)
            for k, r in d.pending_reasons.items()
        ],
        "podgroup_status": list(d.podgroup_status.items()),
        "queue_status": list(d.queue_status.items()),
    }


def _switched(name: str) -> AbstractContextManager[None]:
    return switched(False, (Allocate, name))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    **cluster_st(),
    config_index=st.integers(0, 1),
)
def test_draining_replays_decides_as_popping_each_job(
    nodes: int, weights: list[int], jobs: list[tuple[Any, ...]], busy: bool, config_index: int
) -> None:
    c = _cluster(nodes, weights, jobs, busy)
    cfg = CONFIGS[config_index]
    fast = _exact(run_session(c, cfg, now=NOW))
    with _switched("drain_replays"):
        popped = _exact(run_session(c, cfg, now=NOW))
    with _switched("use_memo"):
        slow = _exact(run_session(c, cfg, now=NOW))
    assert fast == popped
    assert fast == slow


def test_drain_replays_a_queue_of_identical_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's case: what fits is placed, the other jobs of each queue fail alike and
    are replayed without popping their queue again."""
    from batch.scheduler.actions import allocate

    drained: list[str] = []
    real_drain = allocate.Allocate._drain

    def spy(self: Allocate, run: Any, queue: Any, jobs: Any, queues: Any) -> None:
        drained.append(queue.name)
        real_drain(self, run, queue, jobs, queues)

    monkeypatch.setattr(allocate.Allocate, "_drain", spy)
    jobs: list[tuple[Any, ...]] = [(i % 2, 1, 1, 1, 1, 0) for i in range(12)]
    c = _cluster(1, [1, 1, 1], jobs, False)
    d = run_session(c, CONFIGS[0], now=NOW)
    assert len(d.binds) == 2
    assert [r.kind for r in d.pending_reasons.values()] == ["NotAllocatable"] * 10
    assert drained == ["q0", "q1"]  # one drain per queue took all its remaining jobs
    with _switched("drain_replays"):
        assert _exact(run_session(c, CONFIGS[0], now=NOW)) == _exact(d)


def _pops(pq: PriorityQueue[T]) -> Iterator[T]:
    while pq:
        yield pq.pop()


_pq_ops = st.lists(
    st.one_of(
        st.tuples(st.just("push"), st.integers(0, 3)),
        st.tuples(st.just("extend"), st.lists(st.integers(0, 3), max_size=12)),
        st.tuples(st.just("pop"), st.just(0)),
        st.tuples(st.just("probe"), st.integers(0, 3)),
    ),
    max_size=40,
)


@given(_pq_ops)
def test_priority_queue_matches_a_heap_of_single_pushes(ops: list[tuple[str, Any]]) -> None:
    """Pops, lengths, items and pops_next equal those of a plain heap fed one push at a time,
    whatever mix of extend (the sorted run), push (the heap) and pop."""
    keys: list[int] = []
    pq = PriorityQueue[int](keys.__getitem__)
    ref: list[tuple[int, int]] = []  # (key, insertion number) = item
    for op, arg in ops:
        if op == "pop":
            if ref:
                assert pq.pop() == heapq.heappop(ref)[1]
        elif op == "probe":
            keys.append(arg)
            item = len(keys) - 1
            assert pq.pops_next(item) == (not ref or (arg, item) < ref[0])
        else:
            new = [arg] if op == "push" else arg
            items = list(range(len(keys), len(keys) + len(new)))
            keys.extend(new)
            for i in items:
                heapq.heappush(ref, (keys[i], i))
            if op == "push":
                pq.push(items[0])
            else:
                pq.extend(items)
        assert len(pq) == len(ref) and bool(pq) == bool(ref)
        assert sorted(pq.items()) == sorted(i for _, i in ref)
    assert list(_pops(pq)) == [i for _, i in sorted(ref)]


@settings(max_examples=200, deadline=None)
@given(jobs=st.lists(st.tuples(st.sampled_from(QUEUES), st.integers(0, 3)), max_size=12))
def test_jobs_by_queue_pop_as_pushed(jobs: list[tuple[str, int]]) -> None:
    """Jobs of random queues and JobOrder keys (ties likely) pop from ``jobs_by_queue``'s
    per-queue priority queues (one ``extend`` each) as from queues they were pushed into one by
    one, and the queues come in the order of their first job."""
    made = [JobInfo(f"ns/j{i}", "ns", f"j{i}", dims=4, queue=q) for i, (q, _) in enumerate(jobs)]
    keys = {job.uid: k for job, (_, k) in zip(made, jobs, strict=True)}
    pushed: dict[str, PriorityQueue[JobInfo]] = {}
    for job in made:
        pushed.setdefault(job.queue, PriorityQueue(lambda j: keys[j.uid])).push(job)
    extended = jobs_by_queue(made, lambda j: keys[j.uid])
    got, want = ({q: [j.uid for j in _pops(pq)] for q, pq in g.items()} for g in (extended, pushed))
    assert list(got.items()) == list(want.items())


_amounts = st.lists(
    st.one_of(
        st.sampled_from([0.0, 0.05, 0.1, 0.15, 1.0, 1e12]),
        st.floats(0, 1e13, allow_nan=False, allow_infinity=False),
    ),
    min_size=1,
    max_size=6,
)


@given(_amounts, _amounts, st.booleans())
def test_scalar_share_arithmetic_matches_the_vector_form(
    a: list[float], b: list[float], inf_cap: bool
) -> None:
    """proportion's share and ``le`` run on Python floats; they equal numpy's answers."""
    from batch.scheduler.framework.shares import TOL, le
    from batch.scheduler.plugins.proportion.attrs import _ratio

    n = min(len(a), len(b))
    x, y = np.array(a[:n]), np.array(b[:n])
    if inf_cap:
        y[-1] = np.inf
    assert le(x, y) == bool((x[1:] <= y[1:] + TOL).all())
    assert le(y, x) == bool((y[1:] <= x[1:] + TOL).all())
    d = y[1:]
    present = d >= TOL
    vec = float((x[1:][present] / d[present]).max()) if present.any() else 0.0
    assert _ratio(x, y) == vec


@given(
    st.one_of(
        st.floats(0, 4.2e9),
        st.integers(0, 4 * 10**9).map(float),
        st.tuples(st.integers(0, 4 * 10**9), st.sampled_from([0.9999989, 0.9999995, 0.999999])).map(
            sum
        ),
        st.floats(-1e9, 0),
    )
)
def test_gang_condition_time_matches_datetime(ts: float) -> None:
    """The condition time (format_epoch) keeps each day's date; it equals datetime's formatting."""
    from datetime import UTC, datetime

    from batch.api.timestamps import format_epoch

    assert format_epoch(ts) == datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _reference_reasons(ssn: Session, reasons: dict[str, PendingReason]) -> None:
    """fill_reasons as one pass over the active jobs, then over the jobs with a reason."""
    with_reason = [ssn.jobs[uid] for uid in reasons if uid in ssn.jobs]
    for job in (*ssn.active_jobs(), *with_reason):
        if job.is_ready() and not job.counts[TaskStatus.PENDING]:
            reasons.pop(job.uid, None)
        elif job.uid not in reasons and not job.is_ready():
            reasons[job.uid] = close._missing_reason(job)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(st.tuples(step(), st.booleans()), min_size=1, max_size=20),
    config_index=st.integers(0, 1),
)
def test_close_shortcuts_match_the_reference(
    steps: list[tuple[Event, bool]], config_index: int
) -> None:
    """On random histories: close's reasons are those of the two-pass rule (in order), and
    statuses shared between jobs equal each job's own."""
    cfg = [load_config(BASIC), CONFIGS[1]][config_index]
    cache = ClusterCache()
    for event in _base():
        _replay(cache, event)
    with _checking_reasons() as seen:
        for i, (event, dispatch) in enumerate(steps):
            _replay(cache, event)
            cache.derived.pop("close-status", None)  # no reuse across sessions
            shared = run_session(cache, cfg, now=NOW + i, uid=f"s{i}")
            cache.derived.pop("close-status", None)
            close.SHARE_STATUSES = False
            try:
                own = run_session(cache, cfg, now=NOW + i, uid=f"s{i}")
            finally:
                close.SHARE_STATUSES = True
            assert list(shared.podgroup_status.items()) == list(own.podgroup_status.items())
            if dispatch:
                _replay(cache, shared)
    assert seen and all(expect == got for expect, got in seen)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    **cluster_st(max_nodes=3, busy=False),
    config_index=st.integers(0, 1),
)
def test_close_shortcuts_on_many_alike_jobs(
    nodes: int, weights: list[int], jobs: list[tuple[Any, ...]], config_index: int
) -> None:
    """Many jobs with equal counters in Pending and Inqueue PodGroups: shared statuses equal
    each job's own, reasons are the reference's."""
    c = _cluster(nodes, weights, jobs, True)
    cfg = CONFIGS[config_index]
    with _checking_reasons() as seen:
        shared = run_session(c, cfg, now=NOW, uid="s")
    c.derived.pop("close-status", None)
    close.SHARE_STATUSES = False
    try:
        own = run_session(c, cfg, now=NOW, uid="s")
    finally:
        close.SHARE_STATUSES = True
    assert list(shared.podgroup_status.items()) == list(own.podgroup_status.items())
    assert seen and all(expect == got for expect, got in seen)


@contextmanager
def _checking_reasons() -> Iterator[list[tuple[list[Any], list[Any]]]]:
    """While inside, every close also computes the reference reasons (compared by the caller)."""
    real_fill = close.fill_reasons
    seen: list[tuple[list[Any], list[Any]]] = []

    def checked(ssn: Session) -> None:
        expect = dict(ssn.reasons)
        _reference_reasons(ssn, expect)
        real_fill(ssn)
        seen.append((list(expect.items()), list(ssn.reasons.items())))

    close.fill_reasons = checked
    try:
        yield seen
    finally:
        close.fill_reasons = real_fill


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    **cluster_st(max_nodes=3, busy=False),
    config_index=st.integers(0, 1),
)
def test_rollback_leaves_every_job_as_its_tasks_say(
    nodes: int, weights: list[int], jobs: list[tuple[Any, ...]], config_index: int
) -> None:
    """After a session (placements, binds, evictions undone) every job's counters and sums are
    what its tasks' statuses give, and equal those before the session."""
    c = _cluster(nodes, weights, jobs, True)

    def state() -> dict[str, Any]:
        return {
            uid: (
                list(j.counts),
                j.allocated.tolist(),
                j.pending_req.tolist(),
                j.version,
                sorted((t.uid, int(t.status), t.node_name, t.node_idx) for t in j.tasks.values()),
            )
            for uid, j in c.jobs.items()
        }

    before = state()
    run_session(c, CONFIGS[config_index], now=NOW)
    assert state() == before
    for job in c.jobs.values():
        allocated = np.zeros_like(job.allocated)
        for t in job.tasks.values():
            if t.status in ALLOCATED_STATUS:
                allocated += t.req
        assert job.allocated.tolist() == allocated.tolist()
        assert [sum(t.status == s for t in job.tasks.values()) for s in TaskStatus] == [
            job.counts[s] for s in TaskStatus
        ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(st.tuples(step(), st.booleans()), min_size=1, max_size=20),
    config_index=st.integers(0, 1),
)
def test_queue_sums_after_rollback_match_sums_of_the_session_state(
    steps: list[tuple[Event, bool]], config_index: int
) -> None:
    """On random histories (binds, evictions, pipelines): each queue's ``allocated``, summed
    after the rollback plus the session's delta on a long-lived cache, equals the sum over the
    session's own state worked out from scratch."""
    cfg = [load_config(BASIC), CONFIGS[1]][config_index]
    cache = ClusterCache()
    for event in _base():
        _replay(cache, event)
    for i, (event, dispatch) in enumerate(steps):
        _replay(cache, event)
        kept = run_session(cache, cfg, now=NOW + i, uid=f"s{i}")
        sums = cache.derived.pop("close-allocated", None)
        close.SUM_AFTER_ROLLBACK = False
        try:
            scratch = run_session(cache, cfg, now=NOW + i, uid=f"s{i}")
        finally:
            close.SUM_AFTER_ROLLBACK = True
            if sums is not None:
                cache.derived["close-allocated"] = sums
        assert list(kept.queue_status.items()) == list(scratch.queue_status.items())
        if dispatch:
            _replay(cache, kept)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    **cluster_st(max_nodes=5, jobs=single_pod_jobs_st),
    config_index=st.integers(0, 1),
)
def test_classes_of_single_pod_jobs_decide_as_each_job_alone(
    nodes: int, weights: list[int], jobs: list[tuple[Any, ...]], busy: bool, config_index: int
) -> None:
    """Many single-pod jobs in a few classes (queue and shape): with every class shortcut on
    (failures replayed and drained by class, queue sums after the rollback) the decisions are
    those of trying each job on its own and summing the session's state, on a fresh cache and
    on one that ran the same session before."""
    c = _cluster(nodes, weights, jobs, busy)
    cfg = CONFIGS[config_index]
    fast = [_exact(run_session(c, cfg, now=NOW + r)) for r in range(2)]
    close.SUM_AFTER_ROLLBACK = False
    try:
        with _switched("use_memo"):
            slow = [_exact(run_session(c, cfg, now=NOW + r)) for r in range(2)]
    finally:
        close.SUM_AFTER_ROLLBACK = True
    assert fast == slow


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    **cluster_st(max_nodes=5, jobs=st.one_of(jobs_st, single_pod_jobs_st)),
    config_index=st.integers(0, 1),
    after=st.sampled_from([1, 2, placement.LEVELS_AFTER]),
)
def test_scores_from_levels_decide_as_recomputing_each_node(
    nodes: int,
    weights: list[int],
    jobs: list[tuple[Any, ...]],
    busy: bool,
    config_index: int,
    after: int,
) -> None:
    """A template's nodes scored from its ``Levels`` (one vector step per level, from the
    first own placement on with ``after`` 1) decide as recomputing every changed node."""
    c = _cluster(nodes, weights, jobs, busy)
    cfg = CONFIGS[config_index]
    default = placement.LEVELS_AFTER
    placement.LEVELS_AFTER = after
    try:
        fast = [_exact(run_session(c, cfg, now=NOW + r)) for r in range(2)]
    finally:
        placement.LEVELS_AFTER = default
    placement.Placer.use_levels = False
    try:
        slow = [_exact(run_session(c, cfg, now=NOW + r)) for r in range(2)]
    finally:
        placement.Placer.use_levels = True
    assert fast == slow


def test_levels_serve_a_template_placed_many_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """The level path is taken (not only allowed): 40 single-pod jobs of one shape on 4
    nodes place from levels after the first few, and bind where recomputing would."""
    jobs = [(0, 1, 1, 0, 1, 0)] * 40
    c = _cluster(4, [1, 1, 1], jobs, False)
    cfg = CONFIGS[0]
    calls: list[int] = []
    real = placement.Placer._level
    monkeypatch.setattr(placement, "LEVELS_AFTER", 2)
    monkeypatch.setattr(
        placement.Placer,
        "_level",
        lambda self, st, tab, j: calls.append(j) or real(self, st, tab, j),
    )
    fast = _exact(run_session(c, cfg, now=NOW))
    assert calls and max(calls) >= 2
    monkeypatch.setattr(placement.Placer, "use_levels", False)
    assert _exact(run_session(c, cfg, now=NOW)) == fast
    assert len(fast["binds"]) == 16  # 4 cpu per node, 1 cpu per pod


def test_levels_notice_another_templates_placement(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small pods, then big ones, then small ones again on the same nodes: a node that took
    a big pod leaves the small template's levels (recomputed as before), so no node is
    overfilled and every bind is the one recomputing each node gives."""
    jobs = [(0, 1, 1, 0, 1, 0)] * 4 + [(0, 1, 1, 0, 3, 1)] * 3 + [(0, 1, 1, 0, 1, 2)] * 8
    c = _cluster(4, [1, 1, 1], jobs, False)
    monkeypatch.setattr(placement, "LEVELS_AFTER", 1)
    fast = _exact(run_session(c, CONFIGS[0], now=NOW))
    monkeypatch.setattr(placement.Placer, "use_levels", False)
    assert _exact(run_session(c, CONFIGS[0], now=NOW)) == fast
