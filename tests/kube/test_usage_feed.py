"""The scheduler service's decayed queue usage (proportion's ``usageHalfLife``) comes from the
ledger (batch.kube.usage_feed): read every period, never every session; back after a scheduler
restart because the ledger keeps it; plain weights, said in the log and a metric, while the
ledger cannot be read."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from pathlib import Path

import pytest

from batch.api.fairshare import FAIR_SHARE_ANNOTATION as FAIR_SHARE, read_fair_share
from batch.kube.config import ClusterAccess
from batch.kube.fairshare import fair_share_annotations
from batch.kube.service import SchedulerOptions, SchedulerService
from batch.kube.usage_feed import UsageFeed
from batch.ledger import events as ev
from batch.ledger.migrate import upgrade
from batch.ledger.recorder import Recorder
from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.model.usage import QueueUsage
from batch.scheduler import Decisions, load_config, run_session
from batch.scheduler.config import TEPHRA_DEFAULT_CONFIG

DECAYED = load_config(
    TEPHRA_DEFAULT_CONFIG.replace("fairShare: true", "fairShare: true\n      usageHalfLife: 1d")
)
PLAIN = load_config(TEPHRA_DEFAULT_CONFIG)


def _cluster() -> ClusterCache:
    """Queues a and b (weight 1 each) both asking for the whole 32-GPU cluster."""
    c = ClusterCache()
    c.apply("Queue", "ADDED", f.queue("root"))
    for name in ("a", "b"):
        c.apply("Queue", "ADDED", f.queue(name, weight=1, reclaimable=True))
    for i in range(4):
        c.apply("Node", "ADDED", f.node(f"n{i}", cpu="64", memory="256Gi", gpu=8))
    for name in ("a", "b"):
        for j in range(4):
            mr = {"cpu": "1", "nvidia.com/gpu": "8"}
            c.apply(
                "PodGroup",
                "ADDED",
                f.podgroup(f"{name}{j}", queue=name, min_member=1, min_resources=mr),
            )
    return c


def _gpus(d: Decisions, queue: str) -> float:
    m = d.queue_metrics[queue]
    return m.amounts(m.deserved)["nvidia.com/gpu"] / 1000


def _ledger(tmp_path: Path) -> str:
    """A ledger where queue a ran 32 GPUs for the last day and b nothing."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    upgrade(url)
    now = dt.datetime.now(dt.UTC)
    pods = [
        ev.PodAttempt(
            pod_uid=f"p{i}",
            namespace="ns",
            name=f"p{i}",
            queue="a",
            gpu_milli=8000,
            cpu_milli=1000,
            created_at=now - dt.timedelta(days=1),
            started_at=now - dt.timedelta(days=1),
            finished_at=now - dt.timedelta(minutes=5),
            outcome="Succeeded",
        )
        for i in range(4)
    ]
    with Recorder(url, spill_path=tmp_path / "w.jsonl", background=False) as rec:
        rec.record(pods)
        assert rec.flush()
    return url


async def _refresh(feed: UsageFeed, reader: object) -> None:
    feed.tick(DECAYED, reader)  # type: ignore[arg-type]
    await feed.settled()


def _scheduler_start(url: str, spill: Path) -> tuple[ClusterCache, Decisions]:
    """A scheduler process from scratch: an empty cache filled by the watch, its first usage
    read from the ledger, a session."""
    c = _cluster()
    feed = UsageFeed(c)
    with Recorder(url, spill_path=spill, background=False) as reader:
        asyncio.run(_refresh(feed, reader))
    assert feed.reads == 1
    return c, run_session(c, DECAYED, now=1e9)


def test_usage_comes_back_from_the_ledger_after_a_restart(tmp_path: Path) -> None:
    url = _ledger(tmp_path)
    first, d1 = _scheduler_start(url, tmp_path / "r1.jsonl")
    again, d2 = _scheduler_start(url, tmp_path / "r2.jsonl")  # the restarted scheduler
    assert first.queue_usage is not None and again.queue_usage is not None
    assert again.queue_usage.of("a")["nvidia.com/gpu"] == pytest.approx(
        first.queue_usage.of("a")["nvidia.com/gpu"], rel=1e-3
    )
    for d in (d1, d2):
        assert _gpus(d, "a") < 8 < 24 < _gpus(d, "b")  # a used it all: factor 1/4
    assert _gpus(d2, "a") == pytest.approx(_gpus(d1, "a"), abs=0.01)
    plain = run_session(_cluster(), PLAIN, now=1e9)
    assert _gpus(plain, "a") == _gpus(plain, "b") == 16


def test_the_ledger_is_read_once_per_period_not_per_session(tmp_path: Path) -> None:
    reads: list[float] = []

    class Reader:
        def decayed_usage(self, half_life: float) -> QueueUsage:
            reads.append(half_life)
            return QueueUsage(half_life, 0.0, {"a": {"cpu": 1.0}})

    async def sessions() -> None:
        feed = UsageFeed(_cluster(), period=3600)
        for _ in range(5):
            feed.tick(DECAYED, Reader())
            await feed.settled()

    asyncio.run(sessions())
    assert reads == [86400.0]


def test_a_ledger_that_cannot_be_read_means_plain_weights_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Down:
        def decayed_usage(self, half_life: float) -> None:
            return None

    service = SchedulerService(SchedulerOptions(), access=ClusterAccess(server="http://x"))
    service.cache = c = _cluster()
    service.usage_feed = UsageFeed(c, on_state=service.gauges.usage_state)
    c.set_queue_usage(QueueUsage(86400.0, 0.0, {"a": {"cpu": 5.0}}))  # an earlier read
    with caplog.at_level(logging.WARNING):
        asyncio.run(_refresh(service.usage_feed, Down()))
    assert c.queue_usage is None
    assert "plain queue weights: the ledger cannot be read now" in caplog.text
    assert "tephra_queue_usage_available 0.0" in service.metrics.render().decode()
    d = run_session(c, DECAYED, now=1e9)
    assert _gpus(d, "a") == _gpus(d, "b") == 16


def test_the_annotation_and_metrics_show_the_effective_weight() -> None:
    c = _cluster()
    c.set_queue_usage(QueueUsage(86400.0, 0.0, {"a": {"nvidia.com/gpu": 9.0}}))
    d = run_session(c, DECAYED, now=1e9)
    value = fair_share_annotations(d, c)["a"]
    got = read_fair_share({"metadata": {"annotations": {"tephra.io/fair-share": value}}})
    assert got is not None and got.effective_weight == 0.25 and got.usage_share == 1.0
    service = SchedulerService(SchedulerOptions(), access=ClusterAccess(server="http://x"))
    service.gauges.export(d)
    text = service.metrics.render().decode()
    assert 'tephra_queue_effective_weight{queue_name="a"} 0.25' in text
    assert 'tephra_queue_usage_share{queue_name="b"} 0.0' in text
    service.gauges.export(run_session(c, PLAIN, now=1e9 + 1))
    assert "tephra_queue_effective_weight{" not in service.metrics.render().decode()


def test_queue_list_wide_shows_the_effective_weight() -> None:
    from batch.cli.queue import _row

    c = _cluster()
    c.set_queue_usage(QueueUsage(86400.0, 0.0, {"a": {"nvidia.com/gpu": 9.0}}))
    d = run_session(c, DECAYED, now=1e9)
    q = {
        "metadata": {"name": "a", "annotations": {FAIR_SHARE: fair_share_annotations(d, c)["a"]}},
        "spec": {"weight": 1},
    }
    row = _row(q, wide=True)
    assert row[-5:-3] == ["0.25", "1"]
    assert _row({"metadata": {"name": "b"}, "spec": {}}, wide=True)[-5:-3] == ["<none>"] * 2
