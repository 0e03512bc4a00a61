"""report_pod_usage (PostgreSQL) leaves out pod-days of zero length, as SQLite's does.

A pod that started and finished in the same instant (a crash loop's attempts) produced a
zero-second row on PostgreSQL only, so the usage report counted it as a pod there and not on
SQLite. GPU- and CPU-hours are unchanged. SQLite needs nothing; ``report_usage_daily`` is
recreated because it reads the view.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02 21:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SECONDS = (
    "CAST(EXTRACT(EPOCH FROM (LEAST(p.e, d.day + interval '1 day') - GREATEST(p.s, d.day))) "
    "AS double precision)"
)

_POD_USAGE = f"""
SELECT p.pod_uid, p.job_uid, p.namespace, COALESCE(p.queue, j.queue) AS queue, j.submitter,
       p.node, p.started_at AS run_start, p.finished_at AS run_end,
       CAST(d.day AS date) AS day,
       {_SECONDS} AS seconds,
       {_SECONDS} * COALESCE(p.gpu_milli, 0) / 3600000.0 AS gpu_hours,
       {_SECONDS} * COALESCE(p.cpu_milli, 0) / 3600000.0 AS cpu_core_hours
FROM (SELECT pa.*,
             pa.started_at AT TIME ZONE 'UTC' AS s,
             COALESCE(pa.finished_at, now()) AT TIME ZONE 'UTC' AS e
      FROM pod_attempts pa
      WHERE pa.started_at IS NOT NULL) p
LEFT JOIN jobs j ON j.uid = p.job_uid
CROSS JOIN LATERAL generate_series(date_trunc('day', p.s), p.e, interval '1 day') AS d(day)
WHERE d.day < p.e{{extra}}
"""

_USAGE_DAILY = """
SELECT day, queue, namespace, submitter,
       COUNT(*) AS pods,
       SUM(gpu_hours) AS gpu_hours,
       SUM(cpu_core_hours) AS cpu_core_hours
FROM report_pod_usage
GROUP BY day, queue, namespace, submitter
"""


def _recreate(extra: str) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP VIEW IF EXISTS report_usage_daily")
    op.execute("DROP VIEW IF EXISTS report_pod_usage")
    op.execute(f"CREATE VIEW report_pod_usage AS {_POD_USAGE.format(extra=extra).strip()}")
    op.execute(f"CREATE VIEW report_usage_daily AS {_USAGE_DAILY.strip()}")


def upgrade() -> None:
    _recreate("\n  AND LEAST(p.e, d.day + interval '1 day') > GREATEST(p.s, d.day)")


def downgrade() -> None:
    _recreate("")
