"""proportion water-filling: the worked examples of
docs/volcano-semantics.md#proportion-water-filling and the callbacks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.model.info import QueueInfo
from batch.scheduler import load_config
from batch.scheduler.cycle import open_session
from batch.scheduler.plugins.proportion import ProportionPlugin, QueueAttr, water_fill

from .util import BASIC, NOW, bound_jobs, gang, run

CONF = load_config(BASIC)


def make(total_cpu: str, queues: dict[str, tuple[int, int]], **qkw: dict[str, str]) -> ClusterCache:
    """queues: name -> (weight, cpus requested as 1-cpu pending pods)."""
    c = ClusterCache()
    c.apply("Node", "ADDED", f.node("n0", cpu=total_cpu, memory="1Ti", pods=1000))
    c.apply("Queue", "ADDED", f.queue("root"))
    for name, (weight, req) in queues.items():
        c.apply("Queue", "ADDED", f.queue(name, weight=weight, guarantee=qkw.get(name)))
        c.apply("PodGroup", "ADDED", f.podgroup(f"pg-{name}", queue=name, phase="Inqueue"))
        for i in range(req):
            c.apply("Pod", "ADDED", f.pod(f"{name}-{i}", group=f"pg-{name}", cpu="1", memory=None))
    return c


def deserved_cpu(c: ClusterCache) -> dict[str, float]:
    ssn = open_session(c, CONF, now=NOW)
    plugin = next(p for p in ssn.plugins if isinstance(p, ProportionPlugin))
    cpu = c.resources.index("cpu")
    out = {}
    for q in plugin.attrs:
        d = plugin.deserved(q)
        assert d is not None
        out[q] = float(d[cpu]) / 1000
    ssn.rollback()
    return out


def test_weights_split_two_to_one() -> None:
    assert deserved_cpu(make("12", {"q1": (2, 100), "q2": (1, 100)})) == {"q1": 8.0, "q2": 4.0}


def test_small_request_releases_the_rest_in_round_two() -> None:
    assert deserved_cpu(make("12", {"q1": (2, 100), "q2": (1, 2)})) == {"q1": 10.0, "q2": 2.0}


def test_three_queues_fractional_rounds() -> None:
    got = deserved_cpu(make("4", {"q1": (1, 2), "q2": (1, 2), "q3": (1, 1)}))
    assert got["q3"] == 1.0
    assert got["q1"] == pytest.approx(1.5) and got["q2"] == pytest.approx(1.5)


def test_capability_caps_deserved_and_gives_rest_to_others() -> None:
    c = make("12", {"q1": (1, 100), "q2": (1, 100)})
    c.apply("Queue", "MODIFIED", f.queue("q1", capability={"cpu": "3"}))
    assert deserved_cpu(c) == {"q1": 3.0, "q2": 9.0}


def test_guarantee_takes_capacity_away_from_others_at_enqueue() -> None:
    c = ClusterCache()
    c.apply("Node", "ADDED", f.node("n0", cpu="2"))
    c.apply("Queue", "ADDED", f.queue("root"))
    c.apply("Queue", "ADDED", f.queue("q1", guarantee={"cpu": "2"}))
    c.apply("Queue", "ADDED", f.queue("q2"))
    gang(c, "j1", 1, queue="q1", phase="Pending", min_resources={"cpu": "1"}, cpu="1")
    gang(c, "j2", 1, queue="q2", phase="Pending", min_resources={"cpu": "1"}, cpu="1")
    d = run(c)
    assert d.podgroup_status[("default", "j1")]["phase"] == "Inqueue"
    assert d.podgroup_status[("default", "j2")]["phase"] == "Pending"
    r = d.pending_reasons["default/j2"]
    assert r.kind == "OverCapability" and "cpu" in r.message
    assert any(e.message == "queue resource quota insufficient" for e in d.events)


def test_queue_order_lower_share_first_and_overused_queue_skipped() -> None:
    c = make("4", {"qa": (1, 0), "qb": (1, 0)})
    # qa already runs 2 cpu; both want 2 more; deserved 2/2 -> qa is overused
    c.apply("PodGroup", "ADDED", f.podgroup("run", queue="qa", phase="Running"))
    c.apply(
        "Pod",
        "ADDED",
        f.pod("run-0", group="run", cpu="2", memory=None, node_name="n0", phase="Running"),
    )
    gang(c, "wa", 1, queue="qa", cpu="2", memory=None)
    gang(c, "wb", 1, queue="qb", cpu="2", memory=None)
    d = run(c)
    assert bound_jobs(d) == {"default/wb": 1}
    assert d.pending_reasons["default/wa"].kind in ("QueueOverused", "NotAllocatable")


def test_closed_queue_rejects_enqueue() -> None:
    c = make("4", {"q1": (1, 0)})
    c.apply("Queue", "MODIFIED", f.queue("q1", state="Closed"))
    gang(c, "j", 1, queue="q1", phase="Pending", min_resources={"cpu": "1"})
    d = run(c)
    assert d.pending_reasons["default/j"].kind == "QueueClosed"
    assert d.podgroup_status[("default", "j")]["phase"] == "Pending"


def test_decisions_carry_each_queues_fair_share_figures_and_plugin_timings() -> None:
    # 12 cpus, weights 2:1, both queues want 100: deserved 8 and 4; the session allocates
    # everything it can, so both queues end at their deserved share (share 1, overused).
    d = run(make("12", {"q1": (2, 100), "q2": (1, 100)}))
    q1, q2 = d.queue_metrics["q1"], d.queue_metrics["q2"]
    assert q1.amounts(q1.deserved)["cpu"] == 8000 and q2.amounts(q2.deserved)["cpu"] == 4000
    assert q1.amounts(q1.request)["cpu"] == 100_000
    assert q1.amounts(q1.real_capacity)["cpu"] == 12_000
    assert bound_jobs(d) == {"default/pg-q1": 8, "default/pg-q2": 4}
    assert q1.share == pytest.approx(1.0) and q1.overused and q2.overused
    hooks = {hook for (_plugin, hook) in d.plugin_timings}
    assert hooks == {"OnSessionOpen", "OnSessionClose"}
    assert ("proportion", "OnSessionOpen") in d.plugin_timings


def _volcano_loop(
    weights: list[int], caps: list[list[float]], requests: list[list[float]], total: list[float]
) -> list[list[float]]:
    """docs/volcano-semantics.md#proportion-water-filling as written there: queue by queue (the
    oracle)."""
    n = len(weights)
    deserved = [[0.0] * len(total) for _ in range(n)]
    remaining = [0.0, *total[1:]]
    meet: set[int] = set()
    while True:
        w = sum(weights[i] for i in range(n) if i not in meet)
        if w == 0:
            break
        inc = [0.0] * len(total)
        dec = [0.0] * len(total)
        for i in range(n):
            if i in meet:
                continue
            old = deserved[i]
            d = [o + r * (weights[i] / w) for o, r in zip(old, remaining, strict=True)]
            d = [min(x, c, q) for x, c, q in zip(d, caps[i], requests[i], strict=True)]
            d = [max(x, 0.0) for x in d]
            d[0] = 0.0
            deserved[i] = d
            if all(q <= x + 0.1 for q, x in zip(requests[i][1:], d[1:], strict=True)) or d == old:
                meet.add(i)
            inc = [a + max(x - o, 0) for a, x, o in zip(inc, d, old, strict=True)]
            dec = [a + max(o - x, 0) for a, x, o in zip(dec, d, old, strict=True)]
        new = [max(r + b - a, 0.0) for r, a, b in zip(remaining, inc, dec, strict=True)]
        if all(x < 0.1 for x in new[1:]) or new == remaining:
            break
        remaining = new
    return deserved


@given(
    queues=st.lists(
        st.tuples(
            st.integers(1, 5),
            st.lists(st.sampled_from([0.0, 1.0, 3.5, 8.0, 1e9]), min_size=2, max_size=2),
            st.lists(st.sampled_from([0.0, 0.5, 2.0, 7.0, 100.0]), min_size=2, max_size=2),
        ),
        min_size=1,
        max_size=6,
    ),
    total=st.lists(st.sampled_from([0.0, 4.0, 12.0, 33.3]), min_size=2, max_size=2),
)
def test_water_fill_equals_volcanos_queue_by_queue_loop(
    queues: list[tuple[int, list[float], list[float]]], total: list[float]
) -> None:
    attrs = []
    for i, (weight, cap, req) in enumerate(queues):
        z = np.zeros(3)
        attrs.append(
            QueueAttr(
                queue=QueueInfo(name=f"q{i}", uid=f"q{i}", weight=weight),
                weight=weight,
                guarantee=z.copy(),
                capability=np.array([0.0, *cap]),
                real_capability=np.array([0.0, *cap]),
                allocated=z.copy(),
                request=np.array([0.0, *req]),
                inqueue=z.copy(),
                elastic=z.copy(),
            )
        )
    water_fill(attrs, np.array([0.0, *total]))
    expected = _volcano_loop(
        [w for w, _c, _r in queues],
        [[0.0, *c] for _w, c, _r in queues],
        [[0.0, *r] for _w, _c, r in queues],
        [0.0, *total],
    )
    assert [list(a.deserved) for a in attrs] == expected
