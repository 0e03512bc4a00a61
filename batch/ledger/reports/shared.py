"""What every report shares: the table it returns, its filters and window, percentiles and
SQL helpers.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    Connection,
    and_,
)
from sqlalchemy.sql import ColumnElement, Select

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
