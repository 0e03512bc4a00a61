"""Reports against the hand-computed history in ``fixture_history`` (both databases)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine

from batch.ledger.recorder import Recorder
from batch.ledger.reports import (
    Filters,
    fairness,
    outcomes,
    percentile,
    preemptions,
    usage,
    wait_times,
)

from .fixture_history import history
from .helpers import t

WINDOW = Filters(since=t(9), until=t(12))


@pytest.fixture
def loaded(ledger_url: str, engine: Engine, tmp_path: Path) -> Engine:
    with Recorder(ledger_url, spill_path=tmp_path / "spill.jsonl", background=False) as rec:
        rec.record(history())
        assert rec.flush()
    return engine


def test_wait_times(loaded: Engine) -> None:
    with loaded.connect() as conn:
        report = wait_times(conn, WINDOW)
    assert report.columns == [
        "queue",
        "jobs",
        "started",
        "waiting",
        "mean_wait_s",
        "p50_wait_s",
        "p90_wait_s",
        "p99_wait_s",
        "max_wait_s",
    ]
    assert report.rows == [
        ("q1", 2, 2, 0, 18900.0, 18900.0, 32580.0, 35658.0, 36000.0),
        ("q2", 2, 1, 1, 30.0, 30.0, 30.0, 30.0, 30.0),
    ]
    with loaded.connect() as conn:
        only_q2 = wait_times(conn, Filters(since=t(9), until=t(12), queues=["q2"]))
        late = wait_times(conn, Filters(since=t(10, 6), until=t(12), namespaces=["ns1"]))
        only_waiting = wait_times(conn, Filters(since=t(11, 5), until=t(12)))
    assert only_waiting.rows == [("q2", 1, 0, 1, None, None, None, None, None)]
    assert [r[0] for r in only_q2.rows] == ["q2"]
    assert late.rows == [("q1", 1, 1, 0, 36000.0, 36000.0, 36000.0, 36000.0, 36000.0)]


def test_usage_splits_runs_across_days(loaded: Engine) -> None:
    with loaded.connect() as conn:
        report = usage(conn, WINDOW)
        by_queue = usage(conn, WINDOW, by=["queue"])
        day_11 = usage(conn, Filters(since=t(11), until=t(12)), by=["day", "queue"])
    assert report.rows == [
        ("2026-11-10", "q1", "ns1", "alice", 1, 4.0, 0.0),
        ("2026-11-10", "q1", "ns1", "bob", 1, 2.0, 0.0),
        ("2026-11-11", "q1", "ns1", "bob", 1, 2.0, 0.0),
        ("2026-11-11", "q2", "ns2", "alice", 1, 2.0, 4.0),
    ]
    assert by_queue.rows == [("q1", 2, 8.0, 0.0), ("q2", 1, 2.0, 4.0)]
    assert day_11.rows == [("2026-11-11", "q1", 1, 2.0, 0.0), ("2026-11-11", "q2", 1, 2.0, 4.0)]


def test_usage_leaves_out_runs_of_no_length(
    ledger_url: str, engine: Engine, tmp_path: Path
) -> None:
    """A pod that started and finished in the same instant (a crash loop) used nothing: it is
    not counted as a pod on either database."""
    from batch.ledger import events as ev

    pods = [
        ev.PodAttempt(
            pod_uid=f"p{i}",
            namespace="ns",
            name=f"p{i}",
            queue="q",
            gpu_milli=1000,
            started_at=t(10, 8),
            finished_at=t(10, 8) if i == 0 else t(10, 10),
        )
        for i in range(2)
    ]
    with Recorder(ledger_url, spill_path=tmp_path / "spill.jsonl", background=False) as rec:
        rec.record(pods)
        assert rec.flush()
    with engine.connect() as conn:
        report = usage(conn, Filters(since=t(10), until=t(11)), by=["day", "queue"])
    assert report.rows == [("2026-11-10", "q", 1, 2.0, 0.0)]


def test_preemptions(loaded: Engine) -> None:
    with loaded.connect() as conn:
        report = preemptions(conn, WINDOW)
        into_q2 = preemptions(conn, Filters(since=t(9), until=t(12), queues=["q2"]))
    assert report.rows == [("preempt", "q1", "q1", 1, 1, 2.0), ("reclaim", "q1", "q2", 1, 1, 1.0)]
    assert into_q2.rows == [("reclaim", "q1", "q2", 1, 1, 1.0)]


def test_outcomes(loaded: Engine) -> None:
    with loaded.connect() as conn:
        report = outcomes(conn, WINDOW)
    assert report.rows == [
        ("q1", 2, 1, 1, 0, 0, 0, 1, 10800.0, 0.5),
        ("q2", 1, 1, 0, 0, 0, 0, 0, 1800.0, 1.0),
    ]


def test_fairness(loaded: Engine) -> None:
    with loaded.connect() as conn:
        report = fairness(conn, WINDOW)
    assert report.rows == [
        ("q1", "nvidia.com/gpu", 2, 3.0, 4.0, 0.75, 0.375, 0.5, 2),
        ("q2", "nvidia.com/gpu", 2, 5.0, 4.0, 1.25, 0.625, 0.0, 1),
    ]


def test_percentile_matches_percentile_cont() -> None:
    assert percentile([], 0.5) is None
    assert percentile([10.0], 0.9) == 10.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile([0.0, 100.0], 0.99) == pytest.approx(99.0)
