"""Shortcuts of the passes over every job that Tephra's own preset (preempt, reclaim,
gangreclaim, proportion's borrowing) adds decide as the plain paths.

Each shortcut of ``SWITCHES`` has a module-level switch: two kept schedulers run the same random
histories of watch events (jobs, pods, queues and nodes changing between sessions), one with
some switches off, and must decide alike, session after session, under every configuration of
``test_incremental`` (the Tephra preset among them). Direct tests hold each shortcut to its
plain answer where the histories rarely tell them apart.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.model.info import JobInfo
from batch.model.status import TaskStatus
from batch.scheduler.actionlib import queue_floor, victims
from batch.scheduler.actionlib.queue_floor import QueueLedger
from batch.scheduler.actionlib.victims import NodeTasks
from batch.scheduler.cycle import open_session
from batch.scheduler.framework import feasibility, session as session_mod
from batch.scheduler.framework.session import Session
from batch.scheduler.plugins.proportion import borrowing

from ..model.test_info import _task
from .test_incremental import CONFIGS, NODES, QUEUES, Event, _base, kept_against_plain, step
from .test_session_fixed_costs import _exact
from .util import NOW, switched

#: (module, switch name) of every shortcut compared here
SWITCHES: list[tuple[Any, str]] = [
    (feasibility, "COUNT_FIRST"),
    (borrowing, "NEED_PER_INPUT"),
    (session_mod, "KEEP_ACTIVE"),
    (queue_floor, "SKIP_IDLE_JOBS"),
    (victims, "BULK_START"),
    (feasibility, "HOIST"),
]


def _off(which: set[int]) -> AbstractContextManager[None]:
    return switched(False, *(SWITCHES[i] for i in sorted(which)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.tuples(step(), st.booleans(), st.integers(0, 2)),
        min_size=1,
        max_size=20,
    ),
    config_index=st.integers(0, len(CONFIGS) - 1),
    off=st.sets(st.integers(0, len(SWITCHES) - 1), min_size=1),
)
def test_preset_shortcuts_decide_as_the_plain_paths(
    steps: list[tuple[Event, bool, int]], config_index: int, off: set[int]
) -> None:
    kept_against_plain(steps, CONFIGS[config_index], lambda: _off(off), _exact)


_statuses = st.sampled_from(list(TaskStatus))
#: a pod's request: pods dimension 1, resources often zero (a pod asking for nothing placed
#: leaves ``allocated`` at zero on every resource)
_req = st.lists(st.sampled_from([0, 0, 1, 2, 1000]), min_size=3, max_size=3).map(
    lambda r: np.array([1, *r], dtype=np.int64)
)


def _job(
    tasks: list[tuple[TaskStatus, np.ndarray]], moves: list[tuple[int, TaskStatus]]
) -> JobInfo:
    """A job with ``tasks`` added, then ``moves`` (task index, new status) applied."""
    job = JobInfo(uid="ns/j", namespace="ns", name="j", dims=4)
    made = [_task(f"t{i}", status, req) for i, (status, req) in enumerate(tasks)]
    for t in made:
        job.add_task(t)
    for i, status in moves:
        if made:
            job.set_status(made[i % len(made)], status)
    return job


_tasks = st.lists(st.tuples(_statuses, _req), max_size=5)
_moves = st.lists(st.tuples(st.integers(0, 4), _statuses), max_size=6)


@settings(max_examples=300, deadline=None)
@given(tasks=_tasks, moves=_moves)
def test_nothing_placed_by_counts_is_the_vector(
    tasks: list[tuple[TaskStatus, np.ndarray]], moves: list[tuple[int, TaskStatus]]
) -> None:
    """Told by the task counts or read from ``allocated``, through tasks added and moved
    between statuses (requests of zero included), "nothing placed" is the same answer."""
    job = _job(tasks, moves)
    with switched(True, SWITCHES[0]):
        fast = feasibility.nothing_placed(job)
    assert fast == (not job.allocated[1:].any())


@settings(max_examples=300, deadline=None)
@given(
    pairs=st.lists(
        st.tuples(_tasks, _moves, st.sampled_from(["Pending", "Inqueue", "Running"])),
        min_size=2,
        max_size=2,
    ),
    mrs=st.lists(st.one_of(st.none(), _req), min_size=2, max_size=2),
)
def test_a_need_input_names_the_need(
    pairs: list[tuple[list[tuple[TaskStatus, np.ndarray]], list[tuple[int, TaskStatus]], str]],
    mrs: list[np.ndarray | None],
) -> None:
    """Two jobs with the same ``_need_input`` need the same (bit for bit); a job without one
    needs nothing."""
    jobs = []
    for (tasks, moves, phase), mr in zip(pairs, mrs, strict=True):
        job = _job(tasks, moves)
        job.phase, job.min_resources = phase, mr
        jobs.append(job)
    keys = [borrowing._need_input(j) for j in jobs]
    needs = [borrowing._need(j) for j in jobs]
    for key, need in zip(keys, needs, strict=True):
        assert (key is None) == (need is None)
    if keys[0] is not None and keys[0] == keys[1]:
        assert needs[0] is not None and needs[1] is not None
        assert needs[0].tobytes() == needs[1].tobytes()


def _session_after(steps: list[Event]) -> Session:
    cache = ClusterCache()
    for event in [*_base(), *steps]:
        cache.apply(*event)
    return open_session(cache, CONFIGS[1], now=NOW)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(step(), min_size=1, max_size=25),
    touch=st.lists(st.integers(0, 40), max_size=8),
)
def test_kept_active_jobs_are_in_the_jobs_order(steps: list[Event], touch: list[int]) -> None:
    """After random histories (jobs deleted and re-created under their ids), with jobs the
    session changed (settled ones among them, in any order), ``active_jobs`` kept and merged by
    ordinal is the same list as ordered by place in the session's jobs."""
    ssn = _session_after(steps)
    jobs = list(ssn.jobs.values())
    for i in touch:
        if jobs:
            job = jobs[i % len(jobs)]
            ssn.set_phase(job, "Running" if job.phase != "Running" else "Inqueue")
        with switched(True, SWITCHES[2]):
            fast = ssn.active_jobs()
        with switched(False, SWITCHES[2]):
            slow = ssn.active_jobs()
        assert [j.uid for j in fast] == [j.uid for j in slow]
    ssn.rollback()
    ssn.release()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step(), min_size=1, max_size=30))
def test_ledger_without_idle_jobs_is_the_plain_one(steps: list[Event]) -> None:
    """The queue ledger's sums are the same leaving out jobs that hold nothing."""
    ssn = _session_after(steps)
    got = []
    for on in (True, False):
        with switched(on, SWITCHES[3]):
            ledger = QueueLedger(ssn)
            ledger.active = False
        got.append({q: v.tolist() for q, v in ledger.alloc.items()})
    assert got[0] == got[1]
    ssn.rollback()
    ssn.release()


#: a history's jobs (by index among the session's, sorted by uid) and queues to exhaust
_exhaust = {"jobs": st.sets(st.integers(0, 6)), "groups": st.sets(st.sampled_from(QUEUES))}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step(), min_size=1, max_size=30), **_exhaust)
def test_victim_sums_after_start_are_the_plain_ones(
    steps: list[Event], jobs: set[int], groups: set[str]
) -> None:
    """Exhausted jobs and groups (any of them) leave the victim sums, the candidates and the
    exhausted sets of ``NodeTasks.start`` the same, taken out together or one by one."""
    ssn = _session_after(steps)
    uids = sorted(ssn.jobs)
    exhausted = {uids[i % len(uids)] for i in jobs} if uids else set()
    got = []
    for on in (True, False):
        with switched(on, SWITCHES[4]):
            index = NodeTasks(ssn, group_of=lambda t, j: j.queue)
            index.job_exhausted = lambda j: j.uid in exhausted
            index.group_exhausted = lambda g: g in groups
            index.start()
            index.close()
        got.append(
            (
                index.per_group.tolist(),
                index.total.tolist(),
                sorted(index.counted),
                sorted(index.ex_jobs),
                sorted(index.ex_groups),
            )
        )
    assert got[0] == got[1]
    ssn.rollback()
    ssn.release()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step(), min_size=1, max_size=30), shrink=st.booleans())
def test_inadmissible_jobs_hoisted_are_the_plain_ones(steps: list[Event], shrink: bool) -> None:
    """The gangs that can never fit (many of them once the cluster shrinks to one node) are
    the same judged with the session's tables looked up once or per job."""
    if shrink:
        steps = [*steps, *(("Node", "DELETED", f.node(n, cpu="4", gpu=2)) for n in NODES[1:])]
    got = []
    for on in (True, False):
        ssn = _session_after(steps)
        with switched(on, SWITCHES[5]):
            got.append(
                {uid: why.message for uid, why in feasibility.inadmissible_jobs(ssn).items()}
            )
        ssn.rollback()
        ssn.release()
    assert got[0] == got[1]
