"""Usage-decayed fair share (issue 29, build item 7): proportion's ``usageHalfLife`` lowers the
weight of a queue that used more than its share lately (batch.model.usage, the decay; the
plugin's usage.py, the factor). Without the argument, or without usage figures, the shares are
the plain weights' exactly.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.model.usage import QueueUsage, UsageAccumulator, decay, run_usage
from batch.scheduler import Decisions, load_config, run_session
from batch.scheduler.config import TEPHRA_DEFAULT_CONFIG
from batch.scheduler.framework.arguments import Arguments, ConfigError
from batch.scheduler.plugins.proportion.usage import UsageDecay, usage_decay_of, usage_figures

from .util import NOW

GPU = 1000
DAY = 86400.0
DECAYED = TEPHRA_DEFAULT_CONFIG.replace(
    "fairShare: true", "fairShare: true\n      usageHalfLife: 1d"
)


# ------------------------------------------------------------------------------ decay math


def test_a_second_one_half_life_old_counts_half() -> None:
    assert decay(DAY, DAY) == 0.5
    assert decay(3 * DAY, DAY) == 0.125
    assert decay(-5.0, DAY) == 1.0


def test_run_usage_is_the_integral_of_the_decayed_holding() -> None:
    start, end, now = NOW - 3 * DAY, NOW - DAY, NOW
    steps = 20000
    dt = (end - start) / steps
    numeric = sum(4.0 * decay(now - (start + (i + 0.5) * dt), DAY) * dt for i in range(steps))
    assert run_usage(4.0, start, end, now, DAY) == pytest.approx(numeric, rel=1e-6)
    # a run still going is counted up to now; nothing before its start
    assert run_usage(1.0, now - 10, now + 50, now, DAY) == pytest.approx(10.0, rel=1e-4)
    assert run_usage(1.0, now, now + 50, now, DAY) == 0.0
    # a very long half-life is plain resource-seconds
    assert run_usage(2.0, now - 100, now, now, 1e12) == pytest.approx(200.0)


def test_the_accumulator_matches_the_runs_it_saw() -> None:
    acc = UsageAccumulator(DAY)
    t0 = NOW - 2 * DAY
    acc.advance(t0, {"a": {"gpu": 99.0}})  # the first call starts the clock
    acc.advance(t0 + 3600, {"a": {"gpu": 8.0}})
    acc.advance(NOW, {"a": {"gpu": 2.0}, "b": {"gpu": 4.0}})
    acc.advance(NOW - 1, {"a": {"gpu": 50.0}})  # the past: nothing
    got = acc.snapshot()
    want_a = run_usage(8.0, t0, t0 + 3600, NOW, DAY) + run_usage(2.0, t0 + 3600, NOW, NOW, DAY)
    want_b = run_usage(4.0, t0 + 3600, NOW, NOW, DAY)
    assert got.at == NOW and got.half_life == DAY
    assert got.of("a")["gpu"] == pytest.approx(want_a, rel=1e-9)
    assert got.of("b")["gpu"] == pytest.approx(want_b, rel=1e-9)


# ------------------------------------------------------------------------------ the factor


def test_a_queue_that_used_everything_gets_a_quarter_of_an_equal_weight() -> None:
    usage = QueueUsage(DAY, NOW, {"a": {"nvidia.com/gpu": 100.0}})
    figs = usage_figures({"a": 1, "b": 1}, usage, UsageDecay(DAY))
    assert figs["a"].usage_share == 1.0 and figs["a"].weight_share == 0.5
    assert figs["a"].factor == 0.25 and figs["a"].effective_weight == 0.25
    assert figs["b"].factor == 1.0 and figs["b"].effective_weight == 1.0


def test_usage_in_proportion_to_the_weights_keeps_their_ratio() -> None:
    usage = QueueUsage(DAY, NOW, {"a": {"cpu": 1.0}, "b": {"cpu": 3.0}})
    figs = usage_figures({"a": 1, "b": 3}, usage, UsageDecay(DAY))
    assert figs["b"].effective_weight / figs["a"].effective_weight == pytest.approx(3.0)


def test_the_dominant_resource_decides_and_the_factor_has_a_floor() -> None:
    usage = QueueUsage(
        DAY,
        NOW,
        {"a": {"cpu": 1.0, "nvidia.com/gpu": 90.0}, "b": {"cpu": 9.0, "nvidia.com/gpu": 10}},
    )
    figs = usage_figures({"a": 1, "b": 9}, usage, UsageDecay(DAY, weight=1.0, min_factor=0.2))
    assert figs["a"].usage_share == pytest.approx(0.9)
    assert figs["a"].factor == 0.2  # 2^(-9) is below the floor: never starved
    assert figs["b"].usage_share == pytest.approx(0.9)


def test_no_usage_or_another_half_life_means_plain_weights() -> None:
    assert usage_figures({"a": 1}, None, UsageDecay(DAY)) == {}
    other = QueueUsage(2 * DAY, NOW, {"a": {"cpu": 1.0}})
    assert usage_figures({"a": 1}, other, UsageDecay(DAY)) == {}
    none_used = usage_figures({"a": 1, "b": 2}, QueueUsage(DAY, NOW, {}), UsageDecay(DAY))
    assert [g.effective_weight for g in none_used.values()] == [1, 2]


def test_the_arguments() -> None:
    assert usage_decay_of(Arguments("proportion", {})) is None
    got = usage_decay_of(
        Arguments("proportion", {"usageHalfLife": "7d", "usageWeight": 2, "usageMinFactor": 0.05})
    )
    assert got == UsageDecay(7 * DAY, 2.0, 0.05)
    evicting = usage_decay_of(Arguments("proportion", {"usageHalfLife": 60, "usageEvicts": True}))
    assert evicting == UsageDecay(60.0, evicts=True)
    for bad in ({"usageHalfLife": "soon"}, {"usageHalfLife": "1d", "usageMinFactor": 0}):
        with pytest.raises(ConfigError, match="usage"):
            usage_decay_of(Arguments("proportion", bad))


# ------------------------------------------------------------------------------ one session


def _two_equal_queues_wanting_all() -> ClusterCache:
    c = ClusterCache()
    c.apply("Queue", "ADDED", f.queue("root"))
    for name in ("a", "b"):
        c.apply("Queue", "ADDED", f.queue(name, weight=1, reclaimable=True))
    for i in range(4):
        c.apply("Node", "ADDED", f.node(f"n{i}", cpu="64", memory="256Gi", gpu=8))
    for name in ("a", "b"):
        for j in range(4):
            mr = {"cpu": "1", "nvidia.com/gpu": "8"}
            pg = f.podgroup(f"{name}{j}", queue=name, min_member=1, min_resources=mr)
            c.apply("PodGroup", "ADDED", pg)
    return c


def _deserved(d: Decisions, queue: str) -> float:
    m = d.queue_metrics[queue]
    return m.amounts(m.deserved)["nvidia.com/gpu"] / GPU


def _heavy_a() -> QueueUsage:
    used = run_usage(32 * GPU, NOW - 2 * DAY, NOW - DAY, NOW, DAY)
    return QueueUsage(DAY, NOW, {"a": {"nvidia.com/gpu": used}})


def test_a_queue_with_heavy_recent_use_deserves_less_than_its_equal() -> None:
    c = _two_equal_queues_wanting_all()
    c.set_queue_usage(_heavy_a())
    d = run_session(c, load_config(DECAYED), now=NOW)
    assert _deserved(d, "a") == pytest.approx(32 * 0.25 / 1.25)
    assert _deserved(d, "b") == pytest.approx(32 * 1 / 1.25)
    assert d.queue_metrics["a"].effective_weight == 0.25
    assert d.queue_metrics["a"].usage_share == 1.0
    assert d.queue_metrics["b"].effective_weight == 1.0


def test_without_the_argument_or_the_usage_the_weights_are_plain() -> None:
    plain = run_session(
        _two_equal_queues_wanting_all(), load_config(TEPHRA_DEFAULT_CONFIG), now=NOW
    )
    c = _two_equal_queues_wanting_all()
    c.set_queue_usage(_heavy_a())
    ignored = run_session(c, load_config(TEPHRA_DEFAULT_CONFIG), now=NOW)
    unknown = run_session(_two_equal_queues_wanting_all(), load_config(DECAYED), now=NOW)
    for d in (plain, ignored, unknown):
        assert _deserved(d, "a") == _deserved(d, "b") == 16
        assert d.queue_metrics["a"].effective_weight is None
    for q in ("a", "b"):
        m, n = plain.queue_metrics[q], ignored.queue_metrics[q]
        assert np.array_equal(m.deserved, n.deserved)
    assert {k: v["phase"] for k, v in plain.podgroup_status.items()} == {
        k: v["phase"] for k, v in ignored.podgroup_status.items()
    }


def test_new_usage_is_a_new_generation_and_changes_the_shares() -> None:
    c = _two_equal_queues_wanting_all()
    conf = load_config(DECAYED)
    before = run_session(c, conf, now=NOW)
    gen = c.generation
    c.set_queue_usage(_heavy_a())
    assert c.generation == gen + 1
    c.set_queue_usage(_heavy_a())
    assert c.generation == gen + 1  # the same figures: nothing to recompute
    after = run_session(c, conf, now=NOW)
    assert _deserved(before, "a") == 16 and _deserved(after, "a") < 16
    assert not math.isclose(_deserved(after, "a"), _deserved(after, "b"))


def _heavy_holds_32_of_40() -> ClusterCache:
    """heavy (weight 1) runs eight 4-GPU pods on a 40-GPU cluster; light (weight 1) has eight
    admitted 4-GPU gangs whose pods wait."""
    c = ClusterCache()
    c.apply("Queue", "ADDED", f.queue("root"))
    for name in ("heavy", "light"):
        c.apply("Queue", "ADDED", f.queue(name, weight=1, reclaimable=True))
    for i in range(5):
        c.apply("Node", "ADDED", f.node(f"n{i}", cpu="64", memory="256Gi", gpu=8))
    for j in range(8):
        for q, node, phase in (("h", f"n{j // 2}", "Running"), ("l", None, "Inqueue")):
            c.apply(
                "PodGroup", "ADDED", f.podgroup(f"{q}{j}", queue=_Q[q], min_member=1, phase=phase)
            )
            c.apply("Pod", "ADDED", _pod(f"{q}{j}", node))
    used = run_usage(40 * GPU, NOW - DAY, NOW - 60, NOW, DAY)
    c.set_queue_usage(QueueUsage(DAY, NOW, {"heavy": {"nvidia.com/gpu": used}}))
    return c


_Q = {"h": "heavy", "l": "light"}


def _pod(group: str, node: str | None) -> dict[str, object]:
    phase = "Running" if node else "Pending"
    return f.pod(f"{group}-0", group=group, cpu="1", gpu=4, node_name=node, phase=phase)


@pytest.mark.parametrize(("evicts", "heavy_keeps"), [(False, 20), (True, 8)])
def test_usage_never_evicts_a_queue_below_its_plain_share(evicts: bool, heavy_keeps: int) -> None:
    """Decayed shares are 8 : 32 GPUs, plain ones 20 : 20: reclaim takes heavy down to 20, not
    to 8; the rest of light's share comes as heavy's pods end (usage steers free room). With
    ``usageEvicts: true`` reclaim follows the decayed share: heavy down to 8."""
    c = _heavy_holds_32_of_40()
    text = DECAYED.replace("MinRuntime: 5m", "MinRuntime: 0s")
    if evicts:
        text = text.replace("usageHalfLife: 1d", "usageHalfLife: 1d\n      usageEvicts: true")
    conf = load_config(text)
    for k in range(8):
        d = run_session(c, conf, now=NOW + k)
        assert _deserved(d, "heavy") == 8 and _deserved(d, "light") == 32
        for b in d.binds:
            c.apply("Pod", "MODIFIED", _pod(b.name.rsplit("-", 1)[0], b.node))
        for e in d.evictions:
            c.apply("Pod", "DELETED", _pod(e.name.rsplit("-", 1)[0], None))
    held = {
        q: sum(1 for t in c.tasks.values() if t.node_name and c.jobs[t.job_id or ""].queue == q) * 4
        for q in ("heavy", "light")
    }
    assert held == {"heavy": heavy_keeps, "light": 40 - heavy_keeps}, held
