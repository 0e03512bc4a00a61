"""report_preemptions looks victim and beneficiary jobs up only when a column needs them.

The 0002 view joined ``jobs`` twice; over a million jobs PostgreSQL hashed the whole table twice
even for a handful of evictions. Scalar subqueries are evaluated only for the columns a query
reads, and inside COALESCE only when the scheduler did not record the queue itself (it normally
does), so the report over the events no longer touches ``jobs``. Same columns as before.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02 15:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NEW = """
SELECT e.at, {day} AS day, e.action,
       e.victim_namespace, e.victim_pod, e.victim_job_uid,
       (SELECT j.name FROM jobs j WHERE j.uid = e.victim_job_uid) AS victim_job,
       COALESCE(e.victim_queue,
                (SELECT j.queue FROM jobs j WHERE j.uid = e.victim_job_uid)) AS victim_queue,
       e.beneficiary_job_uid,
       (SELECT j.namespace FROM jobs j WHERE j.uid = e.beneficiary_job_uid)
           AS beneficiary_namespace,
       (SELECT j.name FROM jobs j WHERE j.uid = e.beneficiary_job_uid) AS beneficiary_job,
       COALESCE(e.beneficiary_queue,
                (SELECT j.queue FROM jobs j WHERE j.uid = e.beneficiary_job_uid))
           AS beneficiary_queue,
       e.reason, e.session_id,
       CAST(e.gpu_milli AS DOUBLE PRECISION) / 1000 AS gpus,
       CAST(e.cpu_milli AS DOUBLE PRECISION) / 1000 AS cpus
FROM scheduling_events e
"""

_OLD = """
SELECT e.at, {day} AS day, e.action,
       e.victim_namespace, e.victim_pod, e.victim_job_uid, vj.name AS victim_job,
       COALESCE(e.victim_queue, vj.queue) AS victim_queue,
       e.beneficiary_job_uid, bj.namespace AS beneficiary_namespace, bj.name AS beneficiary_job,
       COALESCE(e.beneficiary_queue, bj.queue) AS beneficiary_queue,
       e.reason, e.session_id,
       CAST(e.gpu_milli AS DOUBLE PRECISION) / 1000 AS gpus,
       CAST(e.cpu_milli AS DOUBLE PRECISION) / 1000 AS cpus
FROM scheduling_events e
LEFT JOIN jobs vj ON vj.uid = e.victim_job_uid
LEFT JOIN jobs bj ON bj.uid = e.beneficiary_job_uid
"""


def _day() -> str:
    if op.get_bind().dialect.name == "postgresql":
        return "CAST(e.at AT TIME ZONE 'UTC' AS date)"
    return "date(e.at)"


def _replace(body: str) -> None:
    op.execute("DROP VIEW IF EXISTS report_preemptions")
    op.execute(f"CREATE VIEW report_preemptions AS {body.format(day=_day()).strip()}")


def upgrade() -> None:
    _replace(_NEW)


def downgrade() -> None:
    _replace(_OLD)
