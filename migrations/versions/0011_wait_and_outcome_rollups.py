"""wait_days and outcome_days: the wait and outcome rollups, created and filled from the jobs.

Settled jobs' waits per UTC day of submission, queue, namespace and wait bucket, and finished
jobs per day of finish, queue and namespace (``batch.ledger.models.WaitDay``, ``OutcomeDay``);
the writer keeps them up to date from now on and ``report wait-times`` / ``report outcomes``
read them plus the raw rows the rollups cannot answer (partial days, jobs still waiting, the
exact waits of the buckets that hold a percentile). A partial index finds the jobs still
waiting. The backfill reads both report views once and prints progress every 100,000 jobs.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06 08:30:00
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from batch.ledger.jobrollups import backfill

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_STILL_WAITING = sa.text("first_started_at IS NULL AND final_phase IS NULL")


def _progress(what: str, jobs: int) -> None:
    print(f"{what} rollup: {jobs:,} jobs read", file=sys.stderr, flush=True)


def upgrade() -> None:
    op.create_index(
        "ix_jobs_still_waiting",
        "jobs",
        ["queue", "submitted_at"],
        postgresql_where=_STILL_WAITING,
        sqlite_where=_STILL_WAITING,
    )
    op.create_table(
        "wait_days",
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("queue", sa.String(253), nullable=False),
        sa.Column("namespace", sa.String(253), nullable=False),
        sa.Column("bucket", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("jobs", sa.BigInteger(), nullable=False),
        sa.Column("wait_us", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("day", "queue", "namespace", "bucket", name=op.f("pk_wait_days")),
    )
    op.create_table(
        "outcome_days",
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("queue", sa.String(253), nullable=False),
        sa.Column("namespace", sa.String(253), nullable=False),
        *(
            sa.Column(name, sa.BigInteger(), nullable=False)
            for name in (
                "finished",
                "completed",
                "failed",
                "aborted",
                "terminated",
                "deleted",
                "retries",
                "runs",
                "run_us",
            )
        ),
        sa.PrimaryKeyConstraint("day", "queue", "namespace", name=op.f("pk_outcome_days")),
    )
    backfill(op.get_bind(), progress=_progress)


def downgrade() -> None:
    op.drop_table("outcome_days")
    op.drop_table("wait_days")
    op.drop_index("ix_jobs_still_waiting", table_name="jobs")
