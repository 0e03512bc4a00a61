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
    render,
    usage,
    wait_times,
)

from .fixture_history import history
from .helpers import t

WINDOW = Filters(since=t(9), until=t(12), now=t(12))


@pytest.fixture
def loaded(ledger_url: str, engine: Engine, tmp_path: Path) -> Engine:
    with Recorder(ledger_url, spill_path=tmp_path / "spill.jsonl", background=False) as rec:
        rec.record(history())
        assert rec.flush()
    return engine


def test_wait_times_count_the_jobs_still_waiting(loaded: Engine) -> None:
    """D (q2) has waited 18 h as of the report's now and is still waiting: its wait so far
    counts, so q2, not q1, shows the longest waits, and its figures are lower bounds."""
    with loaded.connect() as conn:
        report = wait_times(conn, WINDOW)
    assert report.columns == [
        "queue",
        "jobs",
        "started",
        "still_waiting",
        "mean_wait_s",
        "p50_wait_s",
        "p90_wait_s",
        "p99_wait_s",
        "max_wait_s",
    ]
    assert report.rows == [
        ("q1", 2, 2, 0, 18900.0, 18900.0, 32580.0, 35658.0, 36000.0),
        ("q2", 2, 1, 1, 32415.0, 32415.0, 58323.0, 64152.3, 64800.0),
    ]
    waits = ["mean_wait_s", "p50_wait_s", "p90_wait_s", "p99_wait_s", "max_wait_s"]
    assert report.at_least == [frozenset(), frozenset(waits)]
    table = render(report.title, report.columns, report.rows, at_least=report.at_least)
    lines = {line.split()[0]: line for line in table.splitlines()}
    assert ">=" not in lines["q1"] and lines["q2"].split()[4:] == [
        ">=32415",
        ">=32415",
        ">=58323",
        ">=64152.3",
        ">=64800",
    ]
    assert "lower bound" in table
    with loaded.connect() as conn:
        only_q2 = wait_times(conn, Filters(since=t(9), until=t(12), queues=["q2"], now=t(12)))
        late = wait_times(conn, Filters(since=t(10, 6), until=t(12), namespaces=["ns1"]))
        only_waiting = wait_times(conn, Filters(since=t(11, 5), until=t(12), now=t(11, 7)))
    assert only_waiting.rows == [("q2", 1, 0, 1, 3600.0, 3600.0, 3600.0, 3600.0, 3600.0)]
    assert [r[0] for r in only_q2.rows] == ["q2"]
    assert late.rows == [("q1", 1, 1, 0, 36000.0, 36000.0, 36000.0, 36000.0, 36000.0)]


def test_wait_times_leave_out_jobs_deleted_before_they_started(
    loaded: Engine, ledger_url: str, tmp_path: Path
) -> None:
    """A job deleted while pending waits no more and has no wait: not counted as waiting."""
    from batch.ledger import events as ev

    gone = [
        ev.JobObserved(uid="G", namespace="ns2", name="g", queue="q2", submitted_at=t(11, 5)),
        ev.JobPhaseChanged(job_uid="G", namespace="ns2", name="g", to_phase="Deleted", at=t(11, 9)),
    ]
    with Recorder(ledger_url, spill_path=tmp_path / "s2.jsonl", background=False) as rec:
        rec.record(gone)
        assert rec.flush()
    with loaded.connect() as conn:
        report = wait_times(conn, Filters(since=t(11, 5), until=t(12), now=t(11, 7)))
    assert report.rows == [("q2", 2, 0, 1, 3600.0, 3600.0, 3600.0, 3600.0, 3600.0)]


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


def test_outcomes_count_a_deletion_apart_from_failures(
    loaded: Engine, ledger_url: str, tmp_path: Path
) -> None:
    """E was deleted while running and its gang's pods then ended Failed (a later Failed phase
    from its PodGroup); F was deleted while running. Both are deletions, not failures, and the
    success rate is over the jobs that ended on their own."""
    from batch.ledger import events as ev

    def job(uid: str, queue: str, *phases: tuple[str, object, str | None]) -> list[ev.LedgerEvent]:
        base = {"job_uid": uid, "namespace": "ns", "name": uid.lower()}
        return [
            ev.JobObserved(
                uid=uid, namespace="ns", name=uid.lower(), queue=queue, submitted_at=t(10)
            ),
            *(
                ev.JobPhaseChanged(**base, to_phase=p, at=at, reason=why)  # type: ignore[arg-type]
                for p, at, why in phases
            ),
        ]

    extra = job(
        "E",
        "q1",
        ("Running", t(10, 1), None),
        ("Deleted", t(10, 3), "Deleted"),
        ("Failed", t(10, 3, 0, 5), None),
    )
    extra += job("F", "q2", ("Running", t(11, 1), None), ("Deleted", t(11, 2), "Deleted"))
    with Recorder(ledger_url, spill_path=tmp_path / "s2.jsonl", background=False) as rec:
        rec.record(extra)
        assert rec.flush()
    with loaded.connect() as conn:
        report = outcomes(conn, WINDOW)
    assert report.rows == [
        ("q1", 3, 1, 1, 0, 0, 1, 1, 9601.667, 0.5),
        ("q2", 2, 1, 0, 0, 0, 1, 0, 2700.0, 1.0),
    ]


def test_fairness_shows_the_jobs_still_waiting(loaded: Engine) -> None:
    """D has waited 18 h in q2 at the report's now: the fairness row of q2 says so."""
    with loaded.connect() as conn:
        report = fairness(conn, WINDOW)
    assert report.columns[-2:] == ["still_waiting", "longest_wait_s"]
    assert [r[-2:] for r in report.rows] == [(0, None), (1, 64800.0)]
    assert report.at_least == [frozenset(), frozenset({"longest_wait_s"})]


def test_percentile_matches_percentile_cont() -> None:
    assert percentile([], 0.5) is None
    assert percentile([10.0], 0.9) == 10.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile([0.0, 100.0], 0.99) == pytest.approx(99.0)


def test_the_reports_read_the_rollups_columns_as_the_models_declare_them() -> None:
    """The reports read the rollups through table clauses (no ORM for `tephra report`, issue
    31): their columns are the models', with the same types."""
    from batch.ledger import columns
    from batch.ledger.models import OutcomeDay, UsageDay, WaitDay

    for model, clause in (
        (UsageDay, columns.USAGE_DAYS),
        (WaitDay, columns.WAIT_DAYS),
        (OutcomeDay, columns.OUTCOME_DAYS),
    ):
        declared = {c.name: type(c.type) for c in model.__table__.columns}
        read = {c.name: type(c.type) for c in clause.columns}
        assert read == declared, model.__tablename__
