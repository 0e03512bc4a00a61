"""The ledger's tables as typed SQLAlchemy 2 models.

Why this shape: the recorder writes idempotently, so every table has a natural key taken from the
cluster (object uid, phase + transition time, victim pod + action, queue + sample time) rather
than relying on surrogate ids alone. Event tables reference jobs by ``job_uid`` without a foreign
key on purpose: pods, PodGroups and jobs are watched by different controllers and their events
arrive in any order (or replay from a spill file), so no insert may depend on another having
happened first. Constraint names follow ``NAMING_CONVENTION`` so Alembic's autogenerate output is
stable across databases.

Units are the project's exact integers (``batch.api.resources``): cpu and GPUs in milli-units,
memory in bytes. Timestamps are timezone-aware UTC (``timestamptz`` on PostgreSQL; ISO text in
UTC on SQLite).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Date,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from batch.ledger.columns import UTCDateTime

NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

TERMINAL_JOB_PHASES = frozenset({"Completed", "Failed", "Terminated", "Aborted", "Deleted"})


def _id_type() -> BigInteger:
    # SQLite only auto-increments an INTEGER PRIMARY KEY, PostgreSQL gets a BIGINT identity.
    return BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    """Declarative base carrying the naming conventions."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dt.datetime: UTCDateTime(), dict[str, Any]: JSON(none_as_null=True)}


_STILL_WAITING = text("first_started_at IS NULL AND final_phase IS NULL")


class Job(Base):
    """One row per workload (VCJob, PyTorchJob, MPIJob, RayJob, SparkApplication, PodGroup).

    ``phase``/``phase_at`` is the latest known phase; ``first_started_at`` the earliest time the
    job reached Running (the end of its wait); ``finished_at``/``final_phase`` are set while the
    latest phase is terminal. These are denormalised from the transitions so reports need not
    scan them.
    """

    __tablename__ = "jobs"

    uid: Mapped[str] = mapped_column(String(64), primary_key=True)
    namespace: Mapped[str] = mapped_column(String(253))
    name: Mapped[str] = mapped_column(String(253))
    kind: Mapped[str] = mapped_column(String(64))
    queue: Mapped[str | None] = mapped_column(String(253))
    submitter: Mapped[str | None] = mapped_column(String(253))
    priority_class: Mapped[str | None] = mapped_column(String(253))
    priority: Mapped[int | None] = mapped_column(Integer)
    podgroup: Mapped[str | None] = mapped_column(String(253))
    requested_cpu_milli: Mapped[int | None] = mapped_column(BigInteger)
    requested_memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    requested_gpu_milli: Mapped[int | None] = mapped_column(BigInteger)
    replicas: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    min_available: Mapped[int | None] = mapped_column(Integer)
    #: the job's expected run time (``spec.runningEstimate``), seconds
    running_estimate_s: Mapped[float | None] = mapped_column(Float)
    submitted_at: Mapped[dt.datetime | None]
    first_started_at: Mapped[dt.datetime | None]
    finished_at: Mapped[dt.datetime | None]
    phase: Mapped[str | None] = mapped_column(String(32))
    phase_at: Mapped[dt.datetime | None]
    final_phase: Mapped[str | None] = mapped_column(String(32))
    retries: Mapped[int | None] = mapped_column(Integer)
    updated_at: Mapped[dt.datetime]

    __table_args__ = (
        Index(None, "submitted_at"),
        Index(None, "finished_at"),
        # Covering on PostgreSQL so wait-time reports are index-only scans (migration 0004).
        Index(None, "queue", "submitted_at", postgresql_include=["first_started_at", "namespace"]),
        Index(None, "namespace", "name"),
        # Jobs still waiting (neither started nor finished): the wait rollup leaves them out, so
        # reports read them here (migration 0011).
        Index(
            "ix_jobs_still_waiting",
            "queue",
            "submitted_at",
            postgresql_where=_STILL_WAITING,
            sqlite_where=_STILL_WAITING,
        ),
    )


class JobTransition(Base):
    """A phase change of a job (``source='job'``) or of its PodGroup (``source='podgroup'``).

    Identity: (job_uid, source, to_phase, at) — the transition time comes from the object's
    status, so a replayed or re-listed object produces the same key.
    """

    __tablename__ = "job_transitions"

    id: Mapped[int] = mapped_column(_id_type(), primary_key=True, autoincrement=True)
    job_uid: Mapped[str] = mapped_column(String(64))
    source: Mapped[str] = mapped_column(String(16))
    from_phase: Mapped[str | None] = mapped_column(String(32))
    to_phase: Mapped[str] = mapped_column(String(32))
    at: Mapped[dt.datetime]
    reason: Mapped[str | None] = mapped_column(String(253))
    message: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        UniqueConstraint("job_uid", "source", "to_phase", "at"),
        Index(None, "at"),
    )


class PodAttempt(Base):
    """One pod incarnation of a job (a restarted job gets new pods, hence new attempts).

    Fields are set once: the first known bind/start/finish/exit code wins, so replays and
    out-of-order events converge to the same row.
    """

    __tablename__ = "pod_attempts"

    pod_uid: Mapped[str] = mapped_column(String(64), primary_key=True)
    namespace: Mapped[str] = mapped_column(String(253))
    name: Mapped[str] = mapped_column(String(253))
    job_uid: Mapped[str | None] = mapped_column(String(64))
    podgroup: Mapped[str | None] = mapped_column(String(253))
    role: Mapped[str | None] = mapped_column(String(253))
    queue: Mapped[str | None] = mapped_column(String(253))
    node: Mapped[str | None] = mapped_column(String(253))
    cpu_milli: Mapped[int | None] = mapped_column(BigInteger)
    memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    gpu_milli: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[dt.datetime | None]
    bound_at: Mapped[dt.datetime | None]
    started_at: Mapped[dt.datetime | None]
    finished_at: Mapped[dt.datetime | None]
    exit_code: Mapped[int | None] = mapped_column(Integer)
    outcome: Mapped[str | None] = mapped_column(String(32))
    eviction_cause: Mapped[str | None] = mapped_column(String(253))
    restarts: Mapped[int | None] = mapped_column(Integer)

    __table_args__ = (
        Index(None, "job_uid"),
        Index(None, "started_at"),
        Index(None, "finished_at"),
    )


class SchedulingEvent(Base):
    """A preemption or reclaim decision: who lost a pod, for whom, and why.

    Identity: (action, victim_pod_uid) — a pod is evicted at most once per action.
    """

    __tablename__ = "scheduling_events"

    id: Mapped[int] = mapped_column(_id_type(), primary_key=True, autoincrement=True)
    at: Mapped[dt.datetime]
    action: Mapped[str] = mapped_column(String(32))
    victim_pod_uid: Mapped[str] = mapped_column(String(64))
    victim_namespace: Mapped[str] = mapped_column(String(253))
    victim_pod: Mapped[str] = mapped_column(String(253))
    victim_job_uid: Mapped[str | None] = mapped_column(String(64))
    victim_queue: Mapped[str | None] = mapped_column(String(253))
    beneficiary_job_uid: Mapped[str | None] = mapped_column(String(64))
    beneficiary_queue: Mapped[str | None] = mapped_column(String(253))
    reason: Mapped[str | None] = mapped_column(Text)
    session_id: Mapped[str | None] = mapped_column(String(64))
    cpu_milli: Mapped[int | None] = mapped_column(BigInteger)
    memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    gpu_milli: Mapped[int | None] = mapped_column(BigInteger)

    __table_args__ = (
        UniqueConstraint("action", "victim_pod_uid"),
        Index(None, "at"),
    )


class QueueConfig(Base):
    """Queue configuration history: the configuration observed at ``valid_from``, in force until
    the next row of the same queue.

    Rows are written when a queue's configuration changes and when a component first sees the
    queue (after a restart). A row may repeat the previous one; it is kept so that the
    configuration in force at any time does not depend on the order events arrived in.
    """

    __tablename__ = "queue_configs"

    id: Mapped[int] = mapped_column(_id_type(), primary_key=True, autoincrement=True)
    queue: Mapped[str] = mapped_column(String(253))
    queue_uid: Mapped[str | None] = mapped_column(String(64))
    valid_from: Mapped[dt.datetime]
    config_hash: Mapped[str] = mapped_column(String(64))
    weight: Mapped[int | None] = mapped_column(Integer)
    capability: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    guarantee: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    deserved: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    reclaimable: Mapped[bool | None] = mapped_column(Boolean)
    priority: Mapped[int | None] = mapped_column(Integer)
    state: Mapped[str | None] = mapped_column(String(32))
    parent: Mapped[str | None] = mapped_column(String(253))

    __table_args__ = (UniqueConstraint("queue", "valid_from"),)


class QueueUsageSample(Base):
    """A periodic sample of one queue's use of one resource (internal units)."""

    __tablename__ = "queue_usage_samples"

    id: Mapped[int] = mapped_column(_id_type(), primary_key=True, autoincrement=True)
    at: Mapped[dt.datetime]
    queue: Mapped[str] = mapped_column(String(253))
    resource: Mapped[str] = mapped_column(String(253))
    allocated: Mapped[int] = mapped_column(BigInteger)
    deserved: Mapped[int | None] = mapped_column(BigInteger)
    capability: Mapped[int | None] = mapped_column(BigInteger)
    pending: Mapped[int | None] = mapped_column(BigInteger)

    __table_args__ = (
        UniqueConstraint("queue", "resource", "at"),
        Index(None, "at"),
    )


class UsageDay(Base):
    """Finished pods' use per UTC day, queue, namespace and submitter (a rollup of
    ``report_pod_usage``, maintained by the writer in the transaction of the raw rows).

    Keys are never NULL (``''`` stands for an unknown queue or submitter) so that adding a delta
    is one upsert. Amounts are exact integers: milliseconds times milli-units, so the sum does not
    depend on the order events arrived in. ``pod_days`` counts (pod, day) pairs; ``pods_started``
    the pods whose first day is this one, so distinct pods over several days add up
    (``batch.ledger.rollups``). Pods still running are not here: reports read them raw.
    """

    __tablename__ = "usage_days"

    day: Mapped[dt.date] = mapped_column(Date, primary_key=True)
    queue: Mapped[str] = mapped_column(String(253), primary_key=True)
    namespace: Mapped[str] = mapped_column(String(253), primary_key=True)
    submitter: Mapped[str] = mapped_column(String(253), primary_key=True)
    pod_days: Mapped[int] = mapped_column(BigInteger)
    pods_started: Mapped[int] = mapped_column(BigInteger)
    gpu_milli_ms: Mapped[int] = mapped_column(BigInteger)
    cpu_milli_ms: Mapped[int] = mapped_column(BigInteger)


class WaitDay(Base):
    """Settled jobs' waits per UTC day of submission, queue, namespace and wait bucket (a rollup
    of ``report_wait_times``, maintained by the writer in the transaction of the job rows).

    Settled: started (``bucket`` >= 0, by the wait's whole seconds, ``batch.ledger.jobrollups``)
    or ended without starting (``bucket`` = -1, counted as a job only). Jobs still waiting are
    not here: their wait grows with the report's "now", so reports read them raw. ``wait_us``
    sums the view's ``wait_seconds`` in microseconds (exact integers). ``''`` stands for an
    unknown queue.
    """

    __tablename__ = "wait_days"

    day: Mapped[dt.date] = mapped_column(Date, primary_key=True)
    queue: Mapped[str] = mapped_column(String(253), primary_key=True)
    namespace: Mapped[str] = mapped_column(String(253), primary_key=True)
    bucket: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    jobs: Mapped[int] = mapped_column(BigInteger)
    wait_us: Mapped[int] = mapped_column(BigInteger)


class OutcomeDay(Base):
    """Finished jobs per UTC day of finish, queue and namespace (a rollup of
    ``report_outcomes``, maintained by the writer in the transaction of the job rows): how many,
    by outcome, their retries, and how many have a run time with its sum in microseconds.
    ``''`` stands for an unknown queue."""

    __tablename__ = "outcome_days"

    day: Mapped[dt.date] = mapped_column(Date, primary_key=True)
    queue: Mapped[str] = mapped_column(String(253), primary_key=True)
    namespace: Mapped[str] = mapped_column(String(253), primary_key=True)
    finished: Mapped[int] = mapped_column(BigInteger)
    completed: Mapped[int] = mapped_column(BigInteger)
    failed: Mapped[int] = mapped_column(BigInteger)
    aborted: Mapped[int] = mapped_column(BigInteger)
    terminated: Mapped[int] = mapped_column(BigInteger)
    deleted: Mapped[int] = mapped_column(BigInteger)
    retries: Mapped[int] = mapped_column(BigInteger)
    runs: Mapped[int] = mapped_column(BigInteger)
    run_us: Mapped[int] = mapped_column(BigInteger)


TABLES = tuple(Base.metadata.sorted_tables)
