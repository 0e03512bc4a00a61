"""The wait and outcome rollups against the raw views, on random ledgers (both databases).

Random jobs (some without a queue, in two namespaces; a queue that changes on a later sighting;
starts before or after submission; jobs still waiting, ended without starting, deleted and then
failed, restarted after finishing) are written through the writer in random batches, in random
order, with duplicates. Then: each rollup equals a rebuild from the views (``backfill``), and
``report wait-times`` and ``report outcomes`` over random windows (whole days, partial days,
unbounded), filters and "now"s print exactly what the raw reports (``wait_times_raw``,
``outcomes_raw``) print. Times are whole seconds: with sub-second waits a mean may differ from
the raw one in its last printed digit (the rollup sums exact microseconds, the view floats).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st
from sqlalchemy import Connection, Engine, select

from batch.ledger import events as ev
from batch.ledger.jobrollups import backfill, bucket_bounds, bucket_of
from batch.ledger.models import OutcomeDay, WaitDay
from batch.ledger.prune import prune
from batch.ledger.reports import Filters, outcomes, outcomes_raw, wait_times, wait_times_raw
from batch.ledger.reports.waits import _QueueWaits
from tests.ledger.test_rollups import _clear, _write

T0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
DAY = 24 * 3600
QUEUES = ["qa", "qb", "é", None]
TERMINAL = ["Completed", "Failed", "Aborted", "Terminated", "Deleted"]

stamp = st.one_of(st.integers(0, 6 * DAY), st.integers(0, 6).map(lambda d: d * DAY)).map(
    lambda s: T0 + dt.timedelta(seconds=s)
)
# Waits cluster at a few values so percentiles land inside buckets shared by rolled days.
wait = st.one_of(
    st.integers(-30, 3 * DAY), st.sampled_from([0, 1, 7, 8, 9, 15, 16, 100, 101, 102, 4000])
).map(lambda s: dt.timedelta(seconds=s))


@st.composite
def _job(draw: st.DrawFn, j: int) -> list[ev.LedgerEvent]:
    uid, namespace = f"j{j}", draw(st.sampled_from(["ns", "other"]))
    submitted = draw(stamp)
    base = {"job_uid": uid, "namespace": namespace, "name": f"job{j}"}
    out: list[ev.LedgerEvent] = []
    for _ in range(draw(st.integers(1, 2))):  # a later sighting may change the queue
        out.append(
            ev.JobObserved(
                uid=uid,
                namespace=namespace,
                name=f"job{j}",
                queue=draw(st.sampled_from(QUEUES)),
                submitted_at=submitted,
                retries=draw(st.one_of(st.none(), st.integers(0, 3))),
            )
        )
    at = submitted
    if draw(st.booleans()):
        at = submitted + draw(wait)
        out.append(ev.JobPhaseChanged(**base, to_phase="Running", at=at))
    if draw(st.integers(0, 3)):
        end = at + dt.timedelta(seconds=draw(st.integers(0, 2 * DAY)))
        phase = draw(st.sampled_from(TERMINAL))
        out.append(ev.JobPhaseChanged(**base, to_phase=phase, at=end))
        if phase == "Deleted" and draw(st.booleans()):  # pods killed: a later Failed
            later = end + dt.timedelta(seconds=draw(st.integers(1, 600)))
            out.append(ev.JobPhaseChanged(**base, to_phase="Failed", at=later))
        if draw(st.integers(0, 5)) == 0:  # restarted: not finished any more
            later = end + dt.timedelta(seconds=draw(st.integers(1, 600)))
            out.append(ev.JobPhaseChanged(**base, to_phase="Running", at=later))
    return out


@st.composite
def ledgers(draw: st.DrawFn) -> list[ev.LedgerEvent]:
    out: list[ev.LedgerEvent] = []
    for j in range(draw(st.integers(1, 12))):
        out.extend(draw(_job(j)))
    return out


windows = st.tuples(st.one_of(st.none(), stamp), st.one_of(st.none(), stamp)).filter(
    lambda w: w[0] is None or w[1] is None or w[0] < w[1]
)
filters = st.builds(
    lambda window, queues, namespaces, now: Filters(
        since=window[0], until=window[1], queues=queues, namespaces=namespaces, now=now
    ),
    windows,
    st.one_of(st.just(()), st.lists(st.sampled_from(["qa", "qb", "é"]), min_size=1, unique=True)),
    st.one_of(st.just(()), st.just(("ns",))),
    st.one_of(stamp, st.just(T0 + dt.timedelta(days=9))),
)


def _rows(conn: Connection) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    out = []
    for model in (WaitDay, OutcomeDay):
        t: Any = model.__table__
        out.append([tuple(r) for r in conn.execute(select(t).order_by(*t.primary_key.columns))])
    return out[0], out[1]


def _same_reports(conn: Connection, f: Filters) -> None:
    got, want = wait_times(conn, f), wait_times_raw(conn, f)
    assert (got.title, got.columns) == (want.title, want.columns)
    assert got.rows == want.rows, f
    assert got.at_least == want.at_least, f
    got, want = outcomes(conn, f), outcomes_raw(conn, f)
    assert (got.title, got.columns, got.rows) == (want.title, want.columns, want.rows), f


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    events=ledgers(),
    seed=st.integers(0, 2**32),
    checks=st.lists(filters, min_size=1, max_size=6),
)
def test_wait_and_outcome_reports_from_rollups_equal_the_raw_views(
    engine: Engine, events: list[ev.LedgerEvent], seed: int, checks: list[Filters]
) -> None:
    _clear(engine)
    _write(engine, events, seed)
    with engine.begin() as conn:
        kept = _rows(conn)
        backfill(conn)
        assert _rows(conn) == kept  # maintained == rebuilt from the views
        for f in checks:
            _same_reports(conn, f)


def test_prune_keeps_the_job_rollups_the_sums_of_the_jobs_kept(engine: Engine) -> None:
    events: list[ev.LedgerEvent] = []
    for uid, queue, days in (("old", "qa", 1), ("new", "qb", 5)):
        base = {"job_uid": uid, "namespace": "ns", "name": uid}
        events += [
            ev.JobObserved(uid=uid, namespace="ns", name=uid, queue=queue, submitted_at=T0),
            ev.JobPhaseChanged(**base, to_phase="Running", at=T0 + dt.timedelta(minutes=5)),
            ev.JobPhaseChanged(**base, to_phase="Deleted", at=T0 + dt.timedelta(days=days)),
            ev.JobPhaseChanged(**base, to_phase="Failed", at=T0 + dt.timedelta(days=days, hours=1)),
        ]
    _write(engine, events, 0)
    with engine.begin() as conn:
        waits, ended = _rows(conn)
        assert {r[1] for r in waits} == {"qa", "qb"}
        assert {(r[1], r[8]) for r in ended} == {("qa", 1), ("qb", 1)}  # deleted, not failed
        prune(conn, before=T0 + dt.timedelta(days=3))
        kept = _rows(conn)
        assert {r[1] for r in kept[0]} == {"qb"} and {r[1] for r in kept[1]} == {"qb"}
        backfill(conn)
        assert _rows(conn) == kept


@given(st.floats(-100, 1e9, allow_nan=False))
def test_a_bucket_holds_exactly_the_waits_within_its_bounds(value: float) -> None:
    b = bucket_of(value)
    lo, hi = bucket_bounds(b)
    assert (lo is None or lo <= value) and value < hi
    assert b == 0 or bucket_of(float(lo or 0)) == b
    assert bucket_of(float(hi)) == b + 1


def test_a_window_in_naive_times_is_utc(engine: Engine) -> None:
    events: list[ev.LedgerEvent] = []
    for j in range(4):
        base = {"job_uid": f"j{j}", "namespace": "ns", "name": f"j{j}"}
        submitted = T0 + dt.timedelta(hours=20 * j)
        events += [
            ev.JobObserved(
                uid=f"j{j}", namespace="ns", name=f"j{j}", queue="qa", submitted_at=submitted
            ),
            ev.JobPhaseChanged(**base, to_phase="Running", at=submitted + dt.timedelta(minutes=j)),
            ev.JobPhaseChanged(**base, to_phase="Completed", at=submitted + dt.timedelta(hours=j)),
        ]
    _write(engine, events, 0)
    naive = Filters(
        since=(T0 + dt.timedelta(hours=10)).replace(tzinfo=None),
        until=(T0 + dt.timedelta(days=3, hours=5)).replace(tzinfo=None),
        now=T0 + dt.timedelta(days=9),
    )
    with engine.begin() as conn:
        _same_reports(conn, naive)
        assert [r[:2] for r in wait_times(conn, naive).rows] == [("qa", 3)]


@settings(max_examples=300, deadline=None)
@given(
    settled=st.lists(st.one_of(st.integers(0, 40), st.integers(0, 5000)), max_size=60),
    raw=st.lists(st.one_of(st.integers(0, 40), st.floats(0, 5000)), max_size=12),
)
def test_the_ranks_read_need_only_the_exact_waits_wanted(
    settled: list[int], raw: list[float]
) -> None:
    """Settled waits counted per bucket plus raw waits: the value at each rank read equals the
    sorted waits' one, from the exact waits at the ranks ``wanted`` names alone."""
    q = _QueueWaits(raw=[float(v) for v in raw])
    per_bucket: dict[int, list[float]] = {}
    for value in settled:
        per_bucket.setdefault(bucket_of(value), []).append(float(value))
        q.rolled[bucket_of(value)] = q.rolled.get(bucket_of(value), 0) + 1
    exact = {b: {i: sorted(per_bucket[b])[i] for i in ranks} for b, ranks in q.wanted().items()}
    every = sorted([*map(float, settled), *q.raw])
    for rank in q.ranks():
        assert q.value_at(rank, exact) == every[rank]
