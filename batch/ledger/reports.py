"""The reports behind ``tephra report``: aggregations over the SQL views.

Every report reads one of the views created by migration 0002 (``report_*``), so what the CLI
shows is what a user gets by querying the view directly. Filters are applied to columns that
map straight onto indexed table columns (submission, finish, start times), so PostgreSQL can
answer over millions of rows without scanning them all. Percentiles come from
``percentile_cont`` on PostgreSQL and from the same linear interpolation in Python on SQLite.
"""

from __future__ import annotations

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
    Date,
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
    or_,
    select,
    table,
    union_all,
)
from sqlalchemy.sql import ColumnElement, Select

from batch.api.resources import is_byte_resource
from batch.ledger.columns import NONE, UTCDateTime

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


def _day(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()[:10]
    return str(value)[:10]


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

_waits = table(
    "report_wait_times",
    column("job_uid", String),
    column("namespace", String),
    column("queue", String),
    column("submitted_at", UTCDateTime()),
    column("first_started_at", UTCDateTime()),
    column("wait_seconds", Float),
    column("still_waiting", Integer),
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
    w = _waits.c
    return case(
        (w.still_waiting == 1, _seconds_since(conn, w.submitted_at, now)), else_=w.wait_seconds
    )


def _lower_bounds(rows: Sequence[tuple[Any, ...]], waiting_at: int) -> list[frozenset[str]]:
    return [frozenset(WAIT_STATS) if r[waiting_at] else frozenset() for r in rows]


def wait_times(conn: Connection, f: Filters) -> Report:
    """Per queue: jobs submitted in the window, how many started, how many still wait (neither
    started nor finished: a job deleted before it started waits no more), and the waits. A job
    still waiting counts with its wait so far (as of ``f.now``), so a queue whose jobs do not
    start shows long waits, not none; its figures are then lower bounds (``at_least``)."""
    _prepare(conn)
    now = f.at()
    w = _waits.c
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
    w = _waits.c
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
    keys = [both.c[g] for g in groups]
    pods = func.sum(both.c.pods)
    stmt = select(*keys, pods, func.sum(both.c.gpu_h), func.sum(both.c.cpu_h))
    stmt = stmt.group_by(*keys).having(pods > 0).order_by(*_byte_order(conn, both, groups))
    n = len(groups)
    found = conn.execute(stmt).all()
    # The day, when grouped by, is the first key.
    rows = [
        (
            *((_day(r[0]), *r[1:n]) if groups[0] == "day" else r[:n]),
            int(r[n]),
            round(float(r[n + 1]), 4),
            round(float(r[n + 2]), 4),
        )
        for r in found
    ]
    return Report("usage (hours)", [*groups, "pods", "gpu_hours", "cpu_core_hours"], rows)


_MILLI_MS_PER_HOUR = 3_600_000_000.0


def _byte_order(conn: Connection, rows: Any, groups: Sequence[str]) -> list[Any]:
    """Sort keys; on PostgreSQL by bytes, as ``wait_times`` groups (a locale-aware sort of
    100,000 rows costs more than the rest of the report)."""
    if not _pg(conn):
        return [rows.c[g] for g in groups]
    return [rows.c[g] if g == "day" else rows.c[g].collate("C") for g in groups]


#: the rollup's table (``batch.ledger.models.UsageDay``) as the usage report reads it: a table
#: clause, as for the views, so that a report does not import the ORM models
_usage_days = table(
    "usage_days",
    column("day", Date),
    column("queue", String),
    column("namespace", String),
    column("submitter", String),
    column("pod_days", BigInteger),
    column("pods_started", BigInteger),
    column("gpu_milli_ms", BigInteger),
    column("cpu_milli_ms", BigInteger),
)


def _usage_rolled(f: Filters, groups: Sequence[str], cut: dt.date | None) -> list[Select[Any]]:
    """Finished pods' days before ``cut`` (the last, partial day), from the rollup."""
    u: Any = _usage_days
    keys = [
        func.nullif(u.c[g], NONE).label(g) if g in ("queue", "submitter") else u.c[g].label(g)
        for g in groups
    ]
    since = f.since.astimezone(dt.UTC).date() if f.since is not None else None
    filters = [_in(u.c.queue, f.queues), _in(u.c.namespace, f.namespaces)]
    days = [u.c.day >= since if since else None, u.c.day < cut if cut else None]
    pods: Any = func.sum(u.c.pod_days if "day" in groups else u.c.pods_started)
    sums = [
        pods.label("pods"),
        cast(func.sum(u.c.gpu_milli_ms) / _MILLI_MS_PER_HOUR, Float).label("gpu_h"),
        cast(func.sum(u.c.cpu_milli_ms) / _MILLI_MS_PER_HOUR, Float).label("cpu_h"),
    ]
    out = [_where(select(*keys, *sums), *filters, *days).group_by(*keys)]
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

_outcomes = table(
    "report_outcomes",
    column("namespace", String),
    column("queue", String),
    column("outcome", String),
    column("retries", Integer),
    column("finished_at", UTCDateTime()),
    column("run_seconds", Float),
)

OUTCOMES = ("Completed", "Failed", "Aborted", "Terminated", "Deleted")


def outcomes(conn: Connection, f: Filters) -> Report:
    """Per queue: jobs that finished in the window, by final phase; retries; mean run time.

    A job deleted before it finished is ``deleted`` (the view takes the deletion over any later
    phase), not a failure; the success rate is completed over the jobs that ended otherwise."""
    _prepare(conn)
    o = _outcomes.c
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
