"""Covering index for wait-time reports on PostgreSQL.

``ix_jobs_queue_submitted_at`` now also carries ``first_started_at`` and ``namespace`` (INCLUDE),
so the wait-times report reads only the index: over a million jobs the heap visits it replaces
cost seconds. SQLite has no INCLUDE; there the index is unchanged.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02 15:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = "ix_jobs_queue_submitted_at"


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.drop_index(NAME, table_name="jobs")
    op.create_index(
        NAME,
        "jobs",
        ["queue", "submitted_at"],
        postgresql_include=["first_started_at", "namespace"],
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.drop_index(NAME, table_name="jobs")
    op.create_index(NAME, "jobs", ["queue", "submitted_at"])
