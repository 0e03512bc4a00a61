"""Preemptions and reclaims: pods evicted for other jobs."""

from __future__ import annotations

from sqlalchemy import (
    Connection,
    Float,
    String,
    column,
    distinct,
    func,
    or_,
    select,
    table,
)
from sqlalchemy.sql import ColumnElement

from batch.ledger.columns import (
    UTCDateTime,
)
from batch.ledger.reports.shared import (
    Filters,
    Report,
    _in,
    _prepare,
    _r,
    _range,
    _where,
)

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
