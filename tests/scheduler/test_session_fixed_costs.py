"""Shortcuts of a session's fixed costs (open, close, release) decide as the long way round.

Each shortcut that keeps something across sessions or skips rebuilding it (``SWITCHES``) has a
module-level switch; these tests drive two kept schedulers through the same random histories
of watch events, one with the shortcuts and one without, and demand the same binds,
pipelines, evictions, statuses (transition IDs and times included), reasons, queue statuses,
queue metrics and events, session after session.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.scheduler import Decisions, load_config
from batch.scheduler.cycle import open_session
from batch.scheduler.framework import (
    aggregate,
    hooks as hooks_mod,
    nodes as nodes_mod,
    session as session_mod,
    shares as shares_mod,
)
from batch.scheduler.framework.aggregate import JobSums
from batch.scheduler.framework.hooks import Point

from .test_incremental import (
    CONFIGS,
    QUEUES,
    Event,
    _comparable,
    kept_against_plain,
    step,
)
from .util import BASIC, NOW, switched

#: (module, switch name) of every shortcut compared here
SWITCHES: list[tuple[Any, str]] = [
    (hooks_mod, "CLEAR_TO_SNAPSHOT"),
    (hooks_mod, "PURITY_BY_VERSION"),
    (aggregate, "MOVE_IN_PLACE"),
    (session_mod, "FOLD_OPEN"),
    (session_mod, "KEEP_ACTIVE"),
    (nodes_mod, "KEEP_VALID"),
    (shares_mod, "KEEP_POSITIVE_DIMS"),
]

#: a step of a random history: a watch event of ``test_incremental``, or a queue under another
#: (its ``allocated`` is summed into its parent's and root's)
history_step = st.one_of(
    step(),
    st.builds(
        lambda w: ("Queue", "ADDED", f.queue(QUEUES[2], weight=w, parent=QUEUES[0])),
        st.integers(1, 3),
    ),
)


def _off(which: set[int]) -> AbstractContextManager[None]:
    return switched(False, *(SWITCHES[i] for i in sorted(which)))


def _exact(d: Decisions) -> dict[str, Any]:
    return {
        **_comparable(d),
        "podgroup_status": d.podgroup_status,
        "podgroup_status_new": d.podgroup_status_new,
        "events": d.events,
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.tuples(history_step, st.booleans(), st.integers(0, 2)),
        min_size=1,
        max_size=20,
    ),
    config_index=st.integers(0, len(CONFIGS) - 1),
    off=st.sets(st.integers(0, len(SWITCHES) - 1), min_size=1),
)
def test_shortcuts_decide_as_the_long_way(
    steps: list[tuple[Event, bool, int]], config_index: int, off: set[int]
) -> None:
    kept_against_plain(steps, CONFIGS[config_index], lambda: _off(off), _exact)


#: a session's registrations: (tier, rank, kept) per callback, in registration order
session_st = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 4), st.booleans()),
    min_size=0,
    max_size=8,
)


def _state(p: Point[Any]) -> tuple[Any, ...]:
    return (p.tiers, p.ranks, p.pure, p.kept, p.flat())


@settings(max_examples=200, deadline=None)
@given(sessions=st.lists(session_st, min_size=1, max_size=6))
def test_point_clear_from_snapshot_leaves_the_kept_entries(
    sessions: list[list[tuple[int, int, bool]]],
) -> None:
    """Random registrations (kept or not, any tier and rank) and clears leave a point exactly
    as filtering every entry by its kept flag does."""
    fast: Point[Any] = Point("p", 3)
    slow: Point[Any] = Point("p", 3)
    for s, regs in enumerate(sessions):
        for n, (tier, rank, kept) in enumerate(regs):
            fn = (s, n)
            fast.add(tier, f"plugin{rank}", fn, rank, pure=n % 2 == 0, kept=kept)
            slow.add(tier, f"plugin{rank}", fn, rank, pure=n % 2 == 0, kept=kept)
            assert _state(fast) == _state(slow)
        fast.clear()
        with _off({0}):
            slow.clear()
        assert _state(fast) == _state(slow)
        assert fast.version == slow.version


@settings(max_examples=200, deadline=None)
@given(
    sessions=st.lists(
        st.lists(
            st.tuples(st.integers(0, 2), st.integers(0, 4), st.booleans(), st.integers(0, 2)),
            max_size=6,
        ),
        min_size=1,
        max_size=6,
    )
)
def test_point_purity_by_version_answers_as_worked_out_anew(
    sessions: list[list[tuple[int, int, bool, int]]],
) -> None:
    """Registrations of pure, impure and token-declaring callbacks, clears and tokens that
    move: ``purity`` answers as when worked out from the entries every time."""
    point: Point[Any] = Point("p", 3)
    now = [0]

    def token() -> object:
        return now[0]

    def both() -> tuple[Any, Any]:
        fast = point.purity()
        with _off({1}):
            slow = point.purity()
        return fast, slow

    for s, regs in enumerate(sessions):
        for tier, rank, kept, how in regs:
            pure: Any = (False, True, token)[how]
            point.add(tier, f"plugin{rank}", lambda j, s=s: s, rank, pure=pure, kept=kept)
            fast, slow = both()
            assert fast == slow
            now[0] += 1
            fast, slow = both()
            assert fast == slow
        point.clear()
        fast, slow = both()
        assert fast == slow


#: one change of a job kept in ``JobSums``: (job, its queue, its contribution or None; a job
#: whose contribution is [0, 0, 7] leaves)
sums_change = st.tuples(
    st.integers(0, 4),
    st.sampled_from(QUEUES),
    st.one_of(
        st.none(),
        st.just([0, 0, 7]),
        st.lists(st.integers(-(2**40), 2**40), min_size=3, max_size=3),
    ),
)


class _Job:
    """What ``JobSums`` reads of a job."""

    def __init__(self, uid: str, queue: str, version: int) -> None:
        self.uid, self.queue, self.version = uid, queue, version


@settings(max_examples=200, deadline=None)
@given(changes=st.lists(st.lists(sums_change, max_size=6), min_size=1, max_size=8))
def test_job_sums_moved_in_place_as_dropped_and_added(
    changes: list[list[tuple[int, str, list[int] | None]]],
) -> None:
    """Jobs whose contributions change, move between queues, turn None and leave: the sums,
    counts and grand total moved in place are those of dropping and adding, and a queue's
    stamp moves whenever its sum does."""
    fast = JobSums.of(ClusterCache(), "t", (3,))
    slow = JobSums.of(ClusterCache(), "t", (3,))
    values: dict[str, tuple[str, list[int] | None]] = {}

    def contribution(job: Any) -> Any:
        v = values[job.uid][1]
        return None if v is None else np.array(v, dtype=np.int64)

    for n, batch in enumerate(changes):
        for i, queue, value in batch:
            values[f"j{i}"] = (queue, value)
        jobs: Any = {
            uid: _Job(uid, q, n * 10 + i)
            for i, (uid, (q, v)) in enumerate(values.items())
            if v != [0, 0, 7]
        }
        stamps = dict(fast.stamps)
        old = {q: v.tolist() for q, v in fast.sums.items()}
        fast.refresh(jobs, contribution)
        with _off({SWITCHES.index((aggregate, "MOVE_IN_PLACE"))}):
            slow.refresh(jobs, contribution)
        got = {q: v.tolist() for q, v in fast.sums.items()}
        assert got == {q: v.tolist() for q, v in slow.sums.items()}
        assert fast.counts == slow.counts and fast.grand.tolist() == slow.grand.tolist()
        for q, v in got.items():
            if old.get(q) != v:
                assert fast.stamps.get(q) != stamps.get(q), q


node_event = st.tuples(
    st.sampled_from(["n0", "n1", "n2"]),
    st.sampled_from(["ADDED", "MODIFIED", "MODIFIED", "DELETED"]),
    st.booleans(),
    st.sampled_from(["2", "4"]),
)


@settings(max_examples=100, deadline=None)
@given(events=st.lists(node_event, min_size=1, max_size=12))
def test_kept_node_mask_follows_readiness_and_membership(
    events: list[tuple[str, str, bool, str]],
) -> None:
    """Nodes that turn ready or not, leave and come back: a session's kept ``valid`` and
    total are those worked out afresh (the random histories above make a node unready only
    with a taint, which hides it from placements anyway)."""
    cache = ClusterCache()
    for name, etype, ready, cpu in events:
        cache.apply("Node", etype, f.node(name, cpu=cpu, gpu=1, ready=ready))
        got = nodes_mod.SessionNodes(cache)
        with _off({SWITCHES.index((nodes_mod, "KEEP_VALID"))}):
            want = nodes_mod.SessionNodes(cache)
        assert got.valid.tolist() == want.valid.tolist()
        assert got.alloc_total().tolist() == want.alloc_total().tolist()


@settings(max_examples=200, deadline=None)
@given(
    vectors=st.lists(
        st.tuples(
            st.lists(st.sampled_from([0, 1, -1, 2, 0.5, -0.0]), min_size=4, max_size=4),
            st.booleans(),
        ),
        min_size=1,
    )
)
def test_kept_positive_dims_are_worked_out_afresh(
    vectors: list[tuple[list[float], bool]],
) -> None:
    """Integer and float vectors, asked again and again: the kept answers are the fresh ones."""
    for values, whole in vectors:
        v = np.array([int(x) for x in values] if whole else values)
        got = shares_mod.positive_dims(v)
        with _off({SWITCHES.index((shares_mod, "KEEP_POSITIVE_DIMS"))}):
            want = shares_mod.positive_dims(v)
        assert got.tolist() == want.tolist()


@settings(max_examples=60, deadline=None)
@given(
    kinds=st.lists(st.booleans(), min_size=1, max_size=12),
    ops=st.lists(st.one_of(st.integers(0, 11), st.none()), max_size=20),
)
def test_kept_active_jobs_follow_each_touch(kinds: list[bool], ops: list[int | None]) -> None:
    """Jobs settled at open (True: running) or not, touched one by one (an in-session phase)
    with ``active_jobs`` asked between the touches (None): each answer is the one worked out
    afresh from a position table of every job, in order."""
    c = ClusterCache()
    c.apply("Queue", "ADDED", f.queue("root"))
    c.apply("Queue", "ADDED", f.queue("default"))
    c.apply("Node", "ADDED", f.node("n0", cpu="64", memory="64Gi"))
    for i, running in enumerate(kinds):
        c.apply("PodGroup", "ADDED", f.podgroup(f"j{i}", phase="Running" if running else "Inqueue"))
        node = {"node_name": "n0", "phase": "Running"} if running else {}
        c.apply("Pod", "ADDED", f.pod(f"j{i}-0", group=f"j{i}", cpu="1", **node))
    ssn = open_session(c, load_config(BASIC), now=NOW)
    jobs = list(ssn.jobs.values())
    try:
        for op in [*ops, None]:
            if op is not None:
                ssn.set_phase(jobs[op % len(jobs)], "Running")
                continue
            kept = ssn.active_jobs()
            with _off({SWITCHES.index((session_mod, "KEEP_ACTIVE"))}):
                assert ssn.active_jobs() == kept
    finally:
        ssn.rollback()
        ssn.release()
