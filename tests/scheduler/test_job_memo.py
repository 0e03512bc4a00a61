"""Answers kept across sessions by job version decide as answers asked again in every session.

``framework/jobmemo.py`` keeps, for extension points whose callbacks are all declared pure per
job (priority, gang, drf), each job's JobValid, JobStarving and JobOrder answers under its
version, and the actions' job filters built on them. These tests drive two caches through the
same random histories of watch events (pods added, bound, finished, deleted; PodGroups added,
changed and deleted; queues; priority classes; nodes changing capacity) with sessions after
every step, one cache with the kept answers (``jobmemo.KEEP``) and one without, and demand the
same binds, pipelines, evictions, statuses, reasons, queue metrics and events.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.model.info import JobInfo
from batch.scheduler import load_config, run_session
from batch.scheduler.config import TEPHRA_DEFAULT_CONFIG
from batch.scheduler.cycle import Kit
from batch.scheduler.framework import jobmemo
from batch.scheduler.framework.dispatch import Dispatch
from batch.scheduler.framework.hooks import Hooks
from batch.scheduler.framework.session import Session

from .test_incremental import Event, _base, _comparable, _replay, step
from .util import BASIC, NOW

#: the last one adds sjf, whose key reads the session's clock: its job order is not kept
SJF = TEPHRA_DEFAULT_CONFIG.replace("  - name: nodeorder\n", "  - name: nodeorder\n  - name: sjf\n")
CONFIGS = [load_config(BASIC), load_config(TEPHRA_DEFAULT_CONFIG), load_config(SJF)]


def _session(cache: ClusterCache, index: int, now: float, *, keep: bool, kit: Kit | None) -> Any:
    was = jobmemo.KEEP
    jobmemo.KEEP = keep
    try:
        d = run_session(cache, CONFIGS[index], now=now, kit=kit)
    finally:
        jobmemo.KEEP = was
    return {**_comparable(d), "events": d.events}, d


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(st.tuples(step(), st.booleans(), st.integers(0, 2)), min_size=1, max_size=25),
    config_index=st.integers(0, 2),
    with_kit=st.booleans(),
)
def test_kept_job_answers_decide_as_asked_again(
    steps: list[tuple[Event, bool, int]], config_index: int, with_kit: bool
) -> None:
    kept, asked = ClusterCache(), ClusterCache()
    for event in _base():
        _replay(kept, event)
        _replay(asked, event)
    kit = Kit(CONFIGS[config_index]) if with_kit else None
    for i, (event, dispatch, idle) in enumerate(steps):
        _replay(kept, event)
        _replay(asked, event)
        for k in range(idle + 1):  # sessions with nothing new in between
            now = NOW + i + k / 10
            got, d = _session(kept, config_index, now, keep=True, kit=kit)
            want, _ = _session(asked, config_index, now, keep=False, kit=None)
            assert got == want, (i, k, event)
        if dispatch:  # binds assumed (Binding) and evictions assumed (Releasing)
            _replay(kept, d)
            _replay(asked, d)


def _backlog(jobs: int, *, priority: bool = False) -> list[Event]:
    """Single-pod jobs on one node too small for most of them (most stay pending)."""
    events: list[Event] = [("Queue", "ADDED", f.queue("root")), ("Queue", "ADDED", f.queue("q"))]
    events.append(("Node", "ADDED", f.node("n0", cpu="3", gpu=1)))
    for j in range(jobs):
        pc = "high" if priority and j % 3 == 0 else None
        events.append(
            (
                "PodGroup",
                "ADDED",
                f.podgroup(f"b{j}", queue="q", phase="Inqueue", min_member=1, priority_class=pc),
            )
        )
        events.append(("Pod", "ADDED", f.pod(f"b{j}-0", group=f"b{j}", cpu="1")))
    return events


@pytest.mark.parametrize("config_index", [0, 1, 2])
def test_a_backlog_keeps_its_answers_and_follows_a_priority_change(config_index: int) -> None:
    """A backlog scheduled again and again: the kept answers serve the later sessions, and a
    PriorityClass that appears (no job's version moves) reorders the jobs as asked again."""
    kept, asked = ClusterCache(), ClusterCache()
    for event in _backlog(12, priority=True):
        _replay(kept, event)
        _replay(asked, event)
    for i in range(4):
        if i == 2:
            for c in (kept, asked):
                c.apply("PriorityClass", "ADDED", f.priority_class("high", 50))
        got, _ = _session(kept, config_index, NOW + i, keep=True, kit=None)
        want, _ = _session(asked, config_index, NOW + i, keep=False, kit=None)
        assert got == want, i
    memos = kept.derived[jobmemo.KEY]
    assert isinstance(memos, jobmemo.JobMemos)
    assert len(memos.tables["job_valid"].data) == 12
    assert ("job_order" in memos.tables) == (config_index != 2)  # sjf's key is not kept


def test_a_point_with_an_undeclared_callback_is_asked_every_time() -> None:
    hooks = Hooks(1)
    cfg = load_config(BASIC)
    memos = jobmemo.JobMemos(cfg)
    opt = cfg.tiers[0].plugins[0]
    calls: list[str] = []
    with hooks.opening(0, opt):
        hooks.add_job_starving_fn(lambda j: calls.append(j.uid) is None, pure=True)
    dispatch = Dispatch(hooks, memos)
    job = JobInfo("ns/j", "ns", "j", dims=4)
    assert dispatch.job_starving(job) and dispatch.job_starving(job)
    assert calls == ["ns/j"]  # kept after the first answer
    job.touch()
    assert dispatch.job_starving(job)
    assert len(calls) == 2  # a new version is asked again
    with hooks.opening(0, opt):
        hooks.add_job_starving_fn(lambda j: True)  # not declared: nothing is kept
    dispatch = Dispatch(hooks, memos)
    assert dispatch.job_starving(job) and dispatch.job_starving(job)
    assert len(calls) == 4  # asked at each call again


def test_session_without_the_switch_keeps_nothing() -> None:
    cache = ClusterCache()
    for event in _backlog(3):
        _replay(cache, event)
    _session(cache, 1, NOW, keep=False, kit=None)
    assert jobmemo.KEY not in cache.derived
    assert Session.skip_settled  # untouched by these tests


@pytest.mark.parametrize("config_index", [0, 1, 2])
def test_a_job_that_became_ready_is_ordered_anew(config_index: int) -> None:
    """j1 goes first while neither job has a running pod; once j1 has one (a new version:
    gang's key says ready, drf's share is above zero) j2 goes first, kept answers or not."""
    kept, asked = ClusterCache(), ClusterCache()
    events: list[Event] = [("Queue", "ADDED", f.queue("root")), ("Queue", "ADDED", f.queue("q"))]
    events.append(("Node", "ADDED", f.node("n0", cpu="2")))
    events.append(("Pod", "ADDED", f.pod("x", cpu="1", node_name="n0", phase="Running")))
    for j in ("j1", "j2"):
        events.append(("PodGroup", "ADDED", f.podgroup(j, queue="q", phase="Inqueue")))
    events.append(("Pod", "ADDED", f.pod("j1-1", group="j1", cpu="1")))
    events.append(("Pod", "ADDED", f.pod("j2-0", group="j2", cpu="1")))
    later: list[Event] = [("Pod", "DELETED", f.pod("x", cpu="1", node_name="n0"))]
    later.append(
        ("Pod", "ADDED", f.pod("j1-0", group="j1", cpu="1", node_name="n0", phase="Running"))
    )
    binds = []
    for step_events in (events, later):
        for event in step_events:
            _replay(kept, event)
            _replay(asked, event)
        got, d = _session(kept, config_index, NOW, keep=True, kit=None)
        want, _ = _session(asked, config_index, NOW, keep=False, kit=None)
        assert got == want
        binds.append([b.name for b in d.binds])
    assert binds == [["j1-1"], ["j2-0"]]


PREEMPT = """
actions: "enqueue, allocate, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def test_a_job_that_starts_starving_preempts() -> None:
    """A high-priority job without pods is not starving; once it has a pending pod (a new
    version) it is, and preempt evicts a low-priority pod for it, kept answers or not."""
    cfg = load_config(PREEMPT)
    kept, asked = ClusterCache(), ClusterCache()
    events: list[Event] = [("Queue", "ADDED", f.queue("root")), ("Queue", "ADDED", f.queue("q"))]
    events += [("PriorityClass", "ADDED", f.priority_class(n, v)) for n, v in (("hi", 100),)]
    events.append(("PriorityClass", "ADDED", f.priority_class("lo", -5)))
    events.append(("Node", "ADDED", f.node("n0", cpu="2")))
    events.append(("PodGroup", "ADDED", f.podgroup("low", queue="q", priority_class="lo")))
    for i in range(2):
        pod = f.pod(f"low-{i}", group="low", cpu="1", node_name="n0", phase="Running")
        events.append(("Pod", "ADDED", pod))
    events.append(
        ("PodGroup", "ADDED", f.podgroup("high", queue="q", phase="Inqueue", priority_class="hi"))
    )
    later: list[Event] = [("Pod", "ADDED", f.pod("high-0", group="high", cpu="1"))]
    evicted = []
    for step_events in (events, later):
        for event in step_events:
            _replay(kept, event)
            _replay(asked, event)
        was = jobmemo.KEEP
        try:
            got = run_session(kept, cfg, now=NOW)
            jobmemo.KEEP = False
            want = run_session(asked, cfg, now=NOW)
        finally:
            jobmemo.KEEP = was
        assert {**_comparable(got), "events": got.events} == {
            **_comparable(want),
            "events": want.events,
        }
        evicted.append(len(want.evictions))
    assert evicted == [0, 1]
