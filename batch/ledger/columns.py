"""What queries need of the ledger's schema without its ORM models: the timestamp column type,
the key that stands for an unknown queue or submitter in the usage rollup, and the report views
and rollup tables as SQLAlchemy Core table clauses (read by the reports and the rollups' writer).

Why a module of its own: ``batch.ledger.models`` declares the tables through SQLAlchemy's ORM,
which costs a command about 0.2 s of CPU more than SQLAlchemy's Core (issue 31: everyday
commands within 0.3 s). ``tephra report`` reads with Core alone, so the pieces it shares with
the models and the rollup live here, and they import them from here.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import BigInteger, Date, DateTime, Dialect, Float, Integer, String, column, table
from sqlalchemy.types import TypeDecorator

#: an unknown queue or submitter in the usage rollup's keys (``usage_days`` has no NULL key)
NONE = ""


class UTCDateTime(TypeDecorator[dt.datetime]):
    """A timezone-aware UTC timestamp on every backend.

    PostgreSQL stores ``timestamptz``; SQLite has no time zones, so values are stored as naive UTC
    text (which sorts and compares correctly) and come back tagged as UTC.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> dt.datetime | None:
        if value is None:
            return None
        if not isinstance(value, dt.datetime):
            raise TypeError(f"expected a datetime, got {type(value).__name__}")
        stamp: dt.datetime = value
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=dt.UTC)
        stamp = stamp.astimezone(dt.UTC)
        if dialect.name == "sqlite":
            return stamp.replace(tzinfo=None)
        return stamp

    def process_result_value(self, value: Any, dialect: Dialect) -> dt.datetime | None:
        if value is None:
            return None
        parsed = dt.datetime.fromisoformat(value) if isinstance(value, str) else value
        if not isinstance(parsed, dt.datetime):  # pragma: no cover - driver contract
            raise TypeError(f"expected a datetime from the database, got {type(parsed).__name__}")
        if parsed.tzinfo is None:
            return parsed.replace(tzinfo=dt.UTC)
        return parsed.astimezone(dt.UTC)


WAITS_VIEW = table(
    "report_wait_times",
    column("job_uid", String),
    column("namespace", String),
    column("queue", String),
    column("submitted_at", UTCDateTime()),
    column("first_started_at", UTCDateTime()),
    column("wait_seconds", Float),
    column("final_phase", String),
    column("still_waiting", Integer),
)
OUTCOMES_VIEW = table(
    "report_outcomes",
    column("job_uid", String),
    column("namespace", String),
    column("queue", String),
    column("outcome", String),
    column("retries", Integer),
    column("finished_at", UTCDateTime()),
    column("run_seconds", Float),
)
#: what the usage report asks of the pods themselves: did any finish after a window's end
POD_FINISHES = table(
    "pod_attempts", column("pod_uid", String), column("finished_at", UTCDateTime())
)
#: the rollups (``UsageDay``, ``WaitDay``, ``OutcomeDay`` in batch.ledger.models)
USAGE_DAYS = table(
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
WAIT_DAYS = table(
    "wait_days",
    column("day", Date),
    column("queue", String),
    column("namespace", String),
    column("bucket", Integer),
    column("jobs", BigInteger),
    column("wait_us", BigInteger),
)
#: outcome_days' counts and sums, after its keys (day, queue, namespace)
OUTCOME_AMOUNTS = (
    "finished", "completed", "failed", "aborted", "terminated", "deleted", "retries", "runs",
    "run_us",
)  # fmt: skip
OUTCOME_DAYS = table(
    "outcome_days",
    column("day", Date),
    column("queue", String),
    column("namespace", String),
    *(column(name, BigInteger) for name in OUTCOME_AMOUNTS),
)
