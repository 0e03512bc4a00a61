"""The recorder's input: plain, immutable facts about jobs, pods, queues and scheduling decisions.

Controllers and the scheduler service build these (directly, or from Kubernetes objects with
``batch.ledger.convert``) and hand them to ``Recorder.record``. Every event has an ``identity``:
two events with the same identity describe the same fact, so replaying events (a restarted
controller re-listing the cluster, a spill file replayed after an outage) never duplicates
history. Events are JSON-serialisable so the recorder can spill them to disk.

Units: cpu and GPUs in milli-units, memory in bytes (``batch.api.resources.to_internal``);
all times timezone-aware UTC.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeAlias

Identity: TypeAlias = tuple[str, ...]


def utc(value: dt.datetime) -> dt.datetime:
    """Normalise to an aware UTC datetime (naive input is taken as UTC)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


def _iso(value: dt.datetime) -> str:
    return utc(value).isoformat()


@dataclass(frozen=True, slots=True, kw_only=True)
class JobObserved:
    """What is known about a job from its object: spec facts and, optionally, its current phase.

    Also serves as "job submitted" (the first observation carries ``submitted_at``). Fields left
    ``None`` are unknown and never overwrite known values.
    """

    TYPE: ClassVar[str] = "JobObserved"

    uid: str
    namespace: str
    name: str
    kind: str = "VCJob"
    queue: str | None = None
    submitter: str | None = None
    priority_class: str | None = None
    priority: int | None = None
    podgroup: str | None = None
    requested_cpu_milli: int | None = None
    requested_memory_bytes: int | None = None
    requested_gpu_milli: int | None = None
    replicas: Mapping[str, int] | None = None
    min_available: int | None = None
    #: ``spec.runningEstimate`` (or the ``tephra.io/running-estimate`` annotation), seconds
    running_estimate_s: float | None = None
    submitted_at: dt.datetime | None = None
    phase: str | None = None
    phase_at: dt.datetime | None = None
    retries: int | None = None

    @property
    def identity(self) -> Identity:
        return ("job", self.uid)


@dataclass(frozen=True, slots=True, kw_only=True)
class JobPhaseChanged:
    """A job (``source='job'``) or its PodGroup (``source='podgroup'``) entered ``to_phase``.

    ``at`` must come from the object (``status.state.lastTransitionTime`` or a condition's
    ``lastTransitionTime``), not from the wall clock, for replays to be recognised.
    """

    TYPE: ClassVar[str] = "JobPhaseChanged"

    job_uid: str
    namespace: str
    name: str
    to_phase: str
    at: dt.datetime
    kind: str = "VCJob"
    source: str = "job"
    from_phase: str | None = None
    reason: str | None = None
    message: str | None = None

    @property
    def identity(self) -> Identity:
        return ("job-phase", self.job_uid, self.source, self.to_phase, _iso(self.at))


@dataclass(frozen=True, slots=True, kw_only=True)
class PodAttempt:
    """What is known so far about one pod of a job; later snapshots fill in more fields.

    ``outcome`` is ``Succeeded``, ``Failed`` or ``Deleted`` (removed before finishing);
    ``eviction_cause`` is e.g. ``preempt``, ``reclaim`` or a Kubernetes DisruptionTarget reason.
    """

    TYPE: ClassVar[str] = "PodAttempt"

    pod_uid: str
    namespace: str
    name: str
    job_uid: str | None = None
    podgroup: str | None = None
    role: str | None = None
    queue: str | None = None
    node: str | None = None
    cpu_milli: int | None = None
    memory_bytes: int | None = None
    gpu_milli: int | None = None
    created_at: dt.datetime | None = None
    bound_at: dt.datetime | None = None
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    exit_code: int | None = None
    outcome: str | None = None
    eviction_cause: str | None = None
    restarts: int | None = None

    @property
    def identity(self) -> Identity:
        return ("pod", self.pod_uid)


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulingEvent:
    """The scheduler evicted ``victim_pod`` (``action``: preempt, reclaim, ...) for someone."""

    TYPE: ClassVar[str] = "SchedulingEvent"

    action: str
    at: dt.datetime
    victim_pod_uid: str
    victim_namespace: str
    victim_pod: str
    victim_job_uid: str | None = None
    victim_queue: str | None = None
    beneficiary_job_uid: str | None = None
    beneficiary_queue: str | None = None
    reason: str | None = None
    session_id: str | None = None
    cpu_milli: int | None = None
    memory_bytes: int | None = None
    gpu_milli: int | None = None

    @property
    def identity(self) -> Identity:
        return ("scheduling", self.action, self.victim_pod_uid)


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueConfigChanged:
    """A queue's configuration as of ``at`` (recorded only when it differs from the one in force).

    Resource lists are internal integers keyed by resource name.
    """

    TYPE: ClassVar[str] = "QueueConfigChanged"

    queue: str
    at: dt.datetime
    queue_uid: str | None = None
    weight: int | None = None
    capability: Mapping[str, int] | None = None
    guarantee: Mapping[str, int] | None = None
    deserved: Mapping[str, int] | None = None
    reclaimable: bool | None = None
    priority: int | None = None
    state: str | None = None
    parent: str | None = None

    @property
    def config_hash(self) -> str:
        payload = {
            "weight": self.weight,
            "capability": dict(self.capability) if self.capability is not None else None,
            "guarantee": dict(self.guarantee) if self.guarantee is not None else None,
            "deserved": dict(self.deserved) if self.deserved is not None else None,
            "reclaimable": self.reclaimable,
            "priority": self.priority,
            "state": self.state,
            "parent": self.parent,
        }
        text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    @property
    def identity(self) -> Identity:
        return ("queue-config", self.queue, self.config_hash)


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueUsageSample:
    """One queue's allocation, fair share and pending demand at ``at``, per resource."""

    TYPE: ClassVar[str] = "QueueUsageSample"

    queue: str
    at: dt.datetime
    allocated: Mapping[str, int] = field(default_factory=dict)
    deserved: Mapping[str, int] | None = None
    capability: Mapping[str, int] | None = None
    pending: Mapping[str, int] | None = None

    @property
    def identity(self) -> Identity:
        return ("queue-usage", self.queue, _iso(self.at))


LedgerEvent: TypeAlias = (
    JobObserved
    | JobPhaseChanged
    | PodAttempt
    | SchedulingEvent
    | QueueConfigChanged
    | QueueUsageSample
)

EVENT_TYPES: dict[str, type[LedgerEvent]] = {
    cls.TYPE: cls
    for cls in (
        JobObserved,
        JobPhaseChanged,
        PodAttempt,
        SchedulingEvent,
        QueueConfigChanged,
        QueueUsageSample,
    )
}

_DATETIME_FIELDS: dict[str, frozenset[str]] = {
    name: frozenset(
        f.name
        for f in dataclasses.fields(cls)
        if f.name in ("at", "phase_at") or f.name.endswith("_at")
    )
    for name, cls in EVENT_TYPES.items()
}


def event_to_json(event: LedgerEvent) -> dict[str, Any]:
    """A JSON-ready dict with a ``type`` tag (used for the spill file)."""
    out: dict[str, Any] = {"type": event.TYPE}
    for f in dataclasses.fields(event):
        value = getattr(event, f.name)
        if isinstance(value, dt.datetime):
            value = _iso(value)
        elif isinstance(value, Mapping):
            value = dict(value)
        out[f.name] = value
    return out


def event_from_json(data: Mapping[str, Any]) -> LedgerEvent:
    """Inverse of ``event_to_json``; raises ``ValueError`` on an unknown or malformed record."""
    kind = data.get("type")
    cls = EVENT_TYPES.get(str(kind))
    if cls is None:
        raise ValueError(f"unknown ledger event type {kind!r}")
    dt_fields = _DATETIME_FIELDS[cls.TYPE]
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key == "type":
            continue
        parsed = dt.datetime.fromisoformat(value) if key in dt_fields and value else value
        kwargs[key] = parsed
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ValueError(f"malformed {kind} record: {exc}") from None
