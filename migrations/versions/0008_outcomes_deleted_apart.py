"""report_outcomes: a job deleted before it finished is ``Deleted``, whatever came after.

The ledger records a user's deletion of an unfinished job as a ``Deleted`` transition
(``source='job'``; reason ``Deleted``, or ``Lost`` when the reconcile found it gone). When the
job's pods are then killed, a later ``Failed`` can still arrive (a framework workload's PodGroup
turns Completed with failed pods) and, being latest, becomes the job's ``final_phase``: the
outcome report counted a deletion as a failure. The view now takes the outcome from the deletion
when there is one; other columns are unchanged. The lookup, for Failed jobs only, uses the
unique index on ``job_transitions (job_uid, source, to_phase, at)``.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-06 02:20:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_DAY = {
    "postgresql": "CAST(j.finished_at AT TIME ZONE 'UTC' AS date)",
    "sqlite": "date(j.finished_at)",
}


def _seconds(dialect: str, end: str, start: str) -> str:
    if dialect == "postgresql":
        return f"CAST(EXTRACT(EPOCH FROM ({end} - {start})) AS double precision)"
    return f"ROUND((julianday({end}) - julianday({start})) * 86400.0, 3)"


_VIEW = """
SELECT j.uid AS job_uid, j.namespace, j.name, j.kind, j.queue, j.submitter,
       {outcome} AS outcome, j.retries, j.requested_gpu_milli,
       j.submitted_at, j.first_started_at, j.finished_at,
       {day} AS day,
       {wait} AS wait_seconds,
       {run} AS run_seconds
FROM jobs j{join}
WHERE j.final_phase IS NOT NULL
"""

# Only a Failed job is looked up: nothing else follows a deletion (the job controller leaves a
# job being deleted alone), so the other jobs cost nothing. On PostgreSQL a lateral join looks
# it up once per row; a subquery in the CASE would run again for every use of `outcome`.
_LOOKUP = """
           SELECT 1 AS deleted FROM job_transitions t
           WHERE j.final_phase = 'Failed' AND t.job_uid = j.uid AND t.source = 'job'
             AND t.to_phase = 'Deleted'
           LIMIT 1"""
_DELETED = {
    "postgresql": (
        "CASE WHEN d.deleted IS NULL THEN j.final_phase ELSE 'Deleted' END",
        f"\nLEFT JOIN LATERAL ({_LOOKUP}\n) d ON true",
    ),
    "sqlite": (f"CASE WHEN EXISTS ({_LOOKUP}\n) THEN 'Deleted' ELSE j.final_phase END", ""),
}


def _recreate(outcome: str, join: str) -> None:
    dialect = op.get_bind().dialect.name
    body = _VIEW.format(
        outcome=outcome,
        join=join,
        day=_DAY[dialect],
        wait=_seconds(dialect, "j.first_started_at", "j.submitted_at"),
        run=_seconds(dialect, "j.finished_at", "j.first_started_at"),
    )
    op.execute("DROP VIEW IF EXISTS report_outcomes")
    op.execute(f"CREATE VIEW report_outcomes AS {body.strip()}")


def upgrade() -> None:
    _recreate(*_DELETED[op.get_bind().dialect.name])


def downgrade() -> None:
    _recreate("j.final_phase", "")
