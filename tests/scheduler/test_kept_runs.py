"""Allocate's per-queue JobOrder kept across sessions decides as the order built afresh.

``actionlib/keptruns.py`` keeps each queue's collected jobs sorted by JobOrder key from one
session to the next, when every JobOrder callback is pure per job, and updates them by the
jobs that changed. These tests drive two kept schedulers through the same random histories
(pods added, bound, finished, deleted; PodGroups added, changed, deleted and moved between
queues; queues; priority classes; nodes), one with the kept runs and one without, and demand
the same binds, pipelines, evictions, statuses, reasons, metrics and events, with the runs
updated one entry at a time and as a whole (``FEW``); and configurations whose JobOrder reads
the clock (sjf, tiresias) or that promote jobs without ``enqueue`` keep the plain path.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.scheduler import Decisions, Scheduler, load_config
from batch.scheduler.actionlib import keptruns
from batch.scheduler.actions import allocate
from batch.scheduler.config import TEPHRA_DEFAULT_CONFIG
from batch.scheduler.framework import jobmemo
from batch.sim.policies import SJF_CONF, TIRESIAS_CONF

from .test_incremental import (
    CONFIGS as BASE_CONFIGS,
    Event,
    _comparable,
    _replay,
    kept_against_plain,
    step,
)
from .util import NOW, switched

#: no enqueue: allocate promotes Pending jobs itself, its verdicts are not kept
NO_ENQUEUE = TEPHRA_DEFAULT_CONFIG.replace('actions: "enqueue, ', 'actions: "')
CONFIGS = [
    *BASE_CONFIGS,
    load_config(SJF_CONF),
    load_config(TIRESIAS_CONF),
    load_config(NO_ENQUEUE),
]
#: the configurations whose JobOrder is not kept (sjf, tiresias) or whose allocate verdicts
#: are not (no enqueue)
PLAIN = {3, 4, 5}


def _exact(d: Decisions) -> dict[str, Any]:
    return {**_comparable(d), "podgroup_status": d.podgroup_status, "events": d.events}


def _plain() -> AbstractContextManager[None]:
    return switched(False, (keptruns, "KEEP"))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(st.tuples(step(), st.booleans(), st.integers(0, 2)), min_size=1, max_size=25),
    config_index=st.integers(0, len(CONFIGS) - 1),
    few=st.sampled_from([0, 1, keptruns.FEW]),
)
def test_kept_runs_decide_as_orders_built_afresh(
    steps: list[tuple[Event, bool, int]], config_index: int, few: int
) -> None:
    with switched(few, (keptruns, "FEW")):
        kept_against_plain(steps, CONFIGS[config_index], _plain, _exact)


def _runs(cache: ClusterCache) -> keptruns.KeptRuns | None:
    memos = cache.derived.get(jobmemo.KEY)
    assert isinstance(memos, jobmemo.JobMemos)
    got = memos.derived.get(keptruns.KEY)
    assert got is None or isinstance(got, keptruns.KeptRuns)
    return got


def _backlog(caches: tuple[ClusterCache, ...], jobs: int) -> None:
    """Single-pod jobs in two queues, and gangs of three, on one node with room for three
    pods: most jobs stay pending session after session."""
    events: list[Event] = [("Queue", "ADDED", f.queue("root"))]
    events += [("Queue", "ADDED", f.queue(q)) for q in ("qa", "qb")]
    events.append(("Node", "ADDED", f.node("n0", cpu="3")))
    for j in range(jobs):
        size = 3 if j % 5 == 0 else 1
        q = "qa" if j % 2 else "qb"
        pg = f.podgroup(f"b{j}", queue=q, phase="Inqueue", min_member=1 if j % 10 else size)
        events.append(("PodGroup", "ADDED", pg))
        pods = [f.pod(f"b{j}-{k}", group=f"b{j}", cpu="1") for k in range(size)]
        events += [("Pod", "ADDED", pod) for pod in pods]
    for cache in caches:
        for event in events:
            cache.apply(*event)


#: changes between sessions of the backlog: new jobs, deleted jobs and pods, a job moved to
#: another queue, a PriorityClass that reorders (the job index is rebuilt), a job's class
_CHANGES: list[list[Event]] = [
    [],
    [
        ("PodGroup", "ADDED", f.podgroup("new", queue="qa", phase="Inqueue", min_member=1)),
        ("Pod", "ADDED", f.pod("new-0", group="new", cpu="1")),
    ],
    [("Pod", "DELETED", f.pod("b3-0", group="b3")), ("PodGroup", "DELETED", f.podgroup("b3"))],
    [("PodGroup", "MODIFIED", f.podgroup("b7", queue="qb", phase="Inqueue", min_member=1))],
    [("PriorityClass", "ADDED", f.priority_class("high", 50))],
    [
        (
            "PodGroup",
            "MODIFIED",
            f.podgroup("b9", queue="qa", phase="Inqueue", min_member=1, priority_class="high"),
        )
    ],
    [("Pod", "MODIFIED", f.pod("b4-0", group="b4", cpu="1", phase="Running", node_name="n0"))],
    [],
]


@pytest.mark.parametrize("few", [0, keptruns.FEW])
@pytest.mark.parametrize("dispatch", [False, True])
def test_a_backlog_follows_its_changes(few: int, dispatch: bool) -> None:
    """A backlog scheduled again and again (decisions dispatched or not): jobs that appear,
    leave, move, change class or get bound update the kept runs, which serve every session."""
    caches = ClusterCache(), ClusterCache()
    _backlog(caches, 40)
    config = CONFIGS[1]
    fast, slow = (Scheduler(c, config) for c in caches)
    with switched(few, (keptruns, "FEW")):
        for i, events in enumerate(_CHANGES):
            for cache in caches:
                for event in events:
                    cache.apply(*event)
            got = fast.run_once(NOW + i)
            with _plain():
                want = slow.run_once(NOW + i)
            assert _exact(got) == _exact(want), i
            runs = _runs(caches[0])
            assert runs is not None
            assert len(runs.index) == sum(map(len, runs.runs.values()))
            if dispatch:
                for cache, d in zip(caches, (got, want), strict=True):
                    _replay(cache, d)
    assert _runs(caches[1]) is None


@pytest.mark.parametrize("config_index", sorted(PLAIN))
def test_an_order_that_is_not_kept_keeps_no_runs(config_index: int) -> None:
    cache = ClusterCache()
    _backlog((cache,), 6)
    scheduler = Scheduler(cache, CONFIGS[config_index])
    for i in range(2):
        scheduler.run_once(NOW + i)
    assert _runs(cache) is None


@st.composite
def backlog_step(draw: st.DrawFn) -> Event:
    """A change to a backlog of ``_backlog``'s jobs (on a node with room for three pods, so
    the order decides which run): a job's class or queue, a job or pod that comes or goes, a
    pod that starts running, a PriorityClass."""
    j = draw(st.integers(0, 14))
    kind = draw(st.sampled_from(["class", "queue", "pod", "run", "delete", "delete-pod", "pc"]))
    if kind == "pc":
        return ("PriorityClass", "ADDED", f.priority_class("high", draw(st.integers(-5, 50))))
    if kind in ("class", "queue"):
        pg = f.podgroup(
            f"b{j}",
            queue=draw(st.sampled_from(["qa", "qb"])),
            phase="Inqueue",
            min_member=draw(st.integers(1, 2)),
            priority_class=draw(st.sampled_from([None, "high"])),
        )
        return ("PodGroup", draw(st.sampled_from(["MODIFIED", "ADDED"])), pg)
    if kind == "delete":
        return ("PodGroup", "DELETED", f.podgroup(f"b{j}"))
    name = f"b{j}-{draw(st.integers(0, 3))}"
    if kind == "delete-pod":
        return ("Pod", "DELETED", f.pod(name, group=f"b{j}"))
    run = kind == "run"
    return (
        "Pod",
        "MODIFIED",
        f.pod(
            name,
            group=f"b{j}",
            cpu="1",
            phase="Running" if run else "Pending",
            node_name="n0" if run else None,
        ),
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.tuples(backlog_step(), st.booleans(), st.integers(0, 1)), min_size=1, max_size=20
    ),
    config_index=st.sampled_from([0, 1, 3]),
    few=st.sampled_from([0, keptruns.FEW]),
)
def test_a_changing_backlog_decides_as_orders_built_afresh(
    steps: list[tuple[Event, bool, int]], config_index: int, few: int
) -> None:
    """Like ``test_kept_runs_decide_as_orders_built_afresh`` on a backlog, where the order
    decides which jobs run."""
    with switched(few, (keptruns, "FEW")):
        _backlog_against_plain(steps, CONFIGS[config_index], _plain)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.tuples(backlog_step(), st.booleans(), st.integers(0, 1)), min_size=1, max_size=20
    ),
    config_index=st.sampled_from([0, 1, 3, 5]),
)
def test_kept_shapes_decide_as_shapes_worked_out_afresh(
    steps: list[tuple[Event, bool, int]], config_index: int
) -> None:
    """allocate's failed-attempt shapes kept by job version (``KEEP_SHAPES``) replay the same
    failures as shapes worked out afresh in every session, on a changing backlog whose jobs
    mostly fail session after session."""
    _backlog_against_plain(
        steps, CONFIGS[config_index], lambda: switched(False, (allocate, "KEEP_SHAPES"))
    )


def _backlog_against_plain(
    steps: list[tuple[Event, bool, int]],
    config: Any,
    plain: Callable[[], AbstractContextManager[None]],
) -> None:
    """``_backlog`` through two kept schedulers, one of them under ``plain``, after each step
    (dispatched or not, with sessions that see nothing new): the same decisions."""
    caches = ClusterCache(), ClusterCache()
    _backlog(caches, 12)
    fast, slow = (Scheduler(c, config) for c in caches)
    for i, (event, dispatch, idle) in enumerate(steps):
        for cache in caches:
            cache.apply(*event)
        for k in range(idle + 1):
            got = fast.run_once(NOW + i + k / 10)
            with plain():
                want = slow.run_once(NOW + i + k / 10)
            assert _exact(got) == _exact(want), (i, k, event)
        if dispatch:
            _replay(caches[0], got)
            _replay(caches[1], want)
