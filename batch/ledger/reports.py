"""The reports behind ``tephra report``: aggregations over the SQL views.

Every report reads one of the views created by migration 0002 (``report_*``), so what the CLI
shows is what a user gets by querying the view directly. Filters are applied to columns that
map straight onto indexed table columns (submission, finish, start times), so PostgreSQL can
answer over millions of rows without scanning them all. Percentiles come from
``percentile_cont`` on PostgreSQL and from the same linear interpolation in Python on SQLite.
"""

from __future__ import annotations

import bisect
import csv
import datetime as dt
import io
import json
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    BigInteger,
    Connection,
    Float,
    Integer,
    String,
    and_,
    case,
    cast,
    column,
    distinct,
    func,
    literal,
    literal_column,
    or_,
    select,
    table,
    union_all,
)
from sqlalchemy.sql import ColumnElement, Select

from batch.api.resources import is_byte_resource
from batch.ledger.buckets import ENDED, bucket_bounds, bucket_of
from batch.ledger.columns import (
    NONE,
    OUTCOME_DAYS,
    OUTCOMES_VIEW,
    USAGE_DAYS,
    WAIT_DAYS,
    WAITS_VIEW,
    UTCDateTime,
)

GPU = "nvidia.com/gpu"
PERCENTILES = (0.5, 0.9, 0.99)


@dataclass(slots=True)
class Report:
    """A small table: column names and rows of plain values (str, int, float, None)."""

    title: str
    columns: list[str]
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    #: per row (when given), the columns whose figure is a lower bound: it counts jobs still
    #: waiting with their wait so far, so it can only grow
    at_least: list[frozenset[str]] = field(default_factory=list)

    def as_dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


@dataclass(frozen=True, slots=True, kw_only=True)
class Filters:
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    queues: Sequence[str] = ()
    namespaces: Sequence[str] = ()
    #: the report's "now": jobs still waiting have waited until then (None: the current time)
    now: dt.datetime | None = None

    def at(self) -> dt.datetime:
        return self.now if self.now is not None else dt.datetime.now(dt.UTC)


def percentile(sorted_values: Sequence[float], p: float) -> float | None:
    """Linear-interpolated percentile (same definition as SQL ``percentile_cont``)."""
    n = len(sorted_values)
    if n == 0:
        return None
    pos = p * (n - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return float(sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo))


def _r(value: Any, digits: int = 3) -> Any:
    if value is None:
        return None
    if isinstance(value, float) or hasattr(value, "as_integer_ratio"):
        return round(float(value), digits)
    return value


def _pg(conn: Connection) -> bool:
    return conn.dialect.name == "postgresql"


def _prepare(conn: Connection) -> None:
    """Per-query settings for report SQL (PostgreSQL only, this transaction only).

    The row estimate PostgreSQL makes for ``generate_series`` with column arguments (1,000 per
    call) pushes report plans over the JIT threshold, and compiling costs more than the query.
    """
    if _pg(conn):
        conn.exec_driver_sql("SET LOCAL jit = off")
        # Sorts for percentiles and per-day groups stay in memory instead of spilling to disk.
        conn.exec_driver_sql("SET LOCAL work_mem = '64MB'")


def _day_param(conn: Connection, value: dt.datetime) -> Any:
    day = value.astimezone(dt.UTC).date()
    return day if _pg(conn) else day.isoformat()


def _in(col: ColumnElement[Any], values: Sequence[str]) -> ColumnElement[bool] | None:
    return col.in_(list(values)) if values else None


def _where(stmt: Select[Any], *conds: ColumnElement[bool] | None) -> Select[Any]:
    real = [c for c in conds if c is not None]
    return stmt.where(and_(*real)) if real else stmt


def _range(
    col: ColumnElement[Any], since: dt.datetime | None, until: dt.datetime | None
) -> list[ColumnElement[bool] | None]:
    return [col >= since if since else None, col < until if until else None]


# ------------------------------------------------------------------------------- wait times


WAIT_STATS = ("mean_wait_s", *(f"p{round(p * 100)}_wait_s" for p in PERCENTILES), "max_wait_s")


def _seconds_since(conn: Connection, start: ColumnElement[Any], now: dt.datetime) -> Any:
    """Seconds from `start` to `now` (0 when `start` is later), in SQL."""
    at = literal(now, UTCDateTime())
    if _pg(conn):
        secs: Any = cast(func.extract("epoch", at - start), Float)
    else:
        secs = func.round((func.julianday(at) - func.julianday(start)) * 86400.0, 3)
    return case((secs > 0, secs), else_=0.0)


def _waited(conn: Connection, now: dt.datetime) -> Any:
    """A job's wait: until it started, or for a job still waiting its age at `now` (a lower
    bound); NULL for a job that ended without starting."""
    w = WAITS_VIEW.c
    return case(
        (w.still_waiting == 1, _seconds_since(conn, w.submitted_at, now)), else_=w.wait_seconds
    )


def _lower_bounds(rows: Sequence[tuple[Any, ...]], waiting_at: int) -> list[frozenset[str]]:
    return [frozenset(WAIT_STATS) if r[waiting_at] else frozenset() for r in rows]


def wait_times(conn: Connection, f: Filters) -> Report:
    """Per queue: jobs submitted in the window, how many started, how many still wait (neither
    started nor finished: a job deleted before it started waits no more), and the waits. A job
    still waiting counts with its wait so far (as of ``f.now``), so a queue whose jobs do not
    start shows long waits, not none; its figures are then lower bounds (``at_least``).

    The same figures as ``wait_times_raw``, from the rollup (``wait_days``) for the window's
    whole days and the raw rows for the rest: its partial first and last day, the jobs still
    waiting, and the exact waits of the buckets that hold a percentile (or the longest wait)."""
    _prepare(conn)
    days = _whole_days(f)
    if days is None:
        return wait_times_raw(conn, f)
    now = f.at()
    w = WAITS_VIEW.c
    names = [_in(w.namespace, f.namespaces)]
    queues = [_in(w.queue, f.queues)]
    # Settled jobs (started, or ended without starting) of the partial days.
    settled: dict[Any, _QueueWaits] = defaultdict(_QueueWaits)
    for lo, hi in _partial_ranges(f, days):
        stmt = _where(
            select(w.queue, w.wait_seconds),
            *_range(w.submitted_at, lo, hi),
            *queues,
            *names,
            w.still_waiting == 0,
        )
        for queue, wait in conn.execute(stmt).all():
            q = settled[queue]
            q.jobs += 1
            if wait is not None:
                q.raw.append(float(wait))
                q.started += 1
    # Jobs still waiting, whenever in the window (the partial index ix_jobs_still_waiting).
    waiting = _where(
        select(w.queue, _seconds_since(conn, w.submitted_at, now)),
        *_range(w.submitted_at, f.since, f.until),
        *queues,
        *names,
        w.first_started_at.is_(None),
        WAITS_VIEW.c.final_phase.is_(None),
    )
    for queue, wait in conn.execute(waiting).all():
        q = settled[queue]
        q.jobs += 1
        q.waiting += 1
        q.raw.append(float(wait))
    _add_rolled_waits(conn, f, days, settled)
    exact = _exact_waits(conn, f, days, settled)
    if exact is None:  # the rollup does not match the jobs (rows written around the writer)
        return wait_times_raw(conn, f)
    pg = _pg(conn)
    order = sorted(settled, key=lambda q: (q is None, q or "") if pg else (q is not None, q or ""))
    rows = []
    for queue in order:
        q = settled[queue]
        if q.jobs == 0:
            continue
        stats = q.stats(exact.get(queue, {}))
        rows.append((queue, q.jobs, q.started, q.waiting, *(_r(v) for v in stats)))
    columns = ["queue", "jobs", "started", "still_waiting", *WAIT_STATS]
    title = (
        f"wait times (seconds, by queue; still waiting as of {now.isoformat(timespec='seconds')})"
    )
    return Report(title, columns, rows, _lower_bounds(rows, 3))


def _add_rolled_waits(
    conn: Connection,
    f: Filters,
    days: tuple[dt.date | None, dt.date | None],
    settled: dict[Any, _QueueWaits],
) -> None:
    """Add the window's whole ``days`` from the rollup (``wait_days``) to ``settled``."""
    d0, d1 = days
    r: Any = WAIT_DAYS
    rolled = _where(
        select(r.c.queue, r.c.bucket, func.sum(r.c.jobs), func.sum(r.c.wait_us)),
        r.c.day >= d0 if d0 is not None else None,
        r.c.day < d1 if d1 is not None else None,
        _in(r.c.queue, f.queues),
        _in(r.c.namespace, f.namespaces),
    ).group_by(r.c.queue, r.c.bucket)
    for queue, bucket, jobs, wait_us in conn.execute(rolled).all():
        q = settled[None if queue == NONE else queue]
        q.jobs += int(jobs)
        if bucket != ENDED:
            q.started += int(jobs)
            q.rolled[int(bucket)] = q.rolled.get(int(bucket), 0) + int(jobs)
            q.rolled_us += int(wait_us)


def _whole_days(f: Filters) -> tuple[dt.date | None, dt.date | None] | None:
    """The UTC days wholly in the window, ``[first, end)`` (None: unbounded), or None if none."""
    first = end = None
    if f.since is not None:
        since = _utc(f.since)
        first = since.date()
        if since != _midnight(first):
            first += dt.timedelta(days=1)
    if f.until is not None:
        end = _utc(f.until).date()
    if first is not None and end is not None and first >= end:
        return None
    return first, end


def _midnight(day: dt.date) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)


def _partial_ranges(
    f: Filters, days: tuple[dt.date | None, dt.date | None]
) -> list[tuple[dt.datetime, dt.datetime]]:
    """The parts of the window outside its whole days (at most two)."""
    out = []
    first, end = days
    if f.since is not None and first is not None and _utc(f.since) < _midnight(first):
        out.append((f.since, _midnight(first)))
    if f.until is not None and end is not None and _midnight(end) < _utc(f.until):
        out.append((_midnight(end), f.until))
    return out


def _utc(stamp: dt.datetime) -> dt.datetime:
    """As the ledger binds it: a naive time is UTC."""
    return stamp.replace(tzinfo=dt.UTC) if stamp.tzinfo is None else stamp.astimezone(dt.UTC)


@dataclass(slots=True)
class _QueueWaits:
    """One queue's waits: counts, the rollup's buckets, and the raw waits (partial days and
    jobs still waiting)."""

    jobs: int = 0
    started: int = 0
    waiting: int = 0
    rolled: dict[int, int] = field(default_factory=dict)
    rolled_us: int = 0
    raw: list[float] = field(default_factory=list)
    laid_out: tuple[list[tuple[int, int]], dict[int, list[float]]] | None = None

    def size(self) -> int:
        return sum(self.rolled.values()) + len(self.raw)

    def ranks(self) -> list[int]:
        """The ranks (0-based, in wait order) the percentiles and the longest wait read."""
        n = self.size()
        if n == 0:
            return []
        out = {n - 1}
        for p in PERCENTILES:
            pos = p * (n - 1)
            out.update((math.floor(pos), math.ceil(pos)))
        return sorted(out)

    def layout(self) -> tuple[list[tuple[int, int]], dict[int, list[float]]]:
        """Per bucket in wait order, (bucket, count before it); the raw waits per bucket."""
        if self.laid_out is None:
            self.laid_out = self._layout()
        return self.laid_out

    def _layout(self) -> tuple[list[tuple[int, int]], dict[int, list[float]]]:
        raw: dict[int, list[float]] = defaultdict(list)
        for value in self.raw:
            raw[bucket_of(value)].append(value)
        before, out = 0, []
        for b in sorted(self.rolled.keys() | raw.keys()):
            out.append((b, before))
            before += self.rolled.get(b, 0) + len(raw[b])
        return out, raw

    def needed(self) -> set[int]:
        """The rolled buckets holding a rank that is read: their exact waits are needed."""
        starts, _ = self.layout()
        out = set()
        for rank in self.ranks():
            b = max((s for s in starts if s[1] <= rank), key=lambda s: s[1])[0]
            if self.rolled.get(b):
                out.add(b)
        return out

    def stats(self, exact: dict[int, list[float]]) -> list[float | None]:
        """mean, percentiles and the longest wait, as ``wait_times_raw`` computes them."""
        n = self.size()
        if n == 0:
            return [None] * len(WAIT_STATS)
        starts, raw = self.layout()
        values: dict[int, float] = {}
        for rank in self.ranks():
            b, before = max((s for s in starts if s[1] <= rank), key=lambda s: s[1])
            in_bucket = sorted([*exact.get(b, []), *raw.get(b, [])])
            values[rank] = in_bucket[rank - before]
        mean = (self.rolled_us / 1_000_000 + math.fsum(self.raw)) / n
        out: list[float | None] = [mean]
        for p in PERCENTILES:
            pos = p * (n - 1)
            lo, hi = math.floor(pos), math.ceil(pos)
            out.append(values[lo] + (values[hi] - values[lo]) * (pos - lo))
        out.append(values[n - 1])
        return out


def _exact_waits(
    conn: Connection,
    f: Filters,
    days: tuple[dt.date | None, dt.date | None],
    queues: dict[Any, _QueueWaits],
) -> dict[Any, dict[int, list[float]]] | None:
    """The exact waits of the whole days' started jobs in the buckets that hold a needed rank,
    per queue and bucket; None when a bucket's count differs from the rollup's."""
    w = WAITS_VIEW.c
    first, end = days
    branches = []
    wanted: dict[Any, set[int]] = {}
    for queue, q in queues.items():
        need = q.needed()
        if not need:
            continue
        wanted[queue] = need
        ranges = []
        for b in sorted(need):
            lo, hi = bucket_bounds(b)
            ranges.append(_wait_between(conn, lo, hi))
        branches.append(
            _where(
                select(w.queue, w.wait_seconds),
                w.queue.is_(None) if queue is None else w.queue == queue,
                w.submitted_at >= _midnight(first) if first is not None else None,
                w.submitted_at < _midnight(end) if end is not None else None,
                _in(w.namespace, f.namespaces),
                w.first_started_at.is_not(None),
                or_(*ranges),
            )
        )
    values: dict[Any, list[float]] = defaultdict(list)
    if branches:
        stmt = branches[0] if len(branches) == 1 else union_all(*branches)
        for queue, wait in conn.execute(stmt).all():
            values[queue].append(float(wait))
    found: dict[Any, dict[int, list[float]]] = {}
    for queue, need in wanted.items():
        ordered = sorted(values[queue])
        found[queue] = {}
        for b in need:
            lo, hi = bucket_bounds(b)
            start = 0 if lo is None else bisect.bisect_left(ordered, lo)
            in_bucket = ordered[start : bisect.bisect_left(ordered, hi)]
            if len(in_bucket) != queues[queue].rolled[b]:
                return None
            found[queue][b] = in_bucket
    return found


def _wait_between(conn: Connection, lo: int | None, hi: int) -> ColumnElement[bool]:
    """``lo <= wait_seconds < hi`` (whole seconds). On PostgreSQL as intervals, the same test
    (``wait_seconds`` is the interval's exact microseconds as a double, and whole seconds
    compare alike either way) at a fraction of the cost of extracting every row's epoch."""
    w = WAITS_VIEW.c
    if _pg(conn):
        # Literal intervals (bounds are integers): a bound interval parameter costs more to
        # build into the cached statement than the query takes.
        waited: Any = w.first_started_at - w.submitted_at
        below: ColumnElement[bool] = waited < literal_column(f"interval '{int(hi)} seconds'")
        if lo is None:
            return below
        return and_(waited >= literal_column(f"interval '{int(lo)} seconds'"), below)
    if lo is None:
        return w.wait_seconds < hi
    return and_(w.wait_seconds >= lo, w.wait_seconds < hi)


def wait_times_raw(conn: Connection, f: Filters) -> Report:
    """Per queue: jobs submitted in the window, how many started, how many still wait (neither
    started nor finished: a job deleted before it started waits no more), and the waits. A job
    still waiting counts with its wait so far (as of ``f.now``), so a queue whose jobs do not
    start shows long waits, not none; its figures are then lower bounds (``at_least``)."""
    _prepare(conn)
    now = f.at()
    w = WAITS_VIEW.c
    waited = _waited(conn, now)
    conds = [*_range(w.submitted_at, f.since, f.until), _in(w.queue, f.queues)]
    conds.append(_in(w.namespace, f.namespaces))
    columns = ["queue", "jobs", "started", "still_waiting", *WAIT_STATS]
    base = [
        w.queue,
        func.count(),
        func.count(w.first_started_at),
        func.sum(w.still_waiting),
        func.avg(waited),
        func.max(waited),
    ]
    title = (
        f"wait times (seconds, by queue; still waiting as of {now.isoformat(timespec='seconds')})"
    )
    if _pg(conn):
        # One ordered-set aggregate (one sort per queue) for all percentiles; byte-order
        # grouping avoids locale-aware string comparisons in the sort by queue.
        key = w.queue.collate("C").label("queue")
        from sqlalchemy.dialects.postgresql import ARRAY  # not imported for a SQLite ledger

        pct = func.percentile_cont(literal(list(PERCENTILES), ARRAY(Float))).within_group(waited)
        stmt = _where(select(key, *base[1:], pct), *conds)
        rows = []
        for queue, jobs, started, waiting, mean, mx, found in conn.execute(
            stmt.group_by(key).order_by(key)
        ):
            ps = found or [None] * len(PERCENTILES)
            rows.append(
                (queue, jobs, started, int(waiting or 0), _r(mean), *(_r(p) for p in ps), _r(mx))
            )
        return Report(title, columns, rows, _lower_bounds(rows, 3))
    stmt = _where(select(*base), *conds).group_by(w.queue).order_by(w.queue)
    summary = conn.execute(stmt).all()
    values: dict[Any, list[float]] = defaultdict(list)
    detail = _where(select(w.queue, waited.label("waited")), *conds, waited.is_not(None))
    for queue, wait in conn.execute(detail.order_by(w.queue, "waited")):
        values[queue].append(float(wait))
    rows = []
    for queue, jobs, started, waiting, mean, mx in summary:
        ps = [percentile(values[queue], p) for p in PERCENTILES]
        rows.append(
            (queue, jobs, started, int(waiting or 0), _r(mean), *(_r(p) for p in ps), _r(mx))
        )
    return Report(title, columns, rows, _lower_bounds(rows, 3))


def still_waiting(conn: Connection, f: Filters) -> dict[str, tuple[int, float | None]]:
    """Per queue: the jobs submitted before ``f.until`` that are still waiting at ``f.now``
    (whenever they were submitted), and the longest wait among them so far."""
    w = WAITS_VIEW.c
    now = f.at()
    conds = [w.still_waiting == 1, _in(w.queue, f.queues)]
    if f.until is not None:
        conds.append(w.submitted_at < f.until)
    stmt = _where(
        select(w.queue, func.count(), func.max(_seconds_since(conn, w.submitted_at, now))), *conds
    ).group_by(w.queue)
    return {str(q): (int(n), _r(longest)) for q, n, longest in conn.execute(stmt)}


# ------------------------------------------------------------------------------------ usage

_pod_usage = table(
    "report_pod_usage",
    column("pod_uid", String),
    column("namespace", String),
    column("queue", String),
    column("submitter", String),
    column("run_start", UTCDateTime()),
    column("run_end", UTCDateTime()),
    column("day", String),
    column("gpu_hours", Float),
    column("cpu_core_hours", Float),
)

USAGE_GROUPS = ("day", "queue", "namespace", "submitter")


def usage(conn: Connection, f: Filters, *, by: Sequence[str] = USAGE_GROUPS) -> Report:
    """GPU-hours and CPU-core-hours per UTC day (and queue/namespace/submitter).

    Finished pods' whole days come from the rollup (``usage_days``, batch.ledger.rollups); the
    pods still running and the last day, when the window ends within it, from
    ``report_pod_usage``. The parts hold different (pod, day) rows, so they add up; without
    the day among the groups, distinct pods are those that started in the window plus those
    already running on its first day (``pods_started`` and ``pod_days`` of that day). One
    statement adds and orders them."""
    _prepare(conn)
    groups = [g for g in USAGE_GROUPS if g in by] or ["queue"]
    cut = f.until.astimezone(dt.UTC).date() if f.until is not None else None
    parts = union_all(*_usage_rolled(f, groups, cut), *_usage_raw(conn, f, groups, cut))
    both = parts.subquery()
    # Grouped by the keys it is ordered by: one sort, by bytes (grouping by the plain keys
    # sorted the 100,000 rows of a month by the locale first, then again by bytes).
    keys = _byte_order(conn, both, groups)
    pods = func.sum(both.c.pods)
    # The day comes back as its ISO text: turning ~100,000 dates into text in Python cost more.
    shown = [_day_text(conn, k) if g == "day" else k for g, k in zip(groups, keys, strict=True)]
    counted = cast(pods, BigInteger)
    stmt = select(*shown, counted, func.sum(both.c.gpu_h), func.sum(both.c.cpu_h))
    stmt = stmt.group_by(*keys).having(pods > 0).order_by(*keys)
    n = len(groups)
    rows = [
        (*r[:n], int(r[n]), round(float(r[n + 1]), 4), round(float(r[n + 2]), 4))
        for r in conn.execute(stmt).all()
    ]
    return Report("usage (hours)", [*groups, "pods", "gpu_hours", "cpu_core_hours"], rows)


_MILLI_MS_PER_HOUR = 3_600_000_000.0


def _day_text(conn: Connection, day: Any) -> Any:
    """A day as ``YYYY-MM-DD`` in SQL, whatever the server's ``DateStyle``."""
    if _pg(conn):
        return func.to_char(day, "YYYY-MM-DD")
    return cast(day, String)


def _byte_order(conn: Connection, rows: Any, groups: Sequence[str]) -> list[Any]:
    """Sort keys; on PostgreSQL by bytes, as ``wait_times`` groups (a locale-aware sort of
    100,000 rows costs more than the rest of the report)."""
    if not _pg(conn):
        return [rows.c[g] for g in groups]
    return [rows.c[g] if g == "day" else rows.c[g].collate("C") for g in groups]


def _usage_rolled(f: Filters, groups: Sequence[str], cut: dt.date | None) -> list[Select[Any]]:
    """Finished pods' days before ``cut`` (the last, partial day), from the rollup."""
    u: Any = USAGE_DAYS
    keys = [
        func.nullif(u.c[g], NONE).label(g) if g in ("queue", "submitter") else u.c[g].label(g)
        for g in groups
    ]
    since = f.since.astimezone(dt.UTC).date() if f.since is not None else None
    filters = [_in(u.c.queue, f.queues), _in(u.c.namespace, f.namespaces)]
    days = [u.c.day >= since if since else None, u.c.day < cut if cut else None]
    # By every key the rollup's rows are the groups already: no sum (hashing 100,000 rows of a
    # month into as many groups cost 0.1 s).
    whole = set(groups) == set(USAGE_GROUPS)
    sum_: Callable[[Any], Any] = (lambda c: c) if whole else func.sum
    sums = [
        sum_(u.c.pod_days if "day" in groups else u.c.pods_started).label("pods"),
        cast(sum_(u.c.gpu_milli_ms) / _MILLI_MS_PER_HOUR, Float).label("gpu_h"),
        cast(sum_(u.c.cpu_milli_ms) / _MILLI_MS_PER_HOUR, Float).label("cpu_h"),
    ]
    rolled = _where(select(*keys, *sums), *filters, *days)
    out = [rolled if whole else rolled.group_by(*keys)]
    if since is not None and "day" not in groups:
        # Pods already running when the window opens (started on an earlier day).
        carry = [
            func.sum(u.c.pod_days - u.c.pods_started).label("pods"),
            cast(literal(0.0), Float).label("gpu_h"),
            cast(literal(0.0), Float).label("cpu_h"),
        ]
        out.append(_where(select(*keys, *carry), *filters, u.c.day == since).group_by(*keys))
    return out


def _usage_raw(
    conn: Connection, f: Filters, groups: Sequence[str], cut: dt.date | None
) -> list[Select[Any]]:
    """Pods still running, and finished pods' days from ``cut`` on, from the view.

    Two statements, not one with an OR: each condition then reaches ``pod_attempts`` (an
    indexed ``finished_at``) before the view splits runs into days."""
    u = _pod_usage.c
    conds: list[ColumnElement[bool] | None] = [
        _in(u.queue, f.queues),
        _in(u.namespace, f.namespaces),
    ]
    if f.since is not None:
        day0 = f.since.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        conds += [or_(u.run_end.is_(None), u.run_end >= day0), u.day >= _day_param(conn, f.since)]
    if f.until is not None:
        last = f.until - dt.timedelta(microseconds=1)
        conds += [u.run_start < f.until, u.day <= _day_param(conn, last)]
    out = [_usage_view(groups, [*conds, u.run_end.is_(None)], None)]
    if cut is not None:
        cut_at = dt.datetime(cut.year, cut.month, cut.day, tzinfo=dt.UTC)
        conds += [u.run_end >= cut_at, u.day >= _day_param(conn, cut_at)]
        # Without the day: a finished pod counts here only if it started on the last day.
        out.append(_usage_view(groups, conds, u.run_start >= cut_at))
    return out


def _usage_view(
    groups: Sequence[str],
    conds: Sequence[ColumnElement[bool] | None],
    counted: ColumnElement[bool] | None,
) -> Select[Any]:
    u = _pod_usage.c
    keys = [u[g].label(g) for g in groups]
    if "day" in groups:
        pods: Any = func.count()
    elif counted is None:
        pods = func.count(distinct(u.pod_uid))
    else:
        pods = func.count(distinct(case((counted, u.pod_uid), else_=None)))
    sums = [
        pods.label("pods"),
        cast(func.sum(u.gpu_hours), Float).label("gpu_h"),
        cast(func.sum(u.cpu_core_hours), Float).label("cpu_h"),
    ]
    return _where(select(*keys, *sums), *conds).group_by(*keys)


# ------------------------------------------------------------------------------ preemptions

_preemptions = table(
    "report_preemptions",
    column("at", UTCDateTime()),
    column("action", String),
    column("victim_namespace", String),
    column("victim_job_uid", String),
    column("victim_queue", String),
    column("beneficiary_queue", String),
    column("gpus", Float),
)


def preemptions(conn: Connection, f: Filters) -> Report:
    """Evictions per action and (victim queue -> beneficiary queue)."""
    _prepare(conn)
    p = _preemptions.c
    conds: list[ColumnElement[bool] | None] = [*_range(p.at, f.since, f.until)]
    if f.queues:
        conds.append(
            or_(p.victim_queue.in_(list(f.queues)), p.beneficiary_queue.in_(list(f.queues)))
        )
    conds.append(_in(p.victim_namespace, f.namespaces))
    keys = [p.action, p.victim_queue, p.beneficiary_queue]
    stmt = _where(
        select(*keys, func.count(), func.count(distinct(p.victim_job_uid)), func.sum(p.gpus)),
        *conds,
    )
    stmt = stmt.group_by(*keys).order_by(*keys)
    rows = [
        (action, vq, bq, n, jobs, _r(gpus) if gpus is not None else 0.0)
        for action, vq, bq, n, jobs, gpus in conn.execute(stmt)
    ]
    columns = ["action", "victim_queue", "beneficiary_queue", "evictions", "victim_jobs", "gpus"]
    return Report("preemptions and reclaims", columns, rows)


# --------------------------------------------------------------------------------- outcomes


OUTCOMES = ("Completed", "Failed", "Aborted", "Terminated", "Deleted")


def outcomes(conn: Connection, f: Filters) -> Report:
    """Per queue: jobs that finished in the window, by final phase; retries; mean run time.

    A job deleted before it finished is ``deleted`` (the view takes the deletion over any later
    phase), not a failure; the success rate is completed over the jobs that ended otherwise.

    The same figures as ``outcomes_raw``: the window's whole days from the rollup
    (``outcome_days``), its partial first and last day from the view, in one statement."""
    _prepare(conn)
    days = _whole_days(f)
    if days is None:
        return outcomes_raw(conn, f)
    o = OUTCOMES_VIEW.c
    first, end = days
    r: Any = OUTCOME_DAYS
    rolled = _where(
        select(
            func.nullif(r.c.queue, NONE).label("queue"),
            *(func.sum(r.c[c]).label(c) for c in _OUTCOME_SUMS),
            cast(func.sum(r.c.run_us) / 1_000_000.0, Float).label("run_s"),
        ),
        r.c.day >= first if first is not None else None,
        r.c.day < end if end is not None else None,
        _in(r.c.queue, f.queues),
        _in(r.c.namespace, f.namespaces),
    ).group_by(r.c.queue)
    parts: list[Select[Any]] = [rolled]
    raw_sums = [
        func.count().label("finished"),
        *(func.sum(case((o.outcome == name, 1), else_=0)).label(name.lower()) for name in OUTCOMES),
        func.coalesce(func.sum(o.retries), 0).label("retries"),
        func.count(o.run_seconds).label("runs"),
        cast(func.sum(o.run_seconds), Float).label("run_s"),
    ]
    filters = [_in(o.queue, f.queues), _in(o.namespace, f.namespaces)]
    for lo, hi in _partial_ranges(f, days):
        stmt = _where(select(o.queue, *raw_sums), *_range(o.finished_at, lo, hi), *filters)
        parts.append(stmt.group_by(o.queue))
    if f.since is None and f.until is None:  # finished jobs with no finish time have no day
        stmt = _where(select(o.queue, *raw_sums), o.finished_at.is_(None), *filters)
        parts.append(stmt.group_by(o.queue))
    both = union_all(*parts).subquery()
    total = select(
        both.c.queue,
        *(func.sum(both.c[c]) for c in _OUTCOME_SUMS),
        func.sum(both.c.run_s),
    )
    total = total.group_by(both.c.queue).having(func.sum(both.c.finished) > 0)
    rows = []
    for queue, finished, *rest in conn.execute(total.order_by(both.c.queue)):
        by_phase = [int(x or 0) for x in rest[: len(OUTCOMES)]]
        retries, runs, run_s = rest[len(OUTCOMES) :]
        mean_run = float(run_s) / int(runs) if runs else None
        ended = int(finished) - by_phase[OUTCOMES.index("Deleted")]
        rate = by_phase[0] / ended if ended else None
        rows.append((queue, int(finished), *by_phase, int(retries), _r(mean_run), _r(rate, 4)))
    return Report("job outcomes (by queue)", _OUTCOME_COLUMNS, rows)


_OUTCOME_SUMS = ("finished", *(name.lower() for name in OUTCOMES), "retries", "runs")
_OUTCOME_COLUMNS = [
    "queue",
    "finished",
    *(name.lower() for name in OUTCOMES),
    "retries",
    "mean_run_s",
    "success_rate",
]


def outcomes_raw(conn: Connection, f: Filters) -> Report:
    """``outcomes`` straight from the view ``report_outcomes``."""
    _prepare(conn)
    o = OUTCOMES_VIEW.c
    conds = [*_range(o.finished_at, f.since, f.until), _in(o.queue, f.queues)]
    conds.append(_in(o.namespace, f.namespaces))
    counts = [func.sum(case((o.outcome == name, 1), else_=0)) for name in OUTCOMES]
    stmt = _where(
        select(
            o.queue,
            func.count(),
            *counts,
            func.coalesce(func.sum(o.retries), 0),
            func.avg(o.run_seconds),
        ),
        *conds,
    )
    stmt = stmt.group_by(o.queue).order_by(o.queue)
    rows = []
    for queue, total, *rest in conn.execute(stmt):
        by_phase = [int(x or 0) for x in rest[: len(OUTCOMES)]]
        retries, mean_run = rest[len(OUTCOMES)], rest[len(OUTCOMES) + 1]
        ended = total - by_phase[OUTCOMES.index("Deleted")]
        rate = by_phase[0] / ended if ended else None
        rows.append((queue, total, *by_phase, int(retries), _r(mean_run), _r(rate, 4)))
    columns = [
        "queue",
        "finished",
        *(name.lower() for name in OUTCOMES),
        "retries",
        "mean_run_s",
        "success_rate",
    ]
    return Report("job outcomes (by queue)", columns, rows)


# --------------------------------------------------------------------------------- fairness

_share = table(
    "report_queue_share",
    column("at", UTCDateTime()),
    column("queue", String),
    column("resource", String),
    column("allocated", Integer),
    column("deserved", Integer),
    column("share_of_deserved", Float),
    column("share_of_allocated", Float),
    column("starved", Integer),
    column("weight", Integer),
)


def _unit(resource: str) -> tuple[str, float]:
    if is_byte_resource(resource):
        return "GiB", float(2**30)
    if resource == "pods":
        return "pods", 1.0
    return "units", 1000.0


def fairness(conn: Connection, f: Filters, *, resource: str = GPU) -> Report:
    """Per queue: average allocation vs deserved share for one resource over the window, and
    the jobs still waiting at ``f.now`` with the longest wait among them so far (a lower bound):
    a queue whose jobs never start is starved even when no sample says so."""
    _prepare(conn)
    s = _share.c
    conds = [*_range(s.at, f.since, f.until), _in(s.queue, f.queues), s.resource == resource]
    stmt = _where(
        select(
            s.queue,
            func.count(),
            func.avg(s.allocated),
            func.avg(s.deserved),
            func.avg(s.share_of_deserved),
            func.avg(s.share_of_allocated),
            func.avg(s.starved),
            func.max(s.weight),
        ),
        *conds,
    )
    stmt = stmt.group_by(s.queue).order_by(s.queue)
    unit, scale = _unit(resource)
    found: dict[str, tuple[Any, ...]] = {}
    for queue, n, alloc, deserved, sod, soa, starved, weight in conn.execute(stmt):
        found[str(queue)] = (
            n,
            _r(float(alloc) / scale if alloc is not None else None),
            _r(float(deserved) / scale if deserved is not None else None),
            _r(sod, 4),
            _r(soa, 4),
            _r(starved, 4),
            weight,
        )
    waiting = still_waiting(conn, f)
    rows = [
        (
            q,
            resource,
            *found.get(q, (0, None, None, None, None, None, None)),
            *waiting.get(q, (0, None)),
        )
        for q in sorted(found.keys() | waiting.keys())
    ]
    columns = [
        "queue",
        "resource",
        "samples",
        f"avg_allocated_{unit}",
        f"avg_deserved_{unit}",
        "avg_share_of_deserved",
        "avg_share_of_allocated",
        "starved_fraction",
        "weight",
        "still_waiting",
        "longest_wait_s",
    ]
    bounds = [frozenset({"longest_wait_s"}) if r[-2] else frozenset() for r in rows]
    return Report(f"fairness ({resource})", columns, rows, bounds)


REPORTS: dict[str, Callable[[Connection, Filters], Report]] = {
    "wait-times": wait_times,
    "usage": usage,
    "preemptions": preemptions,
    "outcomes": outcomes,
    "fairness": fairness,
}


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".") if value != int(value) else f"{value:.0f}"
    return str(value)


def render(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    fmt: str = "table",
    *,
    at_least: Sequence[frozenset[str]] = (),
) -> str:
    """A report as an aligned text table, CSV or JSON (what `tephra report` prints). In a table,
    the figures `at_least` names (per row) are lower bounds and show as ``>=N``."""
    if fmt == "json":
        return json.dumps([dict(zip(columns, r, strict=True)) for r in rows], indent=2)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(["" if v is None else v for v in r] for r in rows)
        return buf.getvalue().rstrip("\n")
    marks = list(at_least) + [frozenset()] * (len(rows) - len(at_least))
    cells = [
        [
            (">=" if c in m and v is not None else "") + _cell(v)
            for c, v in zip(columns, r, strict=True)
        ]
        for r, m in zip(rows, marks, strict=True)
    ]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    lines = [title, "  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True))]
    for r in cells:
        lines.append("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
    if not rows:
        lines.append("(no data in the window)")
    if any(marks):
        lines.append(
            ">=N: a lower bound; it counts jobs still waiting with their wait so far, "
            "and they are waiting still"
        )
    return "\n".join(lines)
