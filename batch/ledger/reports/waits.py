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
    BigInteger,
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

from batch.ledger.buckets import ENDED, bucket_bounds, bucket_of, seconds_to_us
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
    whole days and the raw rows for the rest: its partial first and last day (counted per
    wait bucket, like the rollup), the jobs still waiting, and the exact waits at the ranks
    that give a percentile (or the longest wait)."""
    _prepare(conn)
    days = _whole_days(f)
    if days is None:
        return wait_times_raw(conn, f)
    now = f.at()
    w = WAITS_VIEW.c
    names = [_in(w.namespace, f.namespaces)]
    queues = [_in(w.queue, f.queues)]
    settled: dict[Any, _QueueWaits] = defaultdict(_QueueWaits)
    for lo, hi in _partial_ranges(f, days):
        _add_partial_day(conn, [*_range(w.submitted_at, lo, hi), *queues, *names], settled)
    # Jobs still waiting, whenever in the window.
    waiting = _where(
        select(w.queue, _seconds_since(conn, w.submitted_at, now)),
        *_range(w.submitted_at, f.since, f.until),
        *queues,
        *names,
        *_waiting_now(),
    )
    for queue, wait in conn.execute(waiting).all():
        q = settled[queue]
        q.jobs += 1
        q.waiting += 1
        q.raw.append(float(wait))
    _add_rolled_waits(conn, f, days, settled)
    exact = _exact_waits(conn, f, settled)
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


#: the lower bounds of buckets 1, 2, ... in seconds, up to one above 2**44 s (longer than any
#: wait between two PostgreSQL timestamps): ``width_bucket`` over them is ``bucket_of``
_LOWER_BOUNDS = [float(bucket_bounds(b)[0] or 0) for b in range(1, bucket_of(2.0**44) + 1)]


#: bounds of a bucket's number and of a rank within a bucket, to name both in one number
_BUCKETS = 1_000
_RANKS = 2**32


def _add_partial_day(
    conn: Connection, conds: Sequence[ColumnElement[bool] | None], settled: dict[Any, _QueueWaits]
) -> None:
    """Add the settled jobs (started, or ended without starting) of a partial day to
    ``settled`` as the rollup would hold them: counts per wait bucket and the waits' sum in
    microseconds. On PostgreSQL counted in SQL (~30,000 rows a day at a million jobs a month
    cost more to read into Python than the rest of the report)."""
    w = WAITS_VIEW.c
    if _pg(conn):
        from sqlalchemy.dialects.postgresql import ARRAY  # not imported for a SQLite ledger

        bucket = func.width_bucket(w.wait_seconds, literal(_LOWER_BOUNDS, ARRAY(Float)))
        us = func.sum(cast(func.round(w.wait_seconds * 1_000_000.0), BigInteger))
        counted = _where(select(w.queue, bucket, func.count(), us), *conds, w.still_waiting == 0)
        rows: Sequence[Any] = conn.execute(counted.group_by(w.queue, bucket)).all()
    else:
        stmt = _where(select(w.queue, w.wait_seconds), *conds, w.still_waiting == 0)
        rows = [
            (queue, None, 1, None)
            if wait is None
            else (queue, bucket_of(wait), 1, seconds_to_us(float(wait)))
            for queue, wait in conn.execute(stmt).all()
        ]
    for queue, bucket, jobs, wait_us in rows:
        q = settled[queue]
        q.jobs += int(jobs)
        if bucket is not None:
            q.started += int(jobs)
            q.rolled[int(bucket)] = q.rolled.get(int(bucket), 0) + int(jobs)
            q.rolled_us += int(wait_us)


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
    """One queue's waits: counts, the buckets of its settled jobs (the rollup's whole days and
    the partial days, counted alike), and the raw waits of its jobs still waiting."""

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
        """Per bucket in wait order, (bucket, count before it); the raw waits per bucket,
        sorted."""
        if self.laid_out is None:
            self.laid_out = self._layout()
        return self.laid_out

    def _layout(self) -> tuple[list[tuple[int, int]], dict[int, list[float]]]:
        raw: dict[int, list[float]] = defaultdict(list)
        for value in sorted(self.raw):
            raw[bucket_of(value)].append(value)
        before, out = 0, []
        for b in sorted(self.rolled.keys() | raw.keys()):
            out.append((b, before))
            before += self.rolled.get(b, 0) + len(raw[b])
        return out, raw

    def _place(self, rank: int) -> tuple[int, int]:
        """The bucket holding ``rank``, and the rank within it."""
        starts, _ = self.layout()
        b, before = max((s for s in starts if s[1] <= rank), key=lambda s: s[1])
        return b, rank - before

    def wanted(self) -> dict[int, set[int]]:
        """Per bucket of settled jobs holding a rank that is read, the ranks among its settled
        jobs (0-based, in wait order) whose exact waits give that rank's value (``value_at``)."""
        _, raw = self.layout()
        out: dict[int, set[int]] = defaultdict(set)
        for rank in self.ranks():
            b, r = self._place(rank)
            settled = self.rolled.get(b, 0)
            if settled:
                # A bucket's rank r lies among the settled jobs' ranks r - m .. r, m being the
                # raw waits in the bucket (usually none).
                out[b].update(range(max(0, r - len(raw[b])), min(r, settled - 1) + 1))
        return out

    def value_at(self, rank: int, exact: dict[int, dict[int, float]]) -> float:
        """The wait at ``rank``: from the bucket's raw waits and the exact waits of its settled
        jobs at the ranks ``wanted`` gave (``exact[bucket][rank among them]``)."""
        b, r = self._place(rank)
        raw = self.layout()[1].get(b, [])
        settled = self.rolled.get(b, 0)
        if not settled:
            return raw[r]
        got = exact[b]
        lo = max(0, r - len(raw))
        some = [got[i] for i in range(lo, min(r, settled - 1) + 1)]
        if lo == 0:  # every wait below rank r is here
            return sorted([*some, *raw])[r]
        # The lo settled waits below some[0], and the raw ones below it, come first.
        below = bisect.bisect_left(raw, some[0])
        return sorted([*some, *raw[below:]])[r - lo - below]

    def stats(self, exact: dict[int, dict[int, float]]) -> list[float | None]:
        """mean, percentiles and the longest wait, as ``wait_times_raw`` computes them."""
        n = self.size()
        if n == 0:
            return [None] * len(WAIT_STATS)
        values = {rank: self.value_at(rank, exact) for rank in self.ranks()}
        mean = (self.rolled_us / 1_000_000 + math.fsum(self.raw)) / n
        out: list[float | None] = [mean]
        for p in PERCENTILES:
            pos = p * (n - 1)
            lo, hi = math.floor(pos), math.ceil(pos)
            out.append(values[lo] + (values[hi] - values[lo]) * (pos - lo))
        out.append(values[n - 1])
        return out


def _exact_waits(
    conn: Connection, f: Filters, queues: dict[Any, _QueueWaits]
) -> dict[Any, dict[int, dict[int, float]]] | None:
    """Per queue and bucket, the exact waits of the window's started jobs at the ranks
    ``_QueueWaits.wanted`` names (in wait order within the bucket); None when a bucket's count
    differs from the settled jobs counted (rows written around the writer).

    Each queue's window is read once in the index ``(queue, submitted_at)`` for the buckets'
    jobs; the database ranks them and returns the few ranks needed, not the ~50,000 waits of a
    month's buckets at a million jobs."""
    w = WAITS_VIEW.c
    order = (w.first_started_at - w.submitted_at) if _pg(conn) else w.wait_seconds
    branches, picks = [], []
    wanted = {queue: q.wanted() for queue, q in queues.items()}
    tags = [queue for queue, need in wanted.items() if need]
    for tag, queue in enumerate(tags):
        ranges = {b: _wait_between(conn, *bucket_bounds(b)) for b in sorted(wanted[queue])}
        bucket = case(*((cond, b) for b, cond in ranges.items()))
        branches.append(
            _where(
                select(
                    literal(tag).label("tag"),
                    bucket.label("bucket"),
                    order.label("o"),
                    w.wait_seconds.label("wait"),
                ),
                w.queue.is_(None) if queue is None else w.queue == queue,
                *_range(w.submitted_at, f.since, f.until),
                _in(w.namespace, f.namespaces),
                w.first_started_at.is_not(None),
                or_(*ranges.values()),
            )
        )
        picks += [(tag, b, ranks) for b, ranks in wanted[queue].items()]
    found: dict[Any, dict[int, dict[int, float]]] = {queue: {} for queue in tags}
    if not branches:
        return found
    both = (branches[0] if len(branches) == 1 else union_all(*branches)).subquery()
    group = (both.c.tag, both.c.bucket)
    ranked = select(
        both.c.tag,
        both.c.bucket,
        func.row_number().over(partition_by=group, order_by=both.c.o).label("rn"),
        func.count().over(partition_by=group).label("n"),
        both.c.wait,
    ).subquery()
    r = ranked.c
    # The ranks wanted as one number per (queue, bucket, rank): one lookup per row (an OR of
    # conditions per bucket, tested on each of ~50,000 rows, cost more than the scan).
    key = (cast(r.tag, BigInteger) * _BUCKETS + r.bucket) * _RANKS + r.rn
    chosen = [(tag * _BUCKETS + b) * _RANKS + i + 1 for tag, b, ranks in picks for i in ranks]
    for tag, b, rn, n, wait in conn.execute(select(ranked).where(key.in_(chosen))).all():
        queue = tags[tag]
        if n != queues[queue].rolled[b]:
            return None
        found[queue].setdefault(b, {})[rn - 1] = float(wait)
    for tag, b, ranks in picks:
        if len(found[tags[tag]].get(b, {})) != len(ranks):
            return None
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


def _waiting_now() -> list[ColumnElement[bool]]:
    """The view's ``still_waiting`` flag spelled out, so that the partial index
    ix_jobs_still_waiting finds the few such jobs (testing the flag reads every job of the
    window: 0.2 s of fairness at a million jobs)."""
    w = WAITS_VIEW.c
    return [w.first_started_at.is_(None), w.final_phase.is_(None)]


def still_waiting(conn: Connection, f: Filters) -> dict[str, tuple[int, float | None]]:
    """Per queue: the jobs submitted before ``f.until`` that are still waiting at ``f.now``
    (whenever they were submitted), and the longest wait among them so far."""
    w = WAITS_VIEW.c
    now = f.at()
    conds = [*_waiting_now(), _in(w.queue, f.queues)]
    if f.until is not None:
        conds.append(w.submitted_at < f.until)
    stmt = _where(
        select(w.queue, func.count(), func.max(_seconds_since(conn, w.submitted_at, now))), *conds
    ).group_by(w.queue)
    return {str(q): (int(n), _r(longest)) for q, n, longest in conn.execute(stmt)}
