"""Shared helpers for the ledger tests: table snapshots, a small fixture timeline, and builders
of ledger rows (the what-if tests in tests/sim and tests/cli read them back)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session as OrmSession

from batch.ledger import jobrollups, rollups
from batch.ledger.db import make_engine
from batch.ledger.migrate import upgrade
from batch.ledger.models import TABLES, Job, PodAttempt, QueueConfig

UTC = dt.UTC
VOLATILE = {"id", "updated_at"}


def t(day: int, hour: int = 0, minute: int = 0, second: int = 0) -> dt.datetime:
    """A time in November 2026, UTC."""
    return dt.datetime(2026, 11, day, hour, minute, second, tzinfo=UTC)


def snapshot(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    """Every ledger table's rows (without surrogate ids and write stamps), sorted."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    with engine.connect() as conn:
        for table in TABLES:
            cols = [c for c in table.c if c.name not in VOLATILE]
            rows = [tuple(r) for r in conn.execute(select(*cols))]
            out[table.name] = sorted(rows, key=repr)
    return out


def count(engine: Engine, table_name: str) -> int:
    return len(snapshot(engine)[table_name])


def rows(engine: Engine, table_name: str) -> list[dict[str, Any]]:
    """One table's rows as dicts."""
    table = next(tb for tb in TABLES if tb.name == table_name)
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(select(table))]


# ------------------------------------------------------------ ledger rows for the what-if tests


def ledger_job(
    uid: str,
    queue: str,
    submitted: dt.datetime,
    *,
    workers: int | None = None,
    started: dt.datetime | None = None,
    finished: dt.datetime | None = None,
    namespace: str = "ns",
    name: str | None = None,
    phase: str | None = None,
    updated_at: dt.datetime | None = None,
) -> Job:
    """A VCJob's ledger row. `workers` one-cpu one-GPU pods (the job's request and minAvailable;
    None leaves its shape unknown); `phase` is its latest and final phase; `name` defaults to
    the uid and `updated_at` to the submission."""
    return Job(
        uid=uid,
        namespace=namespace,
        name=name or uid,
        kind="VCJob",
        queue=queue,
        requested_cpu_milli=None if workers is None else 1000 * workers,
        requested_gpu_milli=None if workers is None else 1000 * workers,
        replicas=None if workers is None else {"worker": workers},
        min_available=workers,
        submitted_at=submitted,
        first_started_at=started,
        finished_at=finished,
        phase=phase,
        final_phase=phase,
        updated_at=updated_at or submitted,
    )


def ledger_pod(
    job: Job, pod_uid: str, index: int = 0, *, created_at: dt.datetime | None = None
) -> PodAttempt:
    """The PodAttempt of `job`'s worker `index` (one cpu, one GPU), named as the controller
    names it."""
    return PodAttempt(
        pod_uid=pod_uid,
        namespace=job.namespace,
        name=f"{job.name}-worker-{index}",
        job_uid=job.uid,
        role="worker",
        queue=job.queue,
        cpu_milli=1000,
        gpu_milli=1000,
        created_at=created_at,
    )


def queue_configs(weights: dict[str, int], valid_from: dt.datetime) -> list[QueueConfig]:
    """One reclaimable QueueConfig per queue with its weight, valid from `valid_from`."""
    return [
        QueueConfig(queue=q, valid_from=valid_from, config_hash=q, weight=w, reclaimable=True)
        for q, w in weights.items()
    ]


def write_ledger(url: str, rows: Iterable[object]) -> None:
    """Migrate the ledger at `url` and store `rows` in it, with the rollups built from them as
    the writer keeps them (reports read a window's whole days from the rollups: a ledger
    without them lost every job of a past day, so a test whose jobs were a few hours old
    failed just after midnight)."""
    upgrade(url)
    engine = make_engine(url)
    with OrmSession(engine) as s:
        s.add_all(list(rows))
        s.commit()
    with engine.begin() as conn:
        rollups.backfill(conn)
        jobrollups.backfill(conn)
    engine.dispose()
