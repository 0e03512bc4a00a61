"""Reading a job once per reconcile (`JobFacts`) and the refusals that end a reconcile early."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from batch.api.admission import AdmissionLimits
from batch.api.defaults import max_retry as default_max_retry
from batch.api.events import identity
from batch.controllers import constants as c
from batch.controllers.effects import (
    EmitEvent,
    ObjectRef,
    PatchStatus,
    ReconcileResult,
)
from batch.controllers.job.helpers import _count
from batch.controllers.job.pods import _refuse_job
from batch.controllers.jobspec import TaskView, job_min_available, meta, tasks_of
from batch.controllers.timeutil import format_time


@dataclass(frozen=True, slots=True)
class JobFacts:
    """What a reconcile reads from the job object: who it is, its status counters and its tasks.

    ``phase`` is "" for a job never reconciled; ``notes`` say what was read in an unusual way."""

    ref: ObjectRef
    spec: Mapping[str, Any]
    status: Mapping[str, Any]
    phase: str
    version: int
    retry: int
    max_retry: int
    tasks: Sequence[TaskView]
    #: spec.minAvailable, else the webhook default from the tasks (`job_min_available`)
    min_available: int
    notes: tuple[str, ...] = ()

    @property
    def namespace(self) -> str:
        return self.ref.namespace

    @property
    def state(self) -> Mapping[str, Any]:
        return self.status.get("state") or {}


def read_job(job: Mapping[str, Any]) -> JobFacts:
    """The job's identity (events name it as client-go's recorder does), status counters and
    tasks. A phase the controller did not write is taken for Pending, as Volcano's state
    machine does."""
    m = meta(job)
    uid, seen = identity(job)
    ref = ObjectRef(
        c.BATCH_API,
        "Job",
        str(m.get("namespace") or "default"),
        str(m.get("name")),
        uid or None,
        seen or None,
    )
    spec = job.get("spec") or {}
    status: Mapping[str, Any] = job.get("status") or {}
    phase = str((status.get("state") or {}).get("phase") or "")
    if _initialise_refused(status):
        phase = ""  # Pending only to say why it is not yet initialised: try again
    notes: tuple[str, ...] = ()
    if phase and phase not in c.JOB_PHASES:
        notes = (f"unknown phase {phase!r} taken as {c.PENDING}",)
        phase = c.PENDING
    tasks = tasks_of(job)
    return JobFacts(
        ref=ref,
        spec=spec,
        status=status,
        phase=phase,
        version=_count(status.get("version")),
        retry=_count(status.get("retryCount")),
        max_retry=int(default_max_retry(spec.get("maxRetry"))),
        tasks=tasks,
        min_available=job_min_available(job, tasks),
        notes=notes,
    )


def _initialise_refused(status: Mapping[str, Any]) -> bool:
    state = status.get("state") or {}
    return (
        state.get("phase") == c.PENDING
        and state.get("reason") == c.FORBIDDEN_REASON
        and not status.get("controlledResources")
    )


def pending_forbidden(job: Mapping[str, Any], message: str, now: datetime) -> list[Any]:
    """The status of a new job whose first reconcile the API server forbade: Pending, the state
    naming the refusal (none for a job already initialised). `read_job` still takes it for new,
    so it is initialised once the write is allowed (issue 30.9: such a job kept an empty phase
    for 24 minutes)."""
    facts = read_job(job)
    if facts.phase != "" or facts.state.get("message") == message:
        return []
    state = {
        "phase": c.PENDING,
        "reason": c.FORBIDDEN_REASON,
        "message": message,
        "lastTransitionTime": format_time(now),
    }
    return [PatchStatus(facts.ref, {"state": state})]


def refuse_oversized(
    facts: JobFacts, limits: AdmissionLimits, now: datetime
) -> ReconcileResult | None:
    """A job over the size limits is never expanded (no PodGroup, plugin objects or pods): a new
    one fails at once, saying why; one scaled over them is left as it is until scaled back
    (None: within the limits, or finished)."""
    message = limits.job_error([t.replicas for t in facts.tasks])
    if not message or facts.phase in c.FINISHED_PHASES:
        return None
    if facts.phase == "":
        return _refuse_job(facts.ref, "JobTooLarge", message, now)
    result = ReconcileResult(notes=[message])
    result.actions.append(EmitEvent(facts.ref, "JobTooLarge", message, type="Warning"))
    return result
