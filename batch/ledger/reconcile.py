"""Reconcile the ledger with what the API shows when a controller starts.

Why this exists: a job or pod deleted while no controller watched (the controller was killed,
the ledger's events about it died with it) stayed open in the ledger for ever: no final phase,
counted as waiting in `wait-times`. A starting controller lists every job and pod; what the
ledger holds open but the API no longer has gets a final transition, `Deleted` with reason
`Lost` (the object is gone; when it went is unknown, so the time is the reconcile's).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection

from sqlalchemy import Connection, select

from batch.ledger.events import JobPhaseChanged, LedgerEvent, PodAttempt
from batch.ledger.models import Job, PodAttempt as PodAttemptRow

__all__ = ["LOST", "lost_events"]

LOST = "Lost"
_MESSAGE = "gone from the API when the controller started; deleted while no controller recorded it"


def lost_events(
    conn: Connection,
    *,
    live_jobs: Collection[str],
    live_pods: Collection[str],
    job_kinds: Collection[str],
    now: dt.datetime,
) -> list[LedgerEvent]:
    """Final events for the open jobs (of `job_kinds`, the kinds the caller lists) and open pod
    attempts whose uids are not among the live ones."""
    out: list[LedgerEvent] = []
    jobs = select(Job.uid, Job.namespace, Job.name, Job.kind, Job.phase).where(
        Job.final_phase.is_(None), Job.kind.in_(list(job_kinds))
    )
    for uid, namespace, name, kind, phase in conn.execute(jobs):
        if uid not in live_jobs:
            out.append(
                JobPhaseChanged(
                    job_uid=uid,
                    namespace=namespace,
                    name=name,
                    kind=kind,
                    from_phase=phase,
                    to_phase="Deleted",
                    at=now,
                    reason=LOST,
                    message=_MESSAGE,
                )
            )
    pods = select(
        PodAttemptRow.pod_uid,
        PodAttemptRow.namespace,
        PodAttemptRow.name,
        PodAttemptRow.job_uid,
        PodAttemptRow.started_at,
    ).where(PodAttemptRow.outcome.is_(None))
    for uid, namespace, name, job_uid, started_at in conn.execute(pods):
        if uid not in live_pods:
            out.append(
                PodAttempt(
                    pod_uid=uid,
                    namespace=namespace,
                    name=name,
                    job_uid=job_uid,
                    outcome="Deleted",
                    finished_at=now if started_at is not None else None,
                )
            )
    return out
