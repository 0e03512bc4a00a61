"""usage_days: the usage rollup, created and filled from the pods already recorded.

Finished pods' GPU- and CPU-time per UTC day, queue, namespace and submitter, with pod-days and
pods started per day (``batch.ledger.models.UsageDay``); the writer keeps it up to date from now
on and the usage report reads it plus the pods still running and the partial last day. The
backfill reads every finished pod once (with its job) and prints progress every 100,000 pods;
on a million pods it takes about a minute.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06 05:30:00
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from batch.ledger.rollups import backfill

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _progress(pods: int) -> None:
    print(f"usage rollup: {pods:,} finished pods read", file=sys.stderr, flush=True)


def upgrade() -> None:
    op.create_table(
        "usage_days",
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("queue", sa.String(253), nullable=False),
        sa.Column("namespace", sa.String(253), nullable=False),
        sa.Column("submitter", sa.String(253), nullable=False),
        sa.Column("pod_days", sa.BigInteger(), nullable=False),
        sa.Column("pods_started", sa.BigInteger(), nullable=False),
        sa.Column("gpu_milli_ms", sa.BigInteger(), nullable=False),
        sa.Column("cpu_milli_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "day", "queue", "namespace", "submitter", name=op.f("pk_usage_days")
        ),
    )
    backfill(op.get_bind(), progress=_progress)


def downgrade() -> None:
    op.drop_table("usage_days")
