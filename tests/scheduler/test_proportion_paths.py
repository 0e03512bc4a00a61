"""proportion's cheaper per-session paths decide exactly what the plain ones decide.

The water-filling on Python floats (``FLOAT_FILL_MAX``, floatfill.py) must give the numpy
form's deserved shares bit for bit: compared directly on random queues (weights, guarantees,
capabilities, requests, with ties and zeros), and through whole sessions with the switch on and
off. Callbacks registered once per ``Hooks`` (``ProportionPlugin.keeps_callbacks``) and the
feasibility worlds kept across sessions (``feasibility.KEEP_WORLDS``) must decide as the plain
paths, on random histories with kept schedulers; so must ``shares.nearer_on`` on Python floats
(``SCALAR_NEARER``), which is also compared with its vector form on random vectors.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.model.info import QueueInfo
from batch.scheduler import Decisions, apply_decisions, load_config, run_session
from batch.scheduler.config import TEPHRA_DEFAULT_CONFIG
from batch.scheduler.framework import feasibility, shares
from batch.scheduler.framework.shares import TOL
from batch.scheduler.plugins import proportion
from batch.scheduler.plugins.proportion import QueueAttr, figures

from .test_batched_paths import _cluster, _exact as _decided, cluster_st
from .test_incremental import Event, kept_against_plain, step
from .util import BASIC, NOW, switched

INF = float("inf")

#: amounts as the scheduler sees them (whole numbers: millicores, bytes, GPUs), small ones in
#: steps of 0.05 (a share within the 0.1 tolerance of a request is likely) and any fractions,
#: with ties (equal amounts) likely
_amount = st.one_of(
    st.sampled_from([0.0, 0.0, 1.0, 2.0, 3.0, 8.0, 1000.0, 4e12]),
    st.integers(0, 200).map(lambda x: x / 20),
    st.integers(0, 10**6).map(float),
    st.floats(0, 1e13, allow_nan=False, allow_infinity=False).map(abs),
)
_cap = st.one_of(st.just(INF), _amount)
_guarantee = st.one_of(st.just(0.0), st.just(0.0), _amount)


@st.composite
def _queues(draw: st.DrawFn) -> tuple[list[QueueAttr], np.ndarray, np.ndarray]:
    """Queues (weight, guarantee, capability, request) and the cluster's total."""
    width = draw(st.integers(2, 6))
    n = draw(st.integers(1, 12))
    frozen = draw(st.booleans())  # read-only vectors (kept stacked) or not

    def row(amounts: st.SearchStrategy[float], first: float) -> np.ndarray:
        v = np.array([first, *draw(st.lists(amounts, min_size=width - 1, max_size=width - 1))])
        v.flags.writeable = not frozen
        return v

    zero = np.zeros(width)
    attrs = [
        QueueAttr(
            queue=QueueInfo(name=f"q{i}", uid=f"q{i}"),
            weight=draw(st.sampled_from([0, 1, 1, 2, 3, 7, 10**6])),
            guarantee=row(_guarantee, 0.0),
            capability=zero,
            real_capability=row(_cap, INF),
            allocated=zero,
            request=zero,
            inqueue=zero,
            elastic=zero,
        )
        for i in range(n)
    ]
    same = draw(st.booleans())  # every queue asking alike: ties
    first = [0.0, *draw(st.lists(_amount, min_size=width - 1, max_size=width - 1))]
    request = np.array(
        [
            first
            if same
            else [0.0, *draw(st.lists(_amount, min_size=width - 1, max_size=width - 1))]
            for _ in range(n)
        ]
    )
    total = np.array(
        [draw(_amount), *draw(st.lists(_amount, min_size=width - 1, max_size=width - 1))]
    )
    return attrs, request, total


@settings(max_examples=600, deadline=None)
@given(_queues())
def test_float_fill_equals_the_vector_form_bit_for_bit(
    queues: tuple[list[QueueAttr], np.ndarray, np.ndarray],
) -> None:
    attrs, request, total = queues
    floats = proportion._fill_rows_floats(attrs, request, total)
    vectors = proportion._fill_rows_vectors(attrs, request, total)
    assert floats.tobytes() == vectors.tobytes(), (floats, vectors)
    assert proportion.fill_rows(attrs, request, total).tobytes() == vectors.tobytes()


def _vector_fill() -> AbstractContextManager[None]:
    """Water-filling in its numpy form only."""
    return switched(0, (proportion, "FLOAT_FILL_MAX"))


def _exact(d: Decisions) -> dict[str, Any]:
    """Everything a session decided and published, orders included."""
    return {
        **_decided(d),
        "queue_metrics": {
            q: (m.deserved.tobytes(), m.request.tobytes(), m.share, m.overused)
            for q, m in d.queue_metrics.items()
        },
    }


CONFIGS = [load_config(BASIC), load_config(TEPHRA_DEFAULT_CONFIG)]


def _caches(
    nodes: int, weights: list[int], jobs: list[tuple[Any, ...]], tree: bool
) -> tuple[ClusterCache, ClusterCache]:
    """Two caches with the same random cluster (queues q0-q2, q1 and q2 under a parent queue
    when ``tree``)."""
    out = []
    for _ in range(2):
        c = _cluster(nodes, weights, jobs, True)
        if tree:
            c.apply("Queue", "ADDED", f.queue("team", weight=2))
            for q in ("q1", "q2"):
                c.apply("Queue", "MODIFIED", f.queue(q, weight=weights[int(q[1])], parent="team"))
        out.append(c)
    return out[0], out[1]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    **cluster_st(busy=False),
    config_index=st.integers(0, 1),
    tree=st.booleans(),
    sessions=st.integers(1, 3),
)
def test_sessions_with_the_float_fill_decide_as_with_the_vector_form(
    nodes: int,
    weights: list[int],
    jobs: list[tuple[Any, ...]],
    config_index: int,
    tree: bool,
    sessions: int,
) -> None:
    """Two caches with the same random cluster (each keeping its own fills across sessions),
    a few sessions each with their decisions applied: the float fill's sessions decide and
    publish exactly what the vector form's do (flat, and down a queue tree)."""
    floats, vectors = _caches(nodes, weights, jobs, tree)
    for i in range(sessions):
        got = run_session(floats, CONFIGS[config_index], now=NOW + i, uid=f"s{i}")
        with _vector_fill():
            want = run_session(vectors, CONFIGS[config_index], now=NOW + i, uid=f"s{i}")
        assert _exact(got) == _exact(want), i
        apply_decisions(floats, got)
        apply_decisions(vectors, want)


def _plain(switch: str) -> AbstractContextManager[None]:
    """The plain path of ``switch``: proportion's callbacks registered at every open, the
    feasibility worlds worked out every session, ``nearer_on``'s vector form, or the queues'
    figures taken by indexing."""
    owner: Any = {
        "callbacks": proportion.ProportionPlugin,
        "worlds": feasibility,
        "nearer": shares,
        "rows": figures,
    }[switch]
    name = {
        "callbacks": "keeps_callbacks",
        "worlds": "KEEP_WORLDS",
        "nearer": "SCALAR_NEARER",
        "rows": "ROW_VIEWS",
    }[switch]
    return switched(False, (owner, name))


#: a queue's capability or guarantee changes (what the feasibility worlds and the shares read)
_queue_spec = st.builds(
    lambda name, cap, guarantee, weight: (
        "Queue",
        "MODIFIED",
        f.queue(
            name,
            weight=weight,
            capability=None if cap is None else {"cpu": cap},
            guarantee=None if guarantee is None else {"cpu": guarantee},
        ),
    ),
    st.sampled_from(["qa", "qb"]),
    st.sampled_from([None, "1", "2", "6"]),
    st.sampled_from([None, None, "1", "3"]),
    st.integers(1, 3),
)

#: a gang asking for more than a small capability, not admitted yet
_gang = st.builds(
    lambda group, queue, cpu: (
        "PodGroup",
        "MODIFIED",
        f.podgroup(group, queue=queue, phase="Pending", min_member=1, min_resources={"cpu": cpu}),
    ),
    st.sampled_from(["g0", "g1"]),
    st.sampled_from(["qa", "qb"]),
    st.sampled_from(["2", "6"]),
)


@pytest.mark.parametrize("switch", ["callbacks", "worlds", "nearer", "rows"])
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.tuples(st.one_of(step(), _queue_spec, _gang), st.booleans(), st.integers(0, 2)),
        min_size=1,
        max_size=20,
    ),
    config_index=st.integers(0, 1),
)
def test_kept_open_state_decides_as_the_plain_path(
    switch: str, steps: list[tuple[Event, bool, int]], config_index: int
) -> None:
    """Two ``Scheduler``s (hooks kept across sessions) on two caches fed the same random
    history (pods, PodGroups, queues' weights, capabilities and guarantees, and nodes changing):
    with proportion's callbacks registered once (reading the open session from the
    plugin), the feasibility worlds kept across sessions, or ``nearer_on`` on Python floats,
    every session decides, reports and emits exactly what it does on the plain path."""
    kept_against_plain(steps, CONFIGS[config_index], lambda: _plain(switch), _exact)


_near = st.one_of(
    st.integers(0, 200).map(lambda x: x / 20),
    st.floats(0, 1e13, allow_nan=False, allow_infinity=False),
    st.just(INF),
)


@settings(max_examples=600, deadline=None)
@given(
    st.integers(2, 6).flatmap(lambda n: st.tuples(*[st.lists(_near, min_size=n, max_size=n)] * 3)),
    st.data(),
)
def test_scalar_nearer_on_equals_the_vector_form(
    vectors: tuple[list[float], list[float], list[float]], data: st.DataObject
) -> None:
    held, need, deserved = (np.array(v) for v in vectors)
    dims = np.array(data.draw(st.lists(st.integers(1, len(held) - 1), unique=True)), dtype=np.intp)
    for i in dims:  # needs at a boundary of either rule, give or take a few ulps (ties)
        h, d = held[i], deserved[i]
        with np.errstate(invalid="ignore", over="ignore"):
            edge = data.draw(st.sampled_from([None, d + TOL - h, 2 * d - h - TOL - h]))
        if edge is not None and np.isfinite(edge):
            need[i] = max(float(edge) + data.draw(st.integers(-2, 2)) * np.spacing(edge), 0.0)
    scalar = shares.nearer_on(held, need, deserved, dims)
    shares.SCALAR_NEARER = False
    try:
        with np.errstate(invalid="ignore"):  # inf - inf: both forms compare the NaN alike
            vector = shares.nearer_on(held, need, deserved, dims)
    finally:
        shares.SCALAR_NEARER = True
    assert scalar == vector
