"""Retention: ``tephra db prune --older-than``.

Deletes finished history older than a cutoff: jobs that finished before it (with their
transitions and pod attempts), scheduling events and usage samples taken before it, and queue
configurations superseded before it. Jobs still running are kept whatever their age, and the
configuration in force at the cutoff is kept for every queue, so reports over the remaining
window stay correct.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import Connection, and_, delete, exists, func, select
from sqlalchemy.orm import aliased

from batch.ledger import jobrollups
from batch.ledger.models import (
    Job,
    JobTransition,
    PodAttempt,
    QueueConfig,
    QueueUsageSample,
    SchedulingEvent,
)
from batch.ledger.rollups import forget


@dataclass(slots=True)
class PruneResult:
    jobs: int = 0
    transitions: int = 0
    pod_attempts: int = 0
    scheduling_events: int = 0
    queue_usage_samples: int = 0
    queue_configs: int = 0

    def total(self) -> int:
        return (
            self.jobs
            + self.transitions
            + self.pod_attempts
            + self.scheduling_events
            + self.queue_usage_samples
            + self.queue_configs
        )


def prune(conn: Connection, *, before: dt.datetime, dry_run: bool = False) -> PruneResult:
    """Delete (or, with ``dry_run``, count) history older than ``before``."""
    old_jobs = select(Job.uid).where(Job.finished_at < before, Job.final_phase.is_not(None))
    newer = aliased(QueueConfig)
    superseded = and_(
        QueueConfig.valid_from < before,
        exists().where(
            newer.queue == QueueConfig.queue,
            newer.valid_from > QueueConfig.valid_from,
            newer.valid_from <= before,
        ),
    )
    targets = [
        ("transitions", JobTransition, JobTransition.job_uid.in_(old_jobs)),
        (
            "pod_attempts",
            PodAttempt,
            PodAttempt.job_uid.in_(old_jobs)
            | and_(PodAttempt.job_uid.is_(None), PodAttempt.finished_at < before),
        ),
        ("scheduling_events", SchedulingEvent, SchedulingEvent.at < before),
        ("queue_usage_samples", QueueUsageSample, QueueUsageSample.at < before),
        ("queue_configs", QueueConfig, superseded),
        ("jobs", Job, and_(Job.finished_at < before, Job.final_phase.is_not(None))),
    ]
    result = PruneResult()
    if not dry_run:
        # The job rollups stay the sums of the jobs kept; read before the transitions go.
        jobrollups.forget(conn, old_jobs)
    for name, model, cond in targets:
        if dry_run:
            count = conn.execute(select(func.count()).select_from(model).where(cond)).scalar_one()
        else:
            if model is PodAttempt:
                forget(conn, cond)  # the usage rollup stays the sum of the pods kept
            count = conn.execute(delete(model).where(cond)).rowcount
        setattr(result, name, int(count or 0))
    return result
