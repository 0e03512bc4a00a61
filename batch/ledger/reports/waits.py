"""Wait times: from submission to start, per queue; jobs still waiting count as lower bounds."""

from __future__ import annotations

import bisect
import datetime as dt
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    Connection,
    Float,
    and_,
    case,
    cast,
    func,
    literal,
    literal_column,
    or_,
    select,
    union_all,
)
from sqlalchemy.sql import ColumnElement

from batch.ledger.buckets import ENDED, bucket_bounds, bucket_of
from batch.ledger.columns import (
    NONE,
    WAIT_DAYS,
    WAITS_VIEW,
    UTCDateTime,
)
from batch.ledger.reports.shared import (
    PERCENTILES,
    Filters,
    Report,
    _in,
    _midnight,
    _partial_ranges,
    _pg,
    _prepare,
    _r,
    _range,
    _where,
    _whole_days,
    percentile,
)

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
