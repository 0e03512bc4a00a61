"""report_wait_times says which jobs are still waiting (and each job's final phase).

A job that has neither started nor finished is still waiting: its wait so far is a lower bound
of its wait, and the reports count it so (``batch.ledger.reports.wait_times`` and ``fairness``,
as of the report's "now"). The view gains ``final_phase`` and ``still_waiting`` (1 or 0) so a
query on the view can tell a job still waiting from one deleted before it started, which waits
no more; the other columns are unchanged.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06 02:10:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_DAY = {
    "postgresql": "CAST(j.submitted_at AT TIME ZONE 'UTC' AS date)",
    "sqlite": "date(j.submitted_at)",
}
_WAIT = {
    "postgresql": "CAST(EXTRACT(EPOCH FROM (j.first_started_at - j.submitted_at)) "
    "AS double precision)",
    "sqlite": "ROUND((julianday(j.first_started_at) - julianday(j.submitted_at)) * 86400.0, 3)",
}

_VIEW = """
SELECT j.uid AS job_uid, j.namespace, j.name, j.kind, j.queue, j.submitter,
       j.priority_class, j.requested_gpu_milli,
       j.submitted_at, j.first_started_at,
       {day} AS day,
       {wait} AS wait_seconds{extra}
FROM jobs j
WHERE j.submitted_at IS NOT NULL
"""

_EXTRA = """,
       j.final_phase,
       CASE WHEN j.first_started_at IS NULL AND j.final_phase IS NULL THEN 1 ELSE 0 END
           AS still_waiting"""


def _recreate(extra: str) -> None:
    dialect = op.get_bind().dialect.name
    body = _VIEW.format(day=_DAY[dialect], wait=_WAIT[dialect], extra=extra)
    op.execute("DROP VIEW IF EXISTS report_wait_times")
    op.execute(f"CREATE VIEW report_wait_times AS {body.strip()}")


def upgrade() -> None:
    _recreate(_EXTRA)


def downgrade() -> None:
    _recreate("")
