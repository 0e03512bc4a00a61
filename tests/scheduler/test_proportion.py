"""proportion water-filling: the worked examples of volcano.md §5.1 and the callbacks."""

from __future__ import annotations

import pytest

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.scheduler import load_config
from batch.scheduler.framework.session import Session
from batch.scheduler.plugins.proportion import ProportionPlugin

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
    ssn = Session(c, CONF, now=NOW)
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
