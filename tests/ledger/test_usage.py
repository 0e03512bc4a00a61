"""Decayed queue usage from the ledger's pod runs (batch.ledger.usage), on both databases:
the SQL sum equals the closed form of batch.model.usage per run."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from sqlalchemy import Engine

from batch.ledger import events as ev
from batch.ledger.recorder import Recorder
from batch.ledger.usage import HORIZON, decayed_usage
from batch.model.usage import run_usage

from .helpers import t

DAY = 86400.0
NOW = t(20)


def _pod(
    uid: str,
    queue: str | None,
    gpu: int,
    cpu: int,
    start: dt.datetime | None,
    end: dt.datetime | None,
) -> ev.PodAttempt:
    return ev.PodAttempt(
        pod_uid=uid,
        namespace="ns",
        name=uid,
        queue=queue,
        gpu_milli=gpu,
        cpu_milli=cpu,
        created_at=start or t(1),
        started_at=start,
        finished_at=end,
        outcome="Succeeded" if end else None,
    )


HISTORY = [
    _pod("a1", "a", 8000, 4000, t(18), t(19)),  # a day, two days ago
    _pod("a2", "a", 8000, 1000, t(19, 12), None),  # still running
    _pod("b1", "b", 1000, 2000, t(19, 23), t(20)),  # the last hour
    _pod("b2", "b", 1000, 0, t(19, 23), t(21)),  # finishes after now: counted up to now
    _pod("old", "b", 64000, 0, NOW - dt.timedelta(days=30), NOW - dt.timedelta(days=HORIZON + 1)),
    _pod("backwards", "b", 64000, 0, t(19), t(18)),  # clocks disagreed: no run
    _pod("nowhere", None, 8000, 0, t(19), t(20)),
    _pod("waiting", "a", 8000, 0, None, None),
]


def _s(at: dt.datetime) -> float:
    return at.timestamp()


@pytest.fixture
def loaded(ledger_url: str, engine: Engine, tmp_path: Path) -> Engine:
    with Recorder(ledger_url, spill_path=tmp_path / "spill.jsonl", background=False) as rec:
        rec.record(HISTORY)
        assert rec.flush()
    return engine


def test_each_queue_s_runs_decay_by_their_age(loaded: Engine) -> None:
    n = _s(NOW)
    want_a_gpu = run_usage(8000, _s(t(18)), _s(t(19)), n, DAY) + run_usage(
        8000, _s(t(19, 12)), n, n, DAY
    )
    want_a_cpu = run_usage(4000, _s(t(18)), _s(t(19)), n, DAY) + run_usage(
        1000, _s(t(19, 12)), n, n, DAY
    )
    want_b_gpu = 2 * run_usage(1000, _s(t(19, 23)), n, n, DAY)
    with loaded.connect() as conn:
        got = decayed_usage(conn, half_life=DAY, now=NOW)
    assert got.half_life == DAY and got.at == n
    assert set(got.amounts) == {"a", "b"}
    assert got.of("a")["nvidia.com/gpu"] == pytest.approx(want_a_gpu, rel=1e-6)
    assert got.of("a")["cpu"] == pytest.approx(want_a_cpu, rel=1e-6)
    assert got.of("b")["nvidia.com/gpu"] == pytest.approx(want_b_gpu, rel=1e-6)
    assert got.of("b")["cpu"] == pytest.approx(run_usage(2000, _s(t(19, 23)), n, n, DAY), rel=1e-6)


def test_the_window_is_counted_in_half_lives(loaded: Engine) -> None:
    """The run that ended 21 days ago is past 20 one-day half-lives but counts with seven."""
    n, week = _s(NOW), 7 * DAY
    old = run_usage(64000, n - 30 * DAY, n - 21 * DAY, n, week)
    recent = 2 * run_usage(1000, _s(t(19, 23)), n, n, week)
    with loaded.connect() as conn:
        long = decayed_usage(conn, half_life=week, now=NOW)
    assert long.of("b")["nvidia.com/gpu"] == pytest.approx(old + recent, rel=1e-6)


def test_an_empty_ledger_has_no_usage(engine: Engine) -> None:
    with engine.connect() as conn:
        assert decayed_usage(conn, half_life=DAY, now=NOW).amounts == {}
