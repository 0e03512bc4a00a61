"""Resource usage: resource-hours per day, queue, namespace and submitter."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import (
    Connection,
    Float,
    Integer,
    String,
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

from batch.gcpause import gc_paused
from batch.ledger.columns import (
    NONE,
    POD_FINISHES,
    USAGE_DAYS,
    UTCDateTime,
)
from batch.ledger.db import BINARY_RESULTS
from batch.ledger.reports.shared import (
    Filters,
    Report,
    _day_param,
    _in,
    _pg,
    _prepare,
    _where,
)

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
    statement returns every part's rows sorted by key, and ``_added`` adds each key's rows."""
    _prepare(conn)
    groups = [g for g in USAGE_GROUPS if g in by] or ["queue"]
    cut = _raw_from(conn, f)
    parts = [*_usage_rolled(f, groups, cut), *_usage_raw(conn, f, groups, cut)]
    # Each part holds a key at most once; the parts come back sorted by key, each key's rows in
    # the order of the parts, and are added up here (grouping ~100,000 rows of a month in SQL,
    # where only a few hundred keys repeat, cost more than the rest of the report).
    both = union_all(
        *(p.add_columns(literal(i, Integer).label("part")) for i, p in enumerate(parts))
    ).subquery()
    # Sorted by bytes (a locale-aware sort of ~100,000 rows cost more than the rest).
    keys = _byte_order(conn, both, groups)
    # The day comes back as its ISO text: turning ~100,000 dates into text in Python cost more.
    shown = [_day_text(conn, k) if g == "day" else k for g, k in zip(groups, keys, strict=True)]
    stmt = select(*shown, both.c.pods, both.c.gpu_h, both.c.cpu_h).order_by(*keys, both.c.part)
    stmt = stmt.execution_options(**{BINARY_RESULTS: True})
    # ~100,000 rows' tuples set off collections that were a third of the report's Python time
    with gc_paused():
        rows = _added(_serially(conn, stmt), len(groups))
    return Report("usage (hours)", [*groups, "pods", "gpu_hours", "cpu_core_hours"], rows)


_MILLI_MS_PER_HOUR = 3_600_000_000.0


def _serially(conn: Connection, stmt: Select[Any]) -> Sequence[tuple[Any, ...]]:
    """``stmt``'s rows, planned without parallel workers on PostgreSQL. The view's estimate of
    1,000 days per pod run made the pods still running look costly enough for a parallel scan
    of every pod (0.1 s, and the whole table read from disk on a first call) instead of the
    index on ``finished_at`` (1 ms). The setting is put back for the rest of the transaction
    (other reports gain from parallel scans); if the statement fails, the rollback undoes it."""
    if not _pg(conn):
        return conn.execute(stmt).all()
    name = "max_parallel_workers_per_gather"
    was = conn.execute(select(func.current_setting(name))).scalar_one()
    conn.execute(select(func.set_config(name, "0", True)))
    rows = conn.execute(stmt).all()
    conn.execute(select(func.set_config(name, was, True)))
    return rows


def _added(rows: Iterable[tuple[Any, ...]], n: int) -> list[tuple[Any, ...]]:
    """The rows of each key (adjacent, in the parts' order) added up: pods, GPU- and
    CPU-hours, as ``sum`` adds them in SQL; keys with no pod are left out."""
    out: list[tuple[Any, ...]] = []
    key: tuple[Any, ...] | None = None
    pods, gpu, cpu = 0, 0.0, 0.0
    for row in rows:
        k = row[:n]
        if k == key:
            pods += row[n]
            gpu += row[n + 1]
            cpu += row[n + 2]
            continue
        if key is not None and pods > 0:
            out.append((*key, int(pods), round(float(gpu), 4), round(float(cpu), 4)))
        key, pods, gpu, cpu = k, row[n], row[n + 1], row[n + 2]
    if key is not None and pods > 0:
        out.append((*key, int(pods), round(float(gpu), 4), round(float(cpu), 4)))
    return out


def _raw_from(conn: Connection, f: Filters) -> dt.date | None:
    """The day from which finished pods are read from the view rather than the rollup: the
    window's last day when it ends within it and some pod finished after its end (the rollup
    holds that pod's whole day). None when the rollup serves every day: no end, or nothing
    finished after it (a report up to now; late in the day its last day is as large as any
    and cost half a second at a million jobs when read from the view)."""
    if f.until is None:
        return None
    pods = POD_FINISHES.c
    after = select(pods.pod_uid).where(pods.finished_at >= f.until).limit(1)
    if conn.execute(after).first() is None:
        return None
    return f.until.astimezone(dt.UTC).date()


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
