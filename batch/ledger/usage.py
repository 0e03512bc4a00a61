"""Each queue's decayed usage, from the ledger's pod runs, for proportion's ``usageHalfLife``.

Why this exists: the usage-decayed fair share (docs/scheduler.md#usage-decayed-fair-share)
needs what every queue used over the last days, older use counting for less, and it must
survive a scheduler restart, so it is read from the history the ledger already keeps rather
than from the scheduler's memory. One SQL query (SQLite and PostgreSQL) sums, per queue, each
pod run's GPUs and CPUs times the integral of ``2^(-age / halfLife)`` over the run
(batch.model.usage.run_usage, in closed form); runs that ended more than ``HORIZON`` half-lives
ago weigh less than 2^-HORIZON and are left out, so the query reads a bounded window.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from sqlalchemy import Connection, Float, case, cast, func, literal, or_, select

from batch.ledger.models import PodAttempt
from batch.model.usage import QueueUsage

__all__ = ["HORIZON", "RESOURCES", "decayed_usage"]

#: half-lives after which a finished run is left out (it would weigh less than 2^-HORIZON)
HORIZON = 20
#: ledger column -> the scheduler's resource name (internal amounts: milli-units)
RESOURCES = {"gpu_milli": "nvidia.com/gpu", "cpu_milli": "cpu"}


def _epoch(conn: Connection, col: Any) -> Any:
    """``col`` (a UTC timestamp) as epoch seconds, in SQL."""
    if conn.dialect.name == "postgresql":
        return cast(func.extract("epoch", col), Float)
    return (func.julianday(col) - 2440587.5) * 86400.0


def decayed_usage(conn: Connection, *, half_life: float, now: dt.datetime) -> QueueUsage:
    """Every queue's decayed GPU- and CPU-seconds at ``now`` (pods without a queue left out)."""
    p = PodAttempt
    k = math.log(2.0) / half_life
    at = literal(now, p.started_at.type)
    now_s = now.timestamp()
    start = _epoch(conn, p.started_at)
    end = case(
        (or_(p.finished_at.is_(None), p.finished_at > at), now_s), else_=_epoch(conn, p.finished_at)
    )
    # amount/k * (e^(-k (now-end)) - e^(-k (now-start))), the run's decayed resource-seconds
    weight = (func.exp(-k * (now_s - end)) - func.exp(-k * (now_s - start))) / k
    sums = [func.sum(func.coalesce(getattr(p, c), 0) * weight) for c in RESOURCES]
    stmt = (
        select(p.queue, *sums)
        .where(
            p.queue.is_not(None),
            p.started_at.is_not(None),
            p.started_at < at,
            or_(p.finished_at.is_(None), p.finished_at > p.started_at),
            or_(
                p.finished_at.is_(None),
                p.finished_at >= now - dt.timedelta(seconds=HORIZON * half_life),
            ),
        )
        .group_by(p.queue)
    )
    amounts: dict[str, dict[str, float]] = {}
    for queue, *values in conn.execute(stmt):
        got = {
            r: max(float(v or 0.0), 0.0) for r, v in zip(RESOURCES.values(), values, strict=True)
        }
        amounts[str(queue)] = {r: v for r, v in got.items() if v > 0}
    return QueueUsage(half_life, now_s, amounts)
