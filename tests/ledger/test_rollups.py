"""The usage rollup against the raw view, on random ledgers (both databases).

Random jobs and pods (some without a job, a queue or a submitter; some still running; runs
across midnights; jobs whose queue or submitter changes later) are written through the writer
in random batches (one event to all), in random order, with duplicates. Then: the rollup equals
a rebuild from the raw rows (``backfill``), and the usage report over random windows and
groupings equals the same figures computed in Python from ``report_pod_usage`` rows: pod counts
exactly, hours within 2e-4 (the report rounds to 4 decimals; the view sums floats, the rollup
exact integers).
"""

from __future__ import annotations

import datetime as dt
import itertools
import random
from collections import defaultdict
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st
from sqlalchemy import Connection, Engine, select, text

from batch.ledger import events as ev
from batch.ledger.models import TABLES, UsageDay
from batch.ledger.prune import prune
from batch.ledger.reports import USAGE_GROUPS, Filters, usage
from batch.ledger.rollups import backfill
from batch.ledger.writer import Writer

T0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
HOUR = 3600
QUEUES = ["qa", "qb", None]
USERS = ["u1", "u2", None]

stamp = st.one_of(
    st.integers(0, 6 * 24 * HOUR), st.integers(0, 6).map(lambda d: d * 24 * HOUR)
).map(lambda s: T0 + dt.timedelta(seconds=s))


@st.composite
def ledgers(draw: st.DrawFn) -> list[ev.LedgerEvent]:
    n_jobs = draw(st.integers(1, 4))
    out: list[ev.LedgerEvent] = []
    for j in range(n_jobs):
        for _ in range(draw(st.integers(1, 2))):  # a second sighting may change queue/submitter
            out.append(
                ev.JobObserved(
                    uid=f"j{j}",
                    namespace="ns",
                    name=f"job{j}",
                    queue=draw(st.sampled_from(QUEUES)),
                    submitter=draw(st.sampled_from(USERS)),
                    submitted_at=T0,
                )
            )
    for p in range(draw(st.integers(1, 8))):
        out.extend(draw(_pod_events(p, n_jobs)))
    return out


@st.composite
def _pod_events(draw: st.DrawFn, p: int, n_jobs: int) -> list[ev.LedgerEvent]:
    job = draw(st.one_of(st.none(), st.integers(0, n_jobs)))  # n_jobs: a job never observed
    base = {
        "pod_uid": f"p{p}",
        "namespace": draw(st.sampled_from(["ns", "other"])),
        "name": f"pod{p}",
        "job_uid": None if job is None else f"j{job}",
    }
    start = draw(st.one_of(st.none(), stamp))
    length = draw(st.one_of(st.none(), st.integers(0, 3 * 24 * HOUR)))
    resources = {"gpu_milli": draw(st.sampled_from([None, 0, 500, 8000])), "cpu_milli": 1500}
    out: list[ev.LedgerEvent] = [
        ev.PodAttempt(**base, queue=draw(st.sampled_from(QUEUES)), **resources)
    ]
    if start is not None:
        out.append(ev.PodAttempt(**base, started_at=start))
        if length is not None:
            out.append(ev.PodAttempt(**base, finished_at=start + dt.timedelta(seconds=length)))
    if draw(st.booleans()):
        out.append(
            ev.SchedulingEvent(
                action="preempt",
                at=T0,
                victim_pod_uid=base["pod_uid"],
                victim_namespace=base["namespace"],
                victim_pod=base["name"],
                victim_queue=draw(st.sampled_from(QUEUES)),
            )
        )
    return out


windows = st.tuples(st.one_of(st.none(), stamp), st.one_of(st.none(), stamp)).filter(
    lambda w: w[0] is None or w[1] is None or w[0] < w[1]
)


def _clear(engine: Engine) -> None:
    with engine.begin() as conn:
        for table in reversed(TABLES):
            conn.execute(table.delete())


def _write(engine: Engine, events: list[ev.LedgerEvent], seed: int) -> None:
    """Write ``events`` in a random order, some twice, in random batches."""
    rng = random.Random(seed)
    shuffled = events + rng.sample(events, rng.randint(0, len(events)))
    rng.shuffle(shuffled)
    inner = rng.sample(range(1, len(shuffled)), rng.randint(0, len(shuffled) - 1))
    for lo, hi in itertools.pairwise([0, *sorted(inner), len(shuffled)]):
        with engine.begin() as conn:
            Writer().write(conn, shuffled[lo:hi])


def _rollup(conn: Connection) -> list[tuple[Any, ...]]:
    u: Any = UsageDay.__table__
    return [tuple(r) for r in conn.execute(select(u).order_by(*u.primary_key.columns))]


def _expected(conn: Connection, f: Filters, groups: list[str]) -> dict[tuple[Any, ...], Any]:
    """The usage report's figures straight from the view's rows, in Python."""
    rows = conn.execute(
        text(
            "SELECT pod_uid, day, queue, namespace, submitter, run_start, gpu_hours, "
            "cpu_core_hours FROM report_pod_usage"
        )
    ).all()
    pods: dict[tuple[Any, ...], set[Any]] = defaultdict(set)
    sums: dict[tuple[Any, ...], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for pod, day_value, queue, namespace, submitter, run_start, gpu_h, cpu_h in rows:
        day = str(day_value)[:10]
        if f.since is not None and day < f.since.date().isoformat():
            continue
        if f.until is not None:
            start = run_start if isinstance(run_start, dt.datetime) else None
            start = start or dt.datetime.fromisoformat(str(run_start))
            start = start if start.tzinfo else start.replace(tzinfo=dt.UTC)
            last = (f.until - dt.timedelta(microseconds=1)).date().isoformat()
            if start >= f.until or day > last:
                continue
        values = {"day": day, "queue": queue, "namespace": namespace, "submitter": submitter}
        key = tuple(values[g] for g in groups)
        pods[key].add((pod, day))
        sums[key][0] += gpu_h
        sums[key][1] += cpu_h
    out = {}
    for key, found in pods.items():
        n = len(found) if "day" in groups else len({p for p, _ in found})
        out[key] = (n, *sums[key])
    return out


def _check_reports(conn: Connection, window: tuple[Any, Any], by: list[str]) -> None:
    """The report against the view read just before and just after it: a window without an
    end counts the pods still running up to the clock (SQLite's 'now' moves between
    statements), so each figure lies between the two readings, within the report's rounding."""
    f = Filters(since=window[0], until=window[1])
    groups = [g for g in USAGE_GROUPS if g in by] or ["queue"]
    before = _expected(conn, f, groups)
    got = {r[: len(groups)]: r[len(groups) :] for r in usage(conn, f, by=by).rows}
    after = _expected(conn, f, groups)
    if before.keys() != after.keys():  # the clock passed midnight: a new day of running pods
        _check_reports(conn, window, by)
        return
    assert got.keys() == after.keys(), (f, groups)
    for key, (pods, gpu_h, cpu_h) in after.items():
        assert got[key][0] == pods == before[key][0], (f, groups, key)
        for i, (low, high) in enumerate(((before[key][1], gpu_h), (before[key][2], cpu_h)), 1):
            assert low - 2e-4 <= got[key][i] <= high + 2e-4, (f, groups, key)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    events=ledgers(),
    seed=st.integers(0, 2**32),
    checks=st.lists(
        st.tuples(windows, st.lists(st.sampled_from(USAGE_GROUPS), unique=True)),
        min_size=1,
        max_size=6,
    ),
)
def test_usage_from_rollups_equals_the_raw_view(
    engine: Engine,
    events: list[ev.LedgerEvent],
    seed: int,
    checks: list[tuple[tuple[Any, Any], list[str]]],
) -> None:
    _clear(engine)
    _write(engine, events, seed)
    with engine.begin() as conn:
        kept = _rollup(conn)
        backfill(conn)
        assert _rollup(conn) == kept  # maintained == rebuilt from the raw rows
        for window, by in checks:
            _check_reports(conn, window, by)


def test_prune_keeps_the_rollup_the_sum_of_the_pods_kept(engine: Engine) -> None:
    events: list[ev.LedgerEvent] = [
        ev.JobObserved(uid="old", namespace="ns", name="old", queue="qa", submitter="u1"),
        ev.JobPhaseChanged(
            job_uid="old", namespace="ns", name="old", to_phase="Completed", at=T0 + dt.timedelta(2)
        ),
        ev.JobObserved(uid="new", namespace="ns", name="new", queue="qb", submitter="u2"),
    ]
    for uid, job in (("p1", "old"), ("p2", "new")):
        events.append(
            ev.PodAttempt(
                pod_uid=uid,
                namespace="ns",
                name=uid,
                job_uid=job,
                gpu_milli=1000,
                started_at=T0,
                finished_at=T0 + dt.timedelta(days=1, hours=6),
            )
        )
    _write(engine, events, 0)
    with engine.begin() as conn:
        assert {r[1] for r in _rollup(conn)} == {"qa", "qb"}
        prune(conn, before=T0 + dt.timedelta(days=3))
        kept = _rollup(conn)
        assert {r[1] for r in kept} == {"qb"}
        backfill(conn)
        assert _rollup(conn) == kept


def test_distinct_pods_count_the_pods_running_when_the_window_opens(engine: Engine) -> None:
    """Distinct pods are not additive over days: a pod started the day before the window and
    one started in it, both running across midnights, are two pods, not four pod-days."""
    events: list[ev.LedgerEvent] = [
        ev.PodAttempt(
            pod_uid=uid,
            namespace="ns",
            name=uid,
            queue="qa",
            gpu_milli=1000,
            started_at=T0 + dt.timedelta(days=day, hours=20),
            finished_at=T0 + dt.timedelta(days=day + 2, hours=2),
        )
        for uid, day in (("early", 0), ("inside", 1))
    ]
    _write(engine, events, 0)
    with engine.begin() as conn:
        for by in (["queue"], ["day", "queue"], ["queue", "submitter"]):
            for since in (T0 + dt.timedelta(days=1), T0 + dt.timedelta(days=2, hours=1)):
                _check_reports(conn, (since, T0 + dt.timedelta(days=2, hours=12)), by)
        got = usage(conn, Filters(since=T0 + dt.timedelta(days=1), until=T0 + dt.timedelta(days=4)))
        assert [
            r[:2] for r in usage(conn, Filters(since=T0 + dt.timedelta(days=1)), by=["queue"]).rows
        ] == [("qa", 2)]
        assert len(got.rows) == 3  # three days, each one queue
