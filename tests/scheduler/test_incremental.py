"""Sessions on a long-lived cache decide exactly what sessions on a freshly built cache decide.

Proportion, overcommit and session close keep per-queue sums and per-job statuses across
sessions (``batch.scheduler.framework.aggregate``), updated only for jobs whose
``JobInfo.version`` moved. These tests drive one cache through random histories of watch events
(pods added, bound, finished, deleted; PodGroups changing phase, queue and minResources; queues
added; nodes changing capacity, taints and readiness, leaving and coming back) with a session
after every step, and compare each session with one run on a cache that received the same events
but never ran a session before.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.scheduler import Decisions, Scheduler, apply_decisions, load_config, run_session
from batch.scheduler.config import TEPHRA_DEFAULT_CONFIG
from batch.scheduler.framework.aggregate import JobSums
from batch.scheduler.framework.session import Session

from .util import BASIC, NOW

#: drf's hierarchy registers callbacks every session beside its kept ones (not with proportion)
HDRF = BASIC.replace("- name: drf\n", "- name: drf\n    enableHierarchy: true\n").replace(
    "  - name: proportion\n", ""
)
CONFIGS = [load_config(BASIC), load_config(TEPHRA_DEFAULT_CONFIG), load_config(HDRF)]
QUEUES = ["qa", "qb", "qc"]
GROUPS = [f"g{i}" for i in range(5)]
NODES = ["n0", "n1", "n2"]
VOLATILE = ("transitionID", "lastTransitionTime")

Event = tuple[str, str, dict[str, Any]]


def _cluster() -> list[Event]:
    events: list[Event] = [("Queue", "ADDED", f.queue("root"))]
    events.append(("PriorityClass", "ADDED", f.priority_class("low", -5)))
    events += [("Queue", "ADDED", f.queue(q, weight=i + 1)) for i, q in enumerate(QUEUES[:2])]
    events += [("Node", "ADDED", f.node(n, cpu="4", gpu=2)) for n in NODES]
    return events


def _base() -> list[Event]:
    events = _cluster()
    events += [
        ("PodGroup", "ADDED", f.podgroup(g, queue=QUEUES[i % 2], phase="Inqueue", min_member=2))
        for i, g in enumerate(GROUPS)
    ]
    return events


@st.composite
def step(draw: st.DrawFn) -> Event:
    kinds = ["pod"] * 6 + ["podgroup", "delete-pod", "queue", "priority", "node"]
    kind = draw(st.sampled_from(kinds))
    group = draw(st.sampled_from(GROUPS))
    if kind == "node":  # capacity, a taint or readiness changes; or the node goes and comes
        name = draw(st.sampled_from(NODES))
        etype = draw(st.sampled_from(["MODIFIED", "MODIFIED", "MODIFIED", "DELETED", "ADDED"]))
        taint = draw(st.booleans())
        return (
            "Node",
            etype,
            f.node(
                name,
                cpu=draw(st.sampled_from(["2", "4", "8"])),
                gpu=draw(st.sampled_from([1, 2])),
                taints=[{"key": "t", "value": "x", "effect": "NoSchedule"}] if taint else None,
                ready=draw(st.booleans()) or not taint,
            ),
        )
    if kind == "queue":
        etype = draw(st.sampled_from(["ADDED", "ADDED", "DELETED"]))
        return ("Queue", etype, f.queue(QUEUES[2], weight=draw(st.integers(1, 3))))
    if kind == "priority":
        value = draw(st.integers(0, 100))
        return ("PriorityClass", "ADDED", f.priority_class("high", value, global_default=True))
    if kind == "podgroup":
        # a 6-CPU minimum makes overcommit's budget (1.2 x the nodes' total) bind
        mrs = [{"cpu": "2"}, {"cpu": "6"}, {"nvidia.com/gpu": "2"}]
        mr = draw(st.one_of(st.none(), st.sampled_from(mrs)))
        pg = f.podgroup(
            group,
            min_member=draw(st.integers(1, 3)),
            queue=draw(st.sampled_from(QUEUES)),
            phase=draw(st.sampled_from(["Pending", "Inqueue", "Running"])),
            min_resources=mr,
            priority_class=draw(st.sampled_from([None, "low"])),
        )
        etype = draw(st.sampled_from(["ADDED", "MODIFIED", "MODIFIED", "DELETED"]))
        return ("PodGroup", etype, pg)
    index = draw(st.integers(0, 3))
    name = f"{group}-{index}"
    if kind == "delete-pod":
        return ("Pod", "DELETED", f.pod(name, group=group))
    phase = draw(st.sampled_from(["Pending", "Pending", "Pending", "Running", "Succeeded"]))
    node = None if phase == "Pending" else draw(st.sampled_from(NODES))
    gpu = draw(st.one_of(st.none(), st.just(1)))
    return (
        "Pod",
        "MODIFIED",
        f.pod(name, group=group, cpu="1", gpu=gpu, phase=phase, node_name=node),
    )


def _comparable(d: Decisions) -> dict[str, Any]:
    statuses = {
        key: {
            **status,
            "conditions": [
                {k: v for k, v in c.items() if k not in VOLATILE} for c in status["conditions"]
            ],
        }
        for key, status in d.podgroup_status.items()
    }
    return {
        "binds": [(b.name, b.node) for b in d.binds],
        "pipelines": [(p.name, p.node) for p in d.pipelines],
        "evictions": [(e.name, e.reason) for e in d.evictions],
        "podgroup_status": statuses,
        "queue_status": d.queue_status,
        "reasons": {k: (r.kind, r.message) for k, r in d.pending_reasons.items()},
        "queue_metrics": {
            q: (m.amounts(m.deserved), m.amounts(m.inqueue), m.share, m.overused)
            for q, m in d.queue_metrics.items()
        },
    }


def _replay(cache: ClusterCache, event: Event | Decisions) -> None:
    if isinstance(event, Decisions):
        apply_decisions(cache, event)  # what the service does after dispatching a session
    else:
        cache.apply(*event)


def kept_against_plain(
    steps: list[tuple[Event, bool, int]],
    config: Any,
    plain: Callable[[], AbstractContextManager[object]],
    exact: Callable[[Decisions], Any],
) -> None:
    """Two kept ``Scheduler``s on caches that receive the same random history (``step``s, a
    flag to dispatch the session's decisions, a number of sessions with nothing new after it),
    the second's sessions run inside ``plain()`` (a shortcut's switch off): every session's
    ``exact`` output is the same."""
    caches = ClusterCache(), ClusterCache()
    for event in _base():
        for cache in caches:
            _replay(cache, event)
    fast, slow = (Scheduler(cache, config) for cache in caches)
    for i, (event, dispatch, idle) in enumerate(steps):
        for cache in caches:
            _replay(cache, event)
        for k in range(idle + 1):  # sessions with nothing new in between
            now = NOW + i + k / 10
            got = fast.run_once(now)
            with plain():
                want = slow.run_once(now)
            assert exact(got) == exact(want), (i, k, event)
        if dispatch:
            _replay(caches[0], got)
            _replay(caches[1], want)


def _fresh(history: list[Event | Decisions], config_index: int, now: float) -> Decisions:
    cache = ClusterCache()
    for event in history:
        _replay(cache, event)
    return run_session(cache, CONFIGS[config_index], now=now)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(st.tuples(step(), st.booleans()), min_size=1, max_size=25),
    config_index=st.integers(0, 1),
)
def test_incremental_sessions_match_fresh_ones(
    steps: list[tuple[Event, bool]], config_index: int
) -> None:
    cache = ClusterCache()
    history: list[Event | Decisions] = list(_base())
    for event in history:
        _replay(cache, event)
    for i, (event, dispatch) in enumerate(steps):
        _replay(cache, event)
        history.append(event)
        now = NOW + i
        kept = run_session(cache, CONFIGS[config_index], now=now)
        assert _comparable(kept) == _comparable(_fresh(history, config_index, now)), (i, event)
        if dispatch:  # binds assumed (Binding) and evictions assumed (Releasing)
            _replay(cache, kept)
            history.append(kept)


def test_job_sums_follow_versions_and_departures() -> None:
    cache = ClusterCache()
    for kind, etype, obj in _cluster():
        cache.apply(kind, etype, obj)
    cache.apply("PodGroup", "ADDED", f.podgroup("g0", queue="qa", phase="Inqueue"))
    cache.apply("Pod", "ADDED", f.pod("g0-0", group="g0", cpu="1"))
    cpu = cache.resources.index("cpu")
    sums = JobSums.of(cache, "test", (cache.resources.capacity,))
    sums.refresh(cache.jobs, lambda j: j.pending_req)
    assert sums.sums["qa"][cpu] == 1000 and sums.counts == {"qa": 1}
    cache.apply("Pod", "ADDED", f.pod("g0-1", group="g0", cpu="2"))
    stamp = sums.stamps["qa"]
    sums.refresh(cache.jobs, lambda j: j.pending_req)
    assert sums.sums["qa"][cpu] == 3000 and sums.grand[cpu] == 3000
    assert sums.stamps["qa"] > stamp  # a changed sum has a new stamp
    # a new version with the same contribution moves no sum: the stamp stays
    (job,) = cache.jobs.values()
    stamp, version = sums.stamps["qa"], job.version
    cache.apply("PodGroup", "MODIFIED", f.podgroup("g0", queue="qa", phase="Running"))
    assert job.version != version
    sums.refresh(cache.jobs, lambda j: j.pending_req)
    assert sums.sums["qa"][cpu] == 3000 and sums.grand[cpu] == 3000
    assert sums.stamps["qa"] == stamp
    # the job moves to another queue, then leaves: its contribution moves, then goes
    stamp = sums.stamps["qa"]
    cache.apply("PodGroup", "MODIFIED", f.podgroup("g0", queue="qb", phase="Inqueue"))
    sums.refresh(cache.jobs, lambda j: j.pending_req)
    assert "qa" not in sums.sums and sums.sums["qb"][cpu] == 3000
    assert sums.grand[cpu] == 3000 and sums.stamps["qa"] > stamp
    stamp = sums.stamps["qb"]
    sums.refresh({}, lambda j: j.pending_req)
    assert sums.sums == {} and sums.counts == {} and not sums.grand.any()
    assert sums.stamps["qb"] > stamp
    # the same key with another shape starts afresh
    assert JobSums.of(cache, "test", (2, cache.resources.capacity)) is not sums


def _both_paths(cache: ClusterCache, config_index: int, now: float) -> tuple[Decisions, Decisions]:
    """The same session with passes over active jobs only, then over every job."""
    fast = run_session(cache, CONFIGS[config_index], now=now)
    Session.skip_settled = False
    try:
        full = run_session(cache, CONFIGS[config_index], now=now)
    finally:
        Session.skip_settled = True
    return fast, full


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(st.tuples(step(), st.booleans()), min_size=1, max_size=25),
    config_index=st.integers(0, 1),
)
def test_skipping_settled_jobs_decides_as_visiting_all(
    steps: list[tuple[Event, bool]], config_index: int
) -> None:
    """Binds, pipelines, evictions, statuses, reasons and events (in order) are those of the
    full path, on random histories where jobs settle, get victims and come back."""
    cache = ClusterCache()
    for event in _base():
        _replay(cache, event)
    for i, (event, dispatch) in enumerate(steps):
        _replay(cache, event)
        fast, full = _both_paths(cache, config_index, NOW + i)
        assert _comparable(fast) == _comparable(full), (i, event)
        assert fast.events == full.events, (i, event)
        if dispatch:
            _replay(cache, fast)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(step(), st.booleans(), st.integers(0, 1)), min_size=1, max_size=20))
def test_kept_state_survives_a_configuration_change(
    steps: list[tuple[Event, bool, int]],
) -> None:
    """Sessions of either configuration, in any order, on one cache: what is kept across
    sessions under one configuration (statuses, the job index, sums) is not reused under the
    other when it would decide differently."""
    cache = ClusterCache()
    history: list[Event | Decisions] = list(_base())
    for event in history:
        _replay(cache, event)
    for i, (event, dispatch, config_index) in enumerate(steps):
        _replay(cache, event)
        history.append(event)
        kept = run_session(cache, CONFIGS[config_index], now=NOW + i)
        fresh = _fresh(history, config_index, NOW + i)
        assert _comparable(kept) == _comparable(fresh), (i, event, config_index)
        if dispatch:
            _replay(cache, kept)
            history.append(kept)


def _with_events(d: Decisions) -> dict[str, Any]:
    return {**_comparable(d), "events": d.events}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(st.tuples(step(), st.booleans(), st.integers(0, 2)), min_size=1, max_size=25),
    config_index=st.integers(0, 2),
)
def test_kept_scheduler_decides_as_a_fresh_session(
    steps: list[tuple[Event, bool, int]], config_index: int
) -> None:
    """One ``Scheduler`` run after every step of a random history (its plugin and action
    instances, hooks and per-queue and per-job state kept across sessions, sessions with
    nothing new answered from what it kept) decides, reports statuses and emits events
    exactly as a fresh session on a cache that received the same events and never ran one."""
    cache = ClusterCache()
    history: list[Event | Decisions] = list(_base())
    for event in history:
        _replay(cache, event)
    sched = Scheduler(cache, CONFIGS[config_index])
    for i, (event, dispatch, idle) in enumerate(steps):
        _replay(cache, event)
        history.append(event)
        for k in range(idle + 1):  # sessions with nothing new in between
            now = NOW + i + k / 10
            kept = sched.run_once(now)
            fresh = _fresh(history, config_index, now)
            assert _with_events(kept) == _with_events(fresh), (i, k, event)
        if dispatch:
            _replay(cache, kept)
            history.append(kept)


def test_kept_largest_node_follows_allocatable_changes() -> None:
    """A pod larger than every node can never fit; once a node grows (same labels, taints and
    readiness: only its allocatable changes) the kept verdict is judged again, and when the
    node shrinks back, again."""
    cache = ClusterCache()
    for event in _cluster():
        _replay(cache, event)
    cache.apply("PodGroup", "ADDED", f.podgroup("big", queue="qa", phase="Pending"))
    cache.apply("Pod", "ADDED", f.pod("big-0", group="big", cpu="1", gpu=4))
    sched = Scheduler(cache, CONFIGS[1])
    uid = "default/big"
    generations = []
    for i, gpu in enumerate([2, 4, 2]):
        cache.apply("Node", "MODIFIED", f.node("n0", cpu="4", gpu=gpu))
        generations.append(cache.nodes.alloc_gen)
        d = sched.run_once(NOW + i)
        never = d.pending_reasons.get(uid)
        assert (never is not None and never.kind == "NeverFits") == (gpu == 2), (gpu, never)
    assert generations[0] < generations[1] < generations[2]


def test_a_settled_job_a_session_changed_and_undid_is_looked_at_again() -> None:
    """Reclaim evicts a pod of a settled job in a session whose decisions are not dispatched;
    the session's rollback leaves the change log without a mark for it (``ChangeLog.hold``),
    so its close must find the job among the jobs it changed, and the next close must look at
    it again by itself: once the reclaimer is gone, the job's status is its own again, as a
    fresh cache says."""
    history: list[Event | Decisions] = [("Queue", "ADDED", f.queue("root"))]
    history += [("Queue", "ADDED", f.queue(q, weight=1)) for q in QUEUES[:2]]
    history.append(("Node", "ADDED", f.node("n0", cpu="4", gpu=2)))
    history.append(("PodGroup", "ADDED", f.podgroup("x", queue="qa", phase="Running")))
    history += [
        (
            "Pod",
            "ADDED",
            f.pod(f"x-{i}", group="x", cpu="1", gpu=1, node_name="n0", phase="Running"),
        )
        for i in range(2)
    ]
    history.append(("PodGroup", "ADDED", f.podgroup("y", queue="qb", phase="Inqueue")))
    cache = ClusterCache()
    for event in history:
        _replay(cache, event)
    run_session(cache, CONFIGS[1], now=NOW - 1)  # statuses kept from here on
    came: Event = ("Pod", "ADDED", f.pod("y-0", group="y", cpu="1", gpu=1))
    _replay(cache, came)
    history.append(came)
    first = run_session(cache, CONFIGS[1], now=NOW)  # x, settled, is changed in the session
    assert len(first.evictions) == 1  # reclaim takes a pod of x for y
    assert _comparable(first) == _comparable(_fresh(history, 1, NOW))
    gone: Event = ("Pod", "DELETED", f.pod("y-0", group="y", cpu="1", gpu=1))
    _replay(cache, gone)
    history.append(gone)
    second = run_session(cache, CONFIGS[1], now=NOW + 1)
    assert not second.evictions
    assert _comparable(second) == _comparable(_fresh(history, 1, NOW + 1))
