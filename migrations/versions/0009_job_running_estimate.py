"""jobs.running_estimate_s: the job's expected run time, for what-if replays.

A job that never started has no run time in the ledger; a what-if still replays it (leaving it
out would hide the queue it is stuck in) and assumes one. The job's own estimate
(``spec.runningEstimate``, or the ``tephra.io/running-estimate`` annotation of a workload or its
PodGroup) is the best guess, so the recorder now keeps it, in seconds. NULL for jobs recorded
before, and for jobs without an estimate. No view reads it.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06 02:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("running_estimate_s", sa.Float(), nullable=True))


def downgrade() -> None:
    # A plain ALTER TABLE ... DROP COLUMN (SQLite >= 3.35): a batch copy of the table would
    # fail on SQLite, whose report views read it.
    op.drop_column("jobs", "running_estimate_s")
