"""Outcomes: how jobs ended, per queue, with their retries and runs."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Connection,
    Float,
    case,
    cast,
    func,
    select,
    union_all,
)
from sqlalchemy.sql import Select

from batch.ledger.columns import (
    NONE,
    OUTCOME_DAYS,
    OUTCOMES_VIEW,
)
from batch.ledger.reports.shared import (
    Filters,
    Report,
    _in,
    _partial_ranges,
    _prepare,
    _r,
    _range,
    _where,
    _whole_days,
)

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
