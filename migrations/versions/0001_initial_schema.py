"""Initial ledger schema: jobs, transitions, pod attempts, scheduling events, queue history.

Tables only; the report views come in the next revision. Timestamps are timestamptz on
PostgreSQL (the models' UTCDateTime stores naive UTC text on SQLite).

Revision ID: 0001
Revises:
Create Date: 2026-12-02 14:10:46.922962
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_transitions",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("job_uid", sa.String(length=64), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("from_phase", sa.String(length=32), nullable=True),
        sa.Column("to_phase", sa.String(length=32), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.String(length=253), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_transitions")),
        sa.UniqueConstraint(
            "job_uid",
            "source",
            "to_phase",
            "at",
            name=op.f("uq_job_transitions_job_uid_source_to_phase_at"),
        ),
    )
    with op.batch_alter_table("job_transitions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_job_transitions_at"), ["at"], unique=False)

    op.create_table(
        "jobs",
        sa.Column("uid", sa.String(length=64), nullable=False),
        sa.Column("namespace", sa.String(length=253), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("queue", sa.String(length=253), nullable=True),
        sa.Column("submitter", sa.String(length=253), nullable=True),
        sa.Column("priority_class", sa.String(length=253), nullable=True),
        sa.Column("priority", sa.Integer(), nullable=True),
        sa.Column("podgroup", sa.String(length=253), nullable=True),
        sa.Column("requested_cpu_milli", sa.BigInteger(), nullable=True),
        sa.Column("requested_memory_bytes", sa.BigInteger(), nullable=True),
        sa.Column("requested_gpu_milli", sa.BigInteger(), nullable=True),
        sa.Column("replicas", sa.JSON(), nullable=True),
        sa.Column("min_available", sa.Integer(), nullable=True),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("first_started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("phase", sa.String(length=32), nullable=True),
        sa.Column("phase_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("final_phase", sa.String(length=32), nullable=True),
        sa.Column("retries", sa.Integer(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("uid", name=op.f("pk_jobs")),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_jobs_finished_at"), ["finished_at"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_jobs_namespace_name"), ["namespace", "name"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_jobs_queue_submitted_at"), ["queue", "submitted_at"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_jobs_submitted_at"), ["submitted_at"], unique=False)

    op.create_table(
        "pod_attempts",
        sa.Column("pod_uid", sa.String(length=64), nullable=False),
        sa.Column("namespace", sa.String(length=253), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("job_uid", sa.String(length=64), nullable=True),
        sa.Column("podgroup", sa.String(length=253), nullable=True),
        sa.Column("role", sa.String(length=253), nullable=True),
        sa.Column("queue", sa.String(length=253), nullable=True),
        sa.Column("node", sa.String(length=253), nullable=True),
        sa.Column("cpu_milli", sa.BigInteger(), nullable=True),
        sa.Column("memory_bytes", sa.BigInteger(), nullable=True),
        sa.Column("gpu_milli", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("bound_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("outcome", sa.String(length=32), nullable=True),
        sa.Column("eviction_cause", sa.String(length=253), nullable=True),
        sa.Column("restarts", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("pod_uid", name=op.f("pk_pod_attempts")),
    )
    with op.batch_alter_table("pod_attempts", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_pod_attempts_finished_at"), ["finished_at"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_pod_attempts_job_uid"), ["job_uid"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_pod_attempts_started_at"), ["started_at"], unique=False
        )

    op.create_table(
        "queue_configs",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("queue", sa.String(length=253), nullable=False),
        sa.Column("queue_uid", sa.String(length=64), nullable=True),
        sa.Column("valid_from", sa.DateTime(timezone=True), nullable=False),
        sa.Column("config_hash", sa.String(length=64), nullable=False),
        sa.Column("weight", sa.Integer(), nullable=True),
        sa.Column("capability", sa.JSON(), nullable=True),
        sa.Column("guarantee", sa.JSON(), nullable=True),
        sa.Column("deserved", sa.JSON(), nullable=True),
        sa.Column("reclaimable", sa.Boolean(), nullable=True),
        sa.Column("priority", sa.Integer(), nullable=True),
        sa.Column("state", sa.String(length=32), nullable=True),
        sa.Column("parent", sa.String(length=253), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_queue_configs")),
        sa.UniqueConstraint("queue", "valid_from", name=op.f("uq_queue_configs_queue_valid_from")),
    )
    op.create_table(
        "queue_usage_samples",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("queue", sa.String(length=253), nullable=False),
        sa.Column("resource", sa.String(length=253), nullable=False),
        sa.Column("allocated", sa.BigInteger(), nullable=False),
        sa.Column("deserved", sa.BigInteger(), nullable=True),
        sa.Column("capability", sa.BigInteger(), nullable=True),
        sa.Column("pending", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_queue_usage_samples")),
        sa.UniqueConstraint(
            "queue", "resource", "at", name=op.f("uq_queue_usage_samples_queue_resource_at")
        ),
    )
    with op.batch_alter_table("queue_usage_samples", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_queue_usage_samples_at"), ["at"], unique=False)

    op.create_table(
        "scheduling_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("victim_pod_uid", sa.String(length=64), nullable=False),
        sa.Column("victim_namespace", sa.String(length=253), nullable=False),
        sa.Column("victim_pod", sa.String(length=253), nullable=False),
        sa.Column("victim_job_uid", sa.String(length=64), nullable=True),
        sa.Column("victim_queue", sa.String(length=253), nullable=True),
        sa.Column("beneficiary_job_uid", sa.String(length=64), nullable=True),
        sa.Column("beneficiary_queue", sa.String(length=253), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("session_id", sa.String(length=64), nullable=True),
        sa.Column("cpu_milli", sa.BigInteger(), nullable=True),
        sa.Column("memory_bytes", sa.BigInteger(), nullable=True),
        sa.Column("gpu_milli", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_scheduling_events")),
        sa.UniqueConstraint(
            "action", "victim_pod_uid", name=op.f("uq_scheduling_events_action_victim_pod_uid")
        ),
    )
    with op.batch_alter_table("scheduling_events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_scheduling_events_at"), ["at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("scheduling_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_scheduling_events_at"))

    op.drop_table("scheduling_events")
    with op.batch_alter_table("queue_usage_samples", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_queue_usage_samples_at"))

    op.drop_table("queue_usage_samples")
    op.drop_table("queue_configs")
    with op.batch_alter_table("pod_attempts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_pod_attempts_started_at"))
        batch_op.drop_index(batch_op.f("ix_pod_attempts_job_uid"))
        batch_op.drop_index(batch_op.f("ix_pod_attempts_finished_at"))

    op.drop_table("pod_attempts")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_submitted_at"))
        batch_op.drop_index(batch_op.f("ix_jobs_queue_submitted_at"))
        batch_op.drop_index(batch_op.f("ix_jobs_namespace_name"))
        batch_op.drop_index(batch_op.f("ix_jobs_finished_at"))

    op.drop_table("jobs")
    with op.batch_alter_table("job_transitions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_job_transitions_at"))

    op.drop_table("job_transitions")
