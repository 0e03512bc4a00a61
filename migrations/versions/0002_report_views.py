"""Report views: wait times, per-pod-day usage, daily usage, preemptions, outcomes, queue share.

These are the ledger's public query surface (documented column by column in docs/ledger.md).
The SQL differs per dialect only where it must: time arithmetic (EXTRACT(EPOCH ...) vs
julianday) and splitting a pod's run into calendar days (generate_series vs a recursive CTE).
Days are UTC calendar days (a DATE on PostgreSQL, 'YYYY-MM-DD' text on SQLite).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02 14:20:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Dropped in reverse order (report_usage_daily reads report_pod_usage).
VIEWS = (
    "report_wait_times",
    "report_pod_usage",
    "report_usage_daily",
    "report_preemptions",
    "report_outcomes",
    "report_queue_share",
)

_PG = {
    "report_wait_times": """
SELECT j.uid AS job_uid, j.namespace, j.name, j.kind, j.queue, j.submitter,
       j.priority_class, j.requested_gpu_milli,
       j.submitted_at, j.first_started_at,
       CAST(j.submitted_at AT TIME ZONE 'UTC' AS date) AS day,
       CAST(EXTRACT(EPOCH FROM (j.first_started_at - j.submitted_at)) AS double precision)
           AS wait_seconds
FROM jobs j
WHERE j.submitted_at IS NOT NULL
""",
    "report_pod_usage": """
SELECT p.pod_uid, p.job_uid, p.namespace, COALESCE(p.queue, j.queue) AS queue, j.submitter,
       p.node, p.started_at AS run_start, p.finished_at AS run_end,
       CAST(d.day AS date) AS day,
       CAST(EXTRACT(EPOCH FROM (LEAST(p.e, d.day + interval '1 day') - GREATEST(p.s, d.day)))
            AS double precision) AS seconds,
       CAST(EXTRACT(EPOCH FROM (LEAST(p.e, d.day + interval '1 day') - GREATEST(p.s, d.day)))
            AS double precision) * COALESCE(p.gpu_milli, 0) / 3600000.0 AS gpu_hours,
       CAST(EXTRACT(EPOCH FROM (LEAST(p.e, d.day + interval '1 day') - GREATEST(p.s, d.day)))
            AS double precision) * COALESCE(p.cpu_milli, 0) / 3600000.0 AS cpu_core_hours
FROM (SELECT pa.*,
             pa.started_at AT TIME ZONE 'UTC' AS s,
             COALESCE(pa.finished_at, now()) AT TIME ZONE 'UTC' AS e
      FROM pod_attempts pa
      WHERE pa.started_at IS NOT NULL) p
LEFT JOIN jobs j ON j.uid = p.job_uid
CROSS JOIN LATERAL generate_series(date_trunc('day', p.s), p.e, interval '1 day') AS d(day)
WHERE d.day < p.e
""",
    "report_preemptions": """
SELECT e.at, CAST(e.at AT TIME ZONE 'UTC' AS date) AS day, e.action,
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
""",
    "report_outcomes": """
SELECT j.uid AS job_uid, j.namespace, j.name, j.kind, j.queue, j.submitter,
       j.final_phase AS outcome, j.retries, j.requested_gpu_milli,
       j.submitted_at, j.first_started_at, j.finished_at,
       CAST(j.finished_at AT TIME ZONE 'UTC' AS date) AS day,
       CAST(EXTRACT(EPOCH FROM (j.first_started_at - j.submitted_at)) AS double precision)
           AS wait_seconds,
       CAST(EXTRACT(EPOCH FROM (j.finished_at - j.first_started_at)) AS double precision)
           AS run_seconds
FROM jobs j
WHERE j.final_phase IS NOT NULL
""",
}

_SQLITE = {
    "report_wait_times": """
SELECT j.uid AS job_uid, j.namespace, j.name, j.kind, j.queue, j.submitter,
       j.priority_class, j.requested_gpu_milli,
       j.submitted_at, j.first_started_at,
       date(j.submitted_at) AS day,
       ROUND((julianday(j.first_started_at) - julianday(j.submitted_at)) * 86400.0, 3)
           AS wait_seconds
FROM jobs j
WHERE j.submitted_at IS NOT NULL
""",
    "report_pod_usage": """
WITH RECURSIVE spans(pod_uid, s, e, day) AS (
    SELECT pa.pod_uid, pa.started_at,
           COALESCE(pa.finished_at, strftime('%Y-%m-%d %H:%M:%f', 'now')),
           date(pa.started_at)
    FROM pod_attempts pa
    WHERE pa.started_at IS NOT NULL
    UNION ALL
    SELECT pod_uid, s, e, date(day, '+1 day') FROM spans
    WHERE julianday(date(day, '+1 day')) < julianday(e)
), parts AS (
    SELECT pod_uid, day,
           ROUND((MIN(julianday(e), julianday(day, '+1 day'))
                  - MAX(julianday(s), julianday(day))) * 86400.0, 3) AS seconds
    FROM spans
)
SELECT p.pod_uid, p.job_uid, p.namespace, COALESCE(p.queue, j.queue) AS queue, j.submitter,
       p.node, p.started_at AS run_start, p.finished_at AS run_end,
       parts.day AS day, parts.seconds AS seconds,
       parts.seconds * COALESCE(p.gpu_milli, 0) / 3600000.0 AS gpu_hours,
       parts.seconds * COALESCE(p.cpu_milli, 0) / 3600000.0 AS cpu_core_hours
FROM parts
JOIN pod_attempts p ON p.pod_uid = parts.pod_uid
LEFT JOIN jobs j ON j.uid = p.job_uid
WHERE parts.seconds > 0
""",
    "report_preemptions": """
SELECT e.at, date(e.at) AS day, e.action,
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
""",
    "report_outcomes": """
SELECT j.uid AS job_uid, j.namespace, j.name, j.kind, j.queue, j.submitter,
       j.final_phase AS outcome, j.retries, j.requested_gpu_milli,
       j.submitted_at, j.first_started_at, j.finished_at,
       date(j.finished_at) AS day,
       ROUND((julianday(j.first_started_at) - julianday(j.submitted_at)) * 86400.0, 3)
           AS wait_seconds,
       ROUND((julianday(j.finished_at) - julianday(j.first_started_at)) * 86400.0, 3)
           AS run_seconds
FROM jobs j
WHERE j.final_phase IS NOT NULL
""",
}

# Portable across both dialects.
_COMMON = {
    "report_usage_daily": """
SELECT day, queue, namespace, submitter,
       COUNT(DISTINCT pod_uid) AS pods,
       SUM(gpu_hours) AS gpu_hours,
       SUM(cpu_core_hours) AS cpu_core_hours
FROM report_pod_usage
GROUP BY day, queue, namespace, submitter
""",
    "report_queue_share": """
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
""",
}


def _definitions(dialect: str) -> dict[str, str]:
    if dialect == "postgresql":
        specific, day = _PG, "CAST(s.at AT TIME ZONE 'UTC' AS date)"
    elif dialect == "sqlite":
        specific, day = _SQLITE, "date(s.at)"
    else:  # pragma: no cover - guarded by batch.ledger.db
        raise NotImplementedError(f"report views are not written for {dialect}")
    out = dict(specific)
    out["report_usage_daily"] = _COMMON["report_usage_daily"]
    out["report_queue_share"] = _COMMON["report_queue_share"].format(day=day)
    return out


def upgrade() -> None:
    definitions = _definitions(op.get_bind().dialect.name)
    for name in VIEWS:
        op.execute(f"CREATE VIEW {name} AS {definitions[name].strip()}")


def downgrade() -> None:
    for name in reversed(VIEWS):
        op.execute(f"DROP VIEW IF EXISTS {name}")
