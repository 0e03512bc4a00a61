"""allocate's one-task path and proportion's deferred queue answers decide as the plain path.

A job with one task left is tried without a statement (``Allocate.single_path``), and while
such jobs are placed proportion's allocation handler is deferred: the queues' QueueOrder key,
Overused and Allocatable are worked out from Python lists that follow the placements
(``plugins/proportion/deferred.py``, ``hooks.DeferredQueues``), written back before anything
else reads the queues. These tests compare every bind, pipeline, status, reason, metric and
event with both switches on and off: on random histories through kept schedulers, on random
clusters of small jobs (many alike), and on the deferred answers themselves after random
placements; and they check which configurations get the deferred answers at all.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.model.status import TaskStatus
from batch.scheduler import Decisions, load_config, run_session
from batch.scheduler.actions.allocate import Allocate, _bind_single
from batch.scheduler.config import HELM_DEFAULT_CONFIG, TEPHRA_DEFAULT_CONFIG
from batch.scheduler.cycle import open_session
from batch.scheduler.plugins.proportion import deferred

from .test_batched_paths import _cluster, _exact, cluster_st
from .test_incremental import HDRF, _comparable, kept_against_plain, step
from .util import BASIC, NOW, switched

#: capacity answers the queues instead of proportion: nothing is deferred
CAPACITY = HELM_DEFAULT_CONFIG.replace("  - name: proportion\n", "  - name: capacity\n")
CONFIGS = [
    load_config(HELM_DEFAULT_CONFIG),
    load_config(BASIC),
    load_config(TEPHRA_DEFAULT_CONFIG),
    load_config(HDRF),
    load_config(CAPACITY),
]


def _plain() -> AbstractContextManager[None]:
    return switched(False, (Allocate, "single_path"), (deferred, "DEFER"))


def _no_deferral() -> AbstractContextManager[None]:
    return switched(False, (deferred, "DEFER"))


def _history_exact(d: Decisions) -> dict[str, Any]:
    return {**_comparable(d), "podgroup_status": d.podgroup_status, "events": d.events}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(st.tuples(step(), st.booleans(), st.integers(0, 2)), min_size=1, max_size=25),
    config_index=st.integers(0, len(CONFIGS) - 1),
)
def test_single_task_path_decides_as_statements_on_histories(
    steps: list[tuple[Any, bool, int]], config_index: int
) -> None:
    kept_against_plain(steps, CONFIGS[config_index], _plain, _history_exact)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    **cluster_st(),
    config_index=st.integers(0, len(CONFIGS) - 1),
)
def test_single_task_path_decides_as_statements_on_many_alike_jobs(
    nodes: int, weights: list[int], jobs: list[tuple[Any, ...]], busy: bool, config_index: int
) -> None:
    c = _cluster(nodes, weights, jobs, busy)
    cfg = CONFIGS[config_index]
    fast = _exact(run_session(c, cfg, now=NOW))
    with _no_deferral():
        single = _exact(run_session(c, cfg, now=NOW))
    with _plain():
        slow = _exact(run_session(c, cfg, now=NOW))
    assert fast == single
    assert fast == slow


def _gpu_cluster(queues: int, jobs: int) -> ClusterCache:
    c = ClusterCache()
    c.apply("Queue", "ADDED", f.queue("root"))
    for q in range(queues):
        c.apply("Queue", "ADDED", f.queue(f"q{q}", weight=q + 1))
    for i in range(3):
        c.apply("Node", "ADDED", f.node(f"n{i}", cpu="64", memory="256Gi", gpu=8))
    for j in range(jobs):
        c.apply("PodGroup", "ADDED", f.podgroup(f"j{j}", queue=f"q{j % queues}", phase="Inqueue"))
        # every third job asks for CPU alone, so that queues' shares are not all GPU shares
        gpu, cpu = (0, "9") if j % 3 == 2 else (1, "3")
        c.apply("Pod", "ADDED", f.pod(f"j{j}-0", group=f"j{j}", gpu=gpu, cpu=cpu, memory="5Gi"))
    return c


def test_which_configurations_defer() -> None:
    """Only proportion without fair shares, answering every queue point and following every
    placement alone, offers its deferred answers."""
    c = _gpu_cluster(2, 4)
    offered = []
    for cfg in CONFIGS:
        ssn = open_session(c, cfg, now=NOW)
        offered.append(ssn.dispatch.deferred_queues() is not None)
        ssn.rollback()
        ssn.release()
    assert offered == [True, True, False, False, False]


@settings(max_examples=60, deadline=None)
@given(picks=st.lists(st.tuples(st.integers(0, 2), st.booleans()), min_size=1, max_size=30))
def test_deferred_answers_are_the_callbacks_answers(picks: list[tuple[int, bool]]) -> None:
    """After any sequence of deferred placements (flushed now and then), the deferred QueueOrder
    key, Overused and Allocatable of every queue equal the real callbacks' on the queues'
    vectors as the handler would have left them, and a flush leaves exactly those vectors."""
    c = _gpu_cluster(3, 90)
    ssn = open_session(c, CONFIGS[0], now=NOW)
    got = ssn.dispatch.deferred_queues()
    assert got is not None
    shares, key = got
    real_key, dispatch = ssn.dispatch.queue_order_key(), ssn.dispatch
    attrs = next(p for p in ssn.plugins if p.name == "proportion").attrs  # type: ignore[attr-defined]
    queues = [ssn.queues[f"q{q}"] for q in range(3)]
    tasks: dict[str, list[Any]] = {q.name: [] for q in queues}
    for job in ssn.jobs.values():
        tasks[job.queue].extend(job.tasks.values())
    probe = tasks["q0"][-1]
    handled = {q.name: attrs[q.name].allocated.copy() for q in queues}  # the handler's vectors
    try:
        for qi, flush in picks:
            task = tasks[f"q{qi}"].pop()
            ssn.place(task, 0, TaskStatus.ALLOCATED, fire=False)
            shares.allocated(task)
            np.add(handled[f"q{qi}"], task.req, out=handled[f"q{qi}"])
            handled[f"q{qi}"][0] = 0.0
            seen = [(key(q), shares.overused(q), shares.allocatable(q, probe)) for q in queues]
            if flush:
                shares.flush()
                assert all(np.array_equal(attrs[n].allocated, v) for n, v in handled.items())
            assert seen == _real_answers(
                attrs,
                handled,
                queues,
                lambda q: (real_key(q), dispatch.overused(q), dispatch.allocatable(q, probe)),
            )
    finally:
        shares.flush()
        ssn.rollback()
        ssn.release()


def _real_answers(attrs: Any, handled: dict[str, Any], queues: list[Any], ask: Any) -> list[Any]:
    """``ask`` of each queue with the queues' allocated vectors set to ``handled`` (then put
    back)."""
    kept = {n: attrs[n].allocated for n in handled}
    try:
        for n, v in handled.items():
            attrs[n].allocated = v.copy()
            attrs[n].changed()
        return [ask(q) for q in queues]
    finally:
        for n, v in kept.items():
            attrs[n].allocated = v
            attrs[n].changed()


def test_a_one_task_placement_that_leaves_its_job_unready_stays_allocated() -> None:
    """Under deferral the task is placed as the commit leaves it (Binding); when its job is
    then not ready (here: minMember 2, one pod created) it goes back to Allocated, as a
    statement's placement is, and the deferred answers are written back."""
    c = _gpu_cluster(1, 0)
    c.apply("PodGroup", "ADDED", f.podgroup("g", queue="q0", min_member=2, phase="Inqueue"))
    c.apply("Pod", "ADDED", f.pod("g-0", group="g", gpu=1, cpu="3", memory="5Gi"))
    ssn = open_session(c, CONFIGS[0], now=NOW)
    got = ssn.dispatch.deferred_queues()
    assert got is not None
    shares = got[0]
    (job,) = ssn.jobs.values()
    (task,) = job.tasks.values()
    try:
        assert not _bind_single(ssn, job, task, 0, shares)
        assert task.status is TaskStatus.ALLOCATED
        assert job.counts[TaskStatus.ALLOCATED] == 1 and not job.counts[TaskStatus.BINDING]
        assert not shares.pending and not ssn.binds  # type: ignore[attr-defined]
    finally:
        ssn.rollback()
        ssn.release()


def test_deferred_additions_leave_signed_zeros_as_the_handler_does() -> None:
    """A queue's allocated vector may hold -0.0 in a slot no request asks for: the handler's
    ``np.add`` turns it into 0.0 at the first placement, and so must the deferred additions,
    which after the first one add only the slots a request asks for."""
    c = _gpu_cluster(1, 3)
    ssn = open_session(c, CONFIGS[0], now=NOW)
    got = ssn.dispatch.deferred_queues()
    assert got is not None
    shares = got[0]
    attrs = next(p for p in ssn.plugins if p.name == "proportion").attrs  # type: ignore[attr-defined]
    a = attrs["q0"]
    tasks = [t for j in ssn.jobs.values() for t in j.tasks.values()]
    unasked = next(i for i, r in enumerate(tasks[0].template.req_list) if i and not r)
    a.allocated[unasked] = -0.0
    want = a.allocated.copy()
    try:
        for task in tasks[:2]:
            ssn.place(task, 0, TaskStatus.ALLOCATED, fire=False)
            shares.allocated(task)
            np.add(want, task.req, out=want)
            want[0] = 0.0
        shares.flush()
        assert np.array_equal(a.allocated, want)
        assert np.array_equal(np.signbit(a.allocated), np.signbit(want))
    finally:
        ssn.rollback()
        ssn.release()
