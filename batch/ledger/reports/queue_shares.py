"""Fairness: each queue's allocation against its deserved share."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Connection,
    Float,
    Integer,
    String,
    column,
    func,
    select,
    table,
)

from batch.api.resources import is_byte_resource
from batch.ledger.columns import (
    UTCDateTime,
)
from batch.ledger.reports.shared import (
    GPU,
    Filters,
    Report,
    _in,
    _prepare,
    _r,
    _range,
    _where,
)
from batch.ledger.reports.waits import still_waiting

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
