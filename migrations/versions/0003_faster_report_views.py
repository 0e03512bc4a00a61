"""Faster report views: range join for queue weights, COUNT(*) for pods per day.

``report_queue_share`` looked the queue weight up with a correlated subquery per sample, which
cost seconds over a month of 5-minute samples; it now joins each sample to the configuration
whose [valid_from, next valid_from) range contains it. ``report_usage_daily`` counts rows instead
of distinct pods: ``report_pod_usage`` has exactly one row per pod and day, so the result is the
same without a sort per group.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02 14:35:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SHARE = """
WITH cfg AS (
    SELECT c.queue, c.weight, c.valid_from,
           LEAD(c.valid_from) OVER (PARTITION BY c.queue ORDER BY c.valid_from) AS valid_to
    FROM queue_configs c
)
SELECT s.at, {day} AS day, s.queue, s.resource, s.allocated, s.deserved, s.capability,
       s.pending,
       CASE WHEN s.deserved > 0
            THEN CAST(s.allocated AS DOUBLE PRECISION) / s.deserved END AS share_of_deserved,
       CASE WHEN SUM(s.allocated) OVER (PARTITION BY s.at, s.resource) > 0
            THEN CAST(s.allocated AS DOUBLE PRECISION)
                 / SUM(s.allocated) OVER (PARTITION BY s.at, s.resource)
       END AS share_of_allocated,
       CASE WHEN s.deserved IS NOT NULL AND s.allocated < s.deserved
                 AND COALESCE(s.pending, 0) > 0 THEN 1 ELSE 0 END AS starved,
       cfg.weight
FROM queue_usage_samples s
LEFT JOIN cfg ON cfg.queue = s.queue AND cfg.valid_from <= s.at
             AND (cfg.valid_to IS NULL OR s.at < cfg.valid_to)
"""

_SHARE_0002 = """
SELECT s.at, {day} AS day, s.queue, s.resource, s.allocated, s.deserved, s.capability,
       s.pending,
       CASE WHEN s.deserved > 0
            THEN CAST(s.allocated AS DOUBLE PRECISION) / s.deserved END AS share_of_deserved,
       CASE WHEN SUM(s.allocated) OVER (PARTITION BY s.at, s.resource) > 0
            THEN CAST(s.allocated AS DOUBLE PRECISION)
                 / SUM(s.allocated) OVER (PARTITION BY s.at, s.resource)
       END AS share_of_allocated,
       CASE WHEN s.deserved IS NOT NULL AND s.allocated < s.deserved
                 AND COALESCE(s.pending, 0) > 0 THEN 1 ELSE 0 END AS starved,
       (SELECT c.weight FROM queue_configs c
        WHERE c.queue = s.queue AND c.valid_from <= s.at
        ORDER BY c.valid_from DESC LIMIT 1) AS weight
FROM queue_usage_samples s
"""

_USAGE_DAILY = """
SELECT day, queue, namespace, submitter,
       COUNT({pods}) AS pods,
       SUM(gpu_hours) AS gpu_hours,
       SUM(cpu_core_hours) AS cpu_core_hours
FROM report_pod_usage
GROUP BY day, queue, namespace, submitter
"""


def _day() -> str:
    if op.get_bind().dialect.name == "postgresql":
        return "CAST(s.at AT TIME ZONE 'UTC' AS date)"
    return "date(s.at)"


def _replace(name: str, body: str) -> None:
    op.execute(f"DROP VIEW IF EXISTS {name}")
    op.execute(f"CREATE VIEW {name} AS {body.strip()}")


def upgrade() -> None:
    _replace("report_queue_share", _SHARE.format(day=_day()))
    _replace("report_usage_daily", _USAGE_DAILY.format(pods="*"))


def downgrade() -> None:
    _replace("report_queue_share", _SHARE_0002.format(day=_day()))
    _replace("report_usage_daily", _USAGE_DAILY.format(pods="DISTINCT pod_uid"))
