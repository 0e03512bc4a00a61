"""Reading a job once per reconcile (`JobFacts`) and the refusals that end a reconcile early."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from batch.api.admission import AdmissionLimits
from batch.api.jobview import JobStatusView, JobView, TaskView, job_view
from batch.controllers import constants as c
from batch.controllers.effects import (
    Action,
    EmitEvent,
    ObjectRef,
    PatchStatus,
    ReconcileResult,
)
from batch.controllers.job.pods import _refuse_job
from batch.controllers.timeutil import format_time


@dataclass(frozen=True, slots=True)
class JobFacts:
    """What a reconcile reads from the job object: its view (`batch.api.jobview.JobView`), who
    it is (events name it as client-go's recorder does) and the phase the state machine is in.

    ``phase`` is "" for a job never reconciled; ``notes`` say what was read in an unusual way."""

    job: JobView
    ref: ObjectRef
    phase: str
    notes: tuple[str, ...] = ()

    @property
    def namespace(self) -> str:
        return self.ref.namespace

    @property
    def status(self) -> JobStatusView:
        return self.job.status

    @property
    def state(self) -> Mapping[str, Any]:
        return self.job.status.state

    @property
    def version(self) -> int:
        return self.job.status.version

    @property
    def retry(self) -> int:
        return self.job.status.retry_count

    @property
    def max_retry(self) -> int:
        return self.job.max_retry

    @property
    def tasks(self) -> Sequence[TaskView]:
        return self.job.tasks

    @property
    def min_available(self) -> int:
        """spec.minAvailable, else the webhook default from the tasks."""
        return self.job.min_available


def read_job(job: Mapping[str, Any] | JobView) -> JobFacts:
    """The job's view, its identity and the phase its state machine is in. A phase the
    controller did not write is taken for Pending, as Volcano's state machine does."""
    view = job if isinstance(job, JobView) else job_view(job)
    ref = ObjectRef(
        c.BATCH_API,
        "Job",
        view.namespace or "default",
        view.name,
        view.uid or None,
        view.resource_version or None,
    )
    phase = view.status.written_phase
    if initialise_refused(view.status):
        phase = ""  # Pending only to say why it is not yet initialised: try again
    notes: tuple[str, ...] = ()
    if phase and view.status.phase is None:
        notes = (f"unknown phase {phase!r} taken as {c.PENDING}",)
        phase = c.PENDING
    return JobFacts(job=view, ref=ref, phase=phase, notes=notes)


def initialise_refused(status: JobStatusView) -> bool:
    """Whether the job is Pending only because its first reconcile's status write was forbidden
    (`pending_forbidden`): it is then not yet initialised."""
    return (
        status.written_phase == c.PENDING
        and status.reason == c.FORBIDDEN_REASON
        and not status.controlled_resources
    )


def pending_forbidden(job: Mapping[str, Any], message: str, now: datetime) -> list[Action]:
    """The status of a new job whose first reconcile the API server forbade: Pending, the state
    naming the refusal (none for a job already initialised). `read_job` still takes it for new,
    so it is initialised once the write is allowed (issue 30.9: such a job kept an empty phase
    for 24 minutes)."""
    facts = read_job(job)
    if facts.phase != "" or facts.status.message == message:
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
