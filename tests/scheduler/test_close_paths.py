"""Session close's shortcuts decide and report exactly what its plain paths do.

Close keeps state across sessions (``close.QueueBook``: queue statuses worked out only for the
queues whose figures moved) and takes per-class steps; each is behind a module-level switch.
These tests run two kept ``Scheduler``s on caches fed the same random history (pods, PodGroups,
queues added, removed and re-parented, nodes), one with the switch on and one with it off, and
demand the same binds, evictions, statuses (PodGroup and queue, in order), reasons and events.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from batch.model import fixtures as f
from batch.scheduler import Decisions, apply_decisions, run_session
from batch.scheduler.framework import close
from batch.scheduler.framework.decisions import Bind, Event as DecisionEvent, Eviction, Pipeline
from batch.scheduler.framework.instances import constructed, forget_sessions
from batch.scheduler.plugins import gang

from .test_batched_paths import CONFIGS as ALIKE_CONFIGS, _cluster, _exact, cluster_st
from .test_incremental import CONFIGS, Event, kept_against_plain, step
from .util import NOW, switched

#: a queue tree that changes: qc under qa, qb or the root, qa under the root or qb
_tree = st.one_of(
    st.builds(
        lambda parent, weight: ("Queue", "ADDED", f.queue("qc", weight=weight, parent=parent)),
        st.sampled_from([None, "qa", "qb"]),
        st.integers(1, 3),
    ),
    st.builds(
        lambda parent: ("Queue", "MODIFIED", f.queue("qa", weight=1, parent=parent)),
        st.sampled_from([None, "qb"]),
    ),
)

SWITCHES = {
    "queues": (close, "QUEUES_THAT_MOVED"),
    "statuses": (close, "ONE_PASS"),
    "gang": (gang, "ONE_PASS"),
}


def _plain(switch: str) -> AbstractContextManager[None]:
    return switched(False, SWITCHES[switch])


def _with_identity(d: Decisions) -> dict[str, Any]:
    """``_exact``, which statuses are new and which queue statuses are one object (the plain
    path shares them)."""
    return {**_exact(d), "new": d.podgroup_status_new, "shared": _shared(d)}


def _shared(d: Decisions) -> list[tuple[int, int]]:
    statuses = list(d.queue_status.values())
    return [(i, j) for i, a in enumerate(statuses) for j, b in enumerate(statuses[:i]) if a is b]


@pytest.mark.parametrize("switch", sorted(SWITCHES))
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.tuples(st.one_of(step(), step(), _tree), st.booleans(), st.integers(0, 2)),
        min_size=1,
        max_size=25,
    ),
    config_index=st.integers(0, 2),
)
def test_close_shortcuts_decide_as_the_plain_path(
    switch: str, steps: list[tuple[Event, bool, int]], config_index: int
) -> None:
    """Kept schedulers with the shortcut on and off, on the same random history, decide,
    report and emit the same, in the same order."""
    kept_against_plain(steps, CONFIGS[config_index], lambda: _plain(switch), _with_identity)


def test_a_queue_placed_in_by_the_last_session_alone_is_restated() -> None:
    """A session places a gang in qa and is not dispatched; a pod of the gang goes, and the
    next session places nothing: qa's (and root's) ``allocated`` drop back, though neither its
    jobs' sums nor its phase counts moved (only the last session's delta did)."""
    pods: list[tuple[Event, bool, int]] = [
        (("Pod", "ADDED", f.pod(f"g0-{i}", group="g0", cpu="1")), False, 0) for i in range(2)
    ]
    gone: tuple[Event, bool, int] = (("Pod", "DELETED", f.pod("g0-1", group="g0")), False, 0)
    seen: list[Decisions] = []

    def exact(d: Decisions) -> dict[str, Any]:
        seen.append(d)
        return _with_identity(d)

    kept_against_plain([*pods, gone], CONFIGS[0], lambda: _plain("queues"), exact)
    placed, after = seen[2], seen[4]  # the fast scheduler's sessions after each step
    assert placed.binds and placed.queue_status["qa"]["allocated"]["cpu"] == "2"
    assert not after.binds and after.queue_status["qa"]["allocated"]["cpu"] == "0"


class _Thing:
    pass


@given(
    built=st.lists(st.sampled_from("abcdef"), unique=True),
    later=st.lists(st.tuples(st.sampled_from("abcdefgh"), st.booleans())),
    count=st.integers(1, 3),
)
def test_forgetting_sessions_leaves_what_was_built(
    built: list[str], later: list[tuple[str, bool]], count: int
) -> None:
    """After any attributes set or deleted in a session, each instance keeps exactly those of
    its built attributes still set (with their values now), and one not built through
    ``constructed`` keeps everything."""
    things = []
    for _ in range(count):
        thing = _Thing()
        for name in built:
            setattr(thing, name, name.upper())
        things.append(constructed(thing))
    bare = _Thing()
    for thing in [*things, bare]:
        for name, keep in later:
            if keep:
                setattr(thing, name, 1)
            elif hasattr(thing, name):
                delattr(thing, name)
    want = [
        {n: v for n, v in vars(t).items() if n in built or n == "_built_attributes"} for t in things
    ]
    everything = dict(vars(bare))
    forget_sessions([*things, bare])
    assert [vars(t) for t in things] == want
    assert vars(bare) == everything


_text = st.sampled_from(["", "a", "b", "default", "n0"])


@given(st.lists(st.tuples(_text, _text, _text, _text, _text, _text), max_size=8))
def test_decision_records_hash_and_compare_by_their_fields(
    fields: list[tuple[str, str, str, str, str, str]],
) -> None:
    """Binds, pipelines, evictions and events built from the same fields are equal and hash
    alike (as frozen ones did), so a set of them counts the distinct field tuples."""
    for kind, width in ((Bind, 5), (Pipeline, 5), (Eviction, 6), (DecisionEvent, 6)):
        made = [kind(*f[:width]) for f in fields]
        again = [kind(*f[:width]) for f in fields]
        assert made == again
        assert [hash(r) for r in made] == [hash(r) for r in again]
        assert len(set(made)) == len({f[:width] for f in fields})


@pytest.mark.parametrize("switch", ["statuses", "gang"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    **cluster_st(),
    config_index=st.integers(0, 1),
)
def test_close_of_many_alike_jobs_decides_as_the_plain_path(
    switch: str,
    nodes: int,
    weights: list[int],
    jobs: list[tuple[Any, ...]],
    busy: bool,
    config_index: int,
) -> None:
    """Many small jobs with equal counters, most left unready (the burst's case): three
    sessions in a row on one cache (the second's binds applied before the third), each
    compared with the plain path's on a twin cache."""
    caches = [_cluster(nodes, weights, jobs, busy) for _ in range(2)]
    cfg = ALIKE_CONFIGS[config_index]
    for r in range(3):
        fast = run_session(caches[0], cfg, now=NOW + r)
        with _plain(switch):
            slow = run_session(caches[1], cfg, now=NOW + r)
        assert _with_identity(fast) == _with_identity(slow), r
        if r == 1:  # the binds land: the third session sees them bound
            apply_decisions(caches[0], fast)
            apply_decisions(caches[1], slow)
