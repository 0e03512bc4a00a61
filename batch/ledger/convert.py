"""Build ledger events from raw Kubernetes objects (dicts), so callers just hand objects over.

Controllers see (old, new) pairs from their watches; ``events_from_job``, ``events_from_podgroup``,
``events_from_pod`` and ``events_from_queue`` turn a pair into the facts worth recording
(``new=None`` means deleted, ``old=None`` means first seen — e.g. after a restart). Times come
from the objects (``lastTransitionTime``, ``startTime``, container ``startedAt``/``finishedAt``)
so that re-observing an object yields the same event identities; the wall clock (``now``) is
used only where the object carries no time (queue changes, a deletion without one) and as
one bound of a deleted pod's finish (when its removal was seen; see ``_run_end``).

Kinds understood: Volcano ``Job`` (VCJob), ``PodGroup``, ``Queue``, core ``Pod``, and any
framework workload whose adapter (``integrations/<name>``) implements ``observe``: the ledger
knows no framework itself. Malformed quantities never raise here: the field is left unknown
and a warning is logged, because history must not stop a controller.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from batch.api import pods
from batch.api.durations import duration_or_none
from batch.api.integration import (
    RUNNING_ESTIMATE_ANNOTATION as ESTIMATE,
    WorkloadAdapter,
    WorkloadObservation,
    adapter_for_pod,
    default_adapters,
    observe_workload,
)
from batch.api.owners import controller_ref
from batch.api.quantity import QuantityError
from batch.api.resources import CPU, GPU, MEMORY, parse_resource_list
from batch.api.timestamps import parse_time
from batch.api.views import PodGroupView, podgroup_view
from batch.ledger.events import (
    JobObserved,
    JobPhaseChanged,
    LedgerEvent,
    PodAttempt,
    QueueConfigChanged,
    QueueUsageSample,
)

log = logging.getLogger(__name__)

Obj = Mapping[str, Any]

SUBMITTER_ANNOTATION = "tephra.io/submitter"
GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
TASK_SPEC_KEY = "volcano.sh/task-spec"
QUEUE_KEYS = ("volcano.sh/queue-name", "scheduling.volcano.sh/queue-name")
TERMINAL = frozenset({"Completed", "Failed", "Terminated", "Aborted", "Deleted"})

_KIND_NAMES = {"Job": "VCJob"}

# --------------------------------------------------------------------------- small helpers


def _now(now: dt.datetime | None) -> dt.datetime:
    return (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _map(obj: Any, *path: str) -> Mapping[str, Any]:
    cur = obj
    for key in path:
        if not isinstance(cur, Mapping):
            return {}
        cur = cur.get(key)
    return cur if isinstance(cur, Mapping) else {}


def _list(obj: Any, *path: str) -> list[Any]:
    cur = obj
    for key in path:
        if not isinstance(cur, Mapping):
            return []
        cur = cur.get(key)
    return list(cur) if isinstance(cur, list) else []


def _int(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def _kind_name(kind: str | None) -> str:
    return _KIND_NAMES.get(kind or "", kind or "Unknown")


def _resources(rl: Any, where: str) -> dict[str, int]:
    if not isinstance(rl, Mapping):
        return {}
    try:
        return parse_resource_list(rl)
    except QuantityError as exc:
        log.warning("ledger: ignoring resources at %s: %s", where, exc)
        return {}


def pod_requests(pod_spec: Obj, where: str = "pod") -> dict[str, int]:
    """A pod spec's effective requests (:func:`batch.api.pods.pod_requests`); a malformed
    list is left out with a warning instead of raising."""
    return pods.pod_requests(pod_spec, lambda rl, at: _resources(rl, f"{where} {at}"))


def _add_scaled(acc: dict[str, int], res: Mapping[str, int], n: int) -> None:
    for name, amount in res.items():
        acc[name] = acc.get(name, 0) + amount * n


def _queue_from(meta: Obj, default: str | None = None) -> str | None:
    for source in (_map(meta, "annotations"), _map(meta, "labels")):
        for key in QUEUE_KEYS:
            if source.get(key):
                return str(source[key])
    return default


def _estimate(value: Any) -> float | None:
    """A run-time estimate in seconds, read as the scheduler reads it; None if absent or bad."""
    return duration_or_none(value, days=True, bare_seconds=True)


def _submitter(meta: Obj) -> str | None:
    value = _map(meta, "annotations").get(SUBMITTER_ANNOTATION)
    return str(value) if value else None


# --------------------------------------------------------------------------------- jobs


def events_from_job(
    old: Obj | None,
    new: Obj | None,
    *,
    now: dt.datetime | None = None,
    adapters: Iterable[object] | None = None,
) -> list[LedgerEvent]:
    """Events for a workload object change: a VCJob, or a framework workload read by its
    adapter's ``observe`` (``adapters``: default, those of the ``tephra.integrations``
    entry points)."""
    obj = new if new is not None else old
    if obj is None:
        return []
    kind = str(obj.get("kind") or "Job")
    if kind == "PodGroup":
        return events_from_podgroup(old, new, now=now)
    if kind == "Job":
        return _vcjob_events(old, new, now=now)
    found = default_adapters() if adapters is None else tuple(adapters)
    return _workload_events(old, new, now=now, adapters=found)


def _vcjob_observation(obj: Obj) -> JobObserved:
    meta = _meta(obj)
    spec = _map(obj, "spec")
    status = _map(obj, "status")
    uid, name, ns = str(meta.get("uid", "")), str(meta.get("name", "")), meta.get("namespace")
    replicas: dict[str, int] = {}
    totals: dict[str, int] = {}
    for i, task in enumerate(_list(spec, "tasks")):
        if not isinstance(task, Mapping):
            continue
        task_name = str(task.get("name") or f"default{i}")
        n = _int(task.get("replicas")) or 0
        replicas[task_name] = replicas.get(task_name, 0) + n
        pod_spec = _map(task, "template", "spec")
        _add_scaled(totals, pod_requests(pod_spec, f"Job {ns}/{name} spec.tasks[{i}]"), n)
    state = _map(status, "state")
    return JobObserved(
        uid=uid,
        namespace=str(ns or "default"),
        name=name,
        kind="VCJob",
        queue=str(spec.get("queue") or "default"),
        submitter=_submitter(meta),
        priority_class=spec.get("priorityClassName") or None,
        podgroup=f"{name}-{uid}" if uid else None,
        requested_cpu_milli=totals.get(CPU, 0),
        requested_memory_bytes=totals.get(MEMORY, 0),
        requested_gpu_milli=totals.get(GPU, 0),
        replicas=replicas,
        min_available=_int(spec.get("minAvailable")) or _int(status.get("minAvailable")),
        running_estimate_s=_estimate(spec.get("runningEstimate")),
        submitted_at=parse_time(meta.get("creationTimestamp")),
        phase=state.get("phase") or None,
        phase_at=parse_time(state.get("lastTransitionTime")),
        retries=_int(status.get("retryCount")),
    )


def _vcjob_events(
    old: Obj | None, new: Obj | None, *, now: dt.datetime | None
) -> list[LedgerEvent]:
    out: list[LedgerEvent] = []
    if new is None:
        assert old is not None
        return _deleted(_vcjob_observation(old), _meta(old), now)
    observed = _vcjob_observation(new)
    previous = _vcjob_observation(old) if old is not None else None
    base = {"job_uid": observed.uid, "namespace": observed.namespace, "name": observed.name}
    state = _map(new, "status", "state")
    if observed.phase and (previous is None or previous.phase != observed.phase):
        out.append(
            JobPhaseChanged(
                **base,
                kind="VCJob",
                from_phase=previous.phase if previous is not None else None,
                to_phase=observed.phase,
                at=observed.phase_at or _now(now),
                reason=state.get("reason") or None,
                message=state.get("message") or None,
            )
        )
    old_conditions = _conditions(old) if old is not None else set()
    for phase, at in sorted(_conditions(new) - old_conditions, key=lambda c: c[1]):
        out.append(JobPhaseChanged(**base, kind="VCJob", to_phase=phase, at=at))
    if previous != observed or out:
        out.insert(0, observed)
    return out


def _conditions(obj: Obj) -> set[tuple[str, dt.datetime]]:
    found: set[tuple[str, dt.datetime]] = set()
    for cond in _list(obj, "status", "conditions"):
        if not isinstance(cond, Mapping):
            continue
        at = parse_time(cond.get("lastTransitionTime"))
        phase = cond.get("status")
        if at is not None and isinstance(phase, str) and phase:
            found.add((phase, at))
    return found


def _deleted(observed: JobObserved, meta: Obj, now: dt.datetime | None) -> list[LedgerEvent]:
    if observed.phase in TERMINAL:
        return []
    at = _deletion_requested(meta) or _now(now)
    return [
        JobPhaseChanged(
            job_uid=observed.uid,
            namespace=observed.namespace,
            name=observed.name,
            kind=observed.kind,
            from_phase=observed.phase,
            to_phase="Deleted",
            at=at,
            reason="Deleted",
        )
    ]


def _workload_observation(
    obj: Obj, adapters: Iterable[object]
) -> tuple[JobObserved, list[tuple[str, dt.datetime]]]:
    """Observation + (phase, time) history of a framework workload: the generic facts from
    its metadata, the rest from its adapter's ``observe`` (none known: metadata only)."""
    return _observation_from(obj, observe_workload(obj, adapters) or WorkloadObservation())


def _observation_from(
    obj: Obj, seen: WorkloadObservation
) -> tuple[JobObserved, list[tuple[str, dt.datetime]]]:
    meta = _meta(obj)
    kind = str(obj.get("kind") or "Unknown")
    history = sorted(seen.phases, key=lambda h: h[1])
    last = history[-1] if history else None
    observed = JobObserved(
        uid=str(meta.get("uid", "")),
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name", "")),
        kind=kind,
        queue=seen.queue or _queue_from(meta),
        submitter=_submitter(meta),
        priority_class=seen.priority_class,
        requested_cpu_milli=seen.requests.get(CPU, 0),
        requested_memory_bytes=seen.requests.get(MEMORY, 0),
        requested_gpu_milli=seen.requests.get(GPU, 0),
        replicas=dict(seen.replicas),
        min_available=seen.min_available,
        running_estimate_s=_estimate(_map(meta, "annotations").get(ESTIMATE)),
        submitted_at=parse_time(meta.get("creationTimestamp")),
        phase=last[0] if last else None,
        phase_at=last[1] if last else None,
    )
    return observed, history


def _workload_events(
    old: Obj | None, new: Obj | None, *, now: dt.datetime | None, adapters: Iterable[object]
) -> list[LedgerEvent]:
    found = observe_workload(new if new is not None else old or {}, adapters)
    if found is not None and found.part_of is not None:
        return []  # part of its owner's job (e.g. a RayJob's RayCluster): the owner's row
    if new is None:
        assert old is not None
        observed, _ = _observation_from(old, found or WorkloadObservation())
        return _deleted(observed, _meta(old), now)
    observed, history = _observation_from(new, found or WorkloadObservation())
    previous, old_history = _workload_observation(old, adapters) if old is not None else (None, [])
    out: list[LedgerEvent] = []
    seen = set(old_history)
    for phase, at in history:
        if (phase, at) not in seen:
            out.append(
                JobPhaseChanged(
                    job_uid=observed.uid,
                    namespace=observed.namespace,
                    name=observed.name,
                    kind=observed.kind,
                    to_phase=phase,
                    at=at,
                )
            )
    if previous != observed or out:
        out.insert(0, observed)
    return out


# ----------------------------------------------------------------------------- podgroups


def _failed_gang(pg: PodGroupView) -> bool:
    """A PodGroup is Completed once every scheduled pod has finished, whichever way: the
    workload failed when pods failed and fewer than minMember succeeded."""
    return pg.failed > 0 and pg.succeeded < (pg.min_member or 1)


def podgroup_job_uid(pg: Obj) -> str:
    """The ledger's job uid for a PodGroup: its controller owner's (the VCJob, PyTorchJob, ...),
    else the PodGroup's own."""
    v = podgroup_view(pg)
    return str(v.owner["uid"]) if v.owner is not None and v.owner.get("uid") else v.uid


def events_from_podgroup(
    old: Obj | None,
    new: Obj | None,
    *,
    now: dt.datetime | None = None,
    observed_kinds: Collection[tuple[str, str]] = (),
) -> list[LedgerEvent]:
    """PodGroup phases (Pending/Inqueue/Running/...) as ``source='podgroup'`` transitions.

    A PodGroup owned by a VCJob only adds its transitions (the VCJob carries the job facts). Any
    other PodGroup (framework workloads, plain pods) also describes its workload: the job row is
    keyed by the owner's uid (or the PodGroup's own when it has none) and the PodGroup's
    Running/Completed phases stand in for the workload's own phases, unless the owner's
    (apiVersion, kind) is in ``observed_kinds``: the ledger then follows the workload itself
    (its adapter's ``observe``), whose conditions say when it ran and ended.
    """
    if new is None:
        return []
    v = podgroup_view(new)
    owner = v.owner
    job_uid = podgroup_job_uid(new)
    if owner is not None and owner.get("uid"):
        job_name, kind = str(owner.get("name") or v.name), _kind_name(str(owner.get("kind") or ""))
    else:
        job_name, kind = v.name, "PodGroup"
    phase = v.status_phase or None
    old_phase = (podgroup_view(old).status_phase or None) if old is not None else None
    at = _podgroup_phase_time(v, phase) or _now(now)
    out: list[LedgerEvent] = []
    if kind != "VCJob":
        observed = _podgroup_observed(v, job_uid, job_name, kind)
        if old is None or observed != _podgroup_observation_of(old, observed):
            out.append(observed)
    if phase and phase != old_phase:
        base = {"job_uid": job_uid, "namespace": v.namespace, "name": job_name, "kind": kind}
        out.append(
            JobPhaseChanged(
                **base, source="podgroup", from_phase=old_phase, to_phase=str(phase), at=at
            )
        )
        job_phase = {"Pending": "Pending", "Running": "Running", "Completed": "Completed"}.get(
            str(phase)
        )
        if job_phase == "Completed" and _failed_gang(v):
            job_phase = "Failed"
        stands_in = kind != "VCJob" and _owner_kind(owner) not in observed_kinds
        if stands_in and job_phase is not None:
            out.append(JobPhaseChanged(**base, source="job", to_phase=job_phase, at=at))
    return out


def _podgroup_observed(v: PodGroupView, job_uid: str, job_name: str, kind: str) -> JobObserved:
    """The job a PodGroup describes when no VCJob does (a framework workload, plain pods)."""
    where = f"PodGroup {v.namespace}/{v.name} minResources"
    requests = _resources(v.min_resources, where)
    submitter = v.annotations.get(SUBMITTER_ANNOTATION)
    return JobObserved(
        uid=job_uid,
        namespace=v.namespace,
        name=job_name,
        kind=kind,
        queue=v.queue_or_default,
        submitter=submitter or None,
        priority_class=v.priority_class_name or None,
        podgroup=v.name,
        requested_cpu_milli=requests.get(CPU) if requests else None,
        requested_memory_bytes=requests.get(MEMORY) if requests else None,
        requested_gpu_milli=requests.get(GPU) if requests else None,
        min_available=v.min_member,
        running_estimate_s=_estimate(v.annotations.get(ESTIMATE)),
        submitted_at=parse_time(v.created),
    )


def _owner_kind(owner: Obj | None) -> tuple[str, str] | None:
    if owner is None:
        return None
    return (str(owner.get("apiVersion") or ""), str(owner.get("kind") or ""))


def _podgroup_observation_of(old: Obj, like: JobObserved) -> JobObserved | None:
    events = [
        e
        for e in events_from_podgroup(None, old)
        if isinstance(e, JobObserved) and e.uid == like.uid
    ]
    return events[0] if events else None


def _podgroup_phase_time(pg: PodGroupView, phase: Any) -> dt.datetime | None:
    """Best object-derived time for the PodGroup's current phase (latest condition time)."""
    times = [t for t in (parse_time(c.get("lastTransitionTime")) for c in pg.conditions) if t]
    if times:
        return max(times)
    if phase == "Pending":
        return parse_time(pg.created)
    return None


# ----------------------------------------------------------------------------------- pods


def _pod_attempt(
    pod: Obj, *, deleted: bool, now: dt.datetime | None, adapters: Sequence[WorkloadAdapter]
) -> PodAttempt:
    meta = _meta(pod)
    spec, status = _map(pod, "spec"), _map(pod, "status")
    owner = controller_ref(pod)
    ns, name = str(meta.get("namespace") or "default"), str(meta.get("name", ""))
    requests = pod_requests(spec, f"Pod {ns}/{name} spec")
    conditions = [c for c in _list(status, "conditions") if isinstance(c, Mapping)]
    node = spec.get("nodeName") or None
    run = _containers_run(status)
    started_at = run.started_at
    if started_at is None and status.get("phase") in ("Running", "Succeeded", "Failed"):
        started_at = parse_time(status.get("startTime"))
    outcome, finished_at, exit_code = _pod_end(
        status.get("phase"),
        run,
        meta,
        deleted=deleted,
        started_at=started_at,
        ran=started_at is not None or node is not None,
        now=now,
    )
    return PodAttempt(
        pod_uid=str(meta.get("uid", "")),
        namespace=ns,
        name=name,
        job_uid=str(owner["uid"]) if owner is not None and owner.get("uid") else None,
        podgroup=_map(meta, "annotations").get(GROUP_NAME_ANNOTATION) or None,
        role=_pod_role(pod, adapters),
        queue=_queue_from(meta),
        node=node,
        cpu_milli=requests.get(CPU, 0),
        memory_bytes=requests.get(MEMORY, 0),
        gpu_milli=requests.get(GPU, 0),
        created_at=parse_time(meta.get("creationTimestamp")),
        bound_at=_bound_at(conditions) if node else None,
        started_at=started_at,
        finished_at=finished_at,
        exit_code=exit_code,
        outcome=outcome,
        eviction_cause=_eviction_cause(conditions, status),
        restarts=run.restarts,
    )


@dataclass(frozen=True)
class _ContainersRun:
    """What a pod's container statuses say about its run."""

    started_at: dt.datetime | None  # the first container start
    finishes: list[dt.datetime]  # each terminated container's finishedAt
    exit_codes: list[int]  # each terminated container's exit code, in status order
    restarts: int
    all_ended: bool = False  # every container has a status and that status is terminated


def _containers_run(status: Obj) -> _ContainersRun:
    starts: list[dt.datetime] = []
    finishes: list[dt.datetime] = []
    exit_codes: list[int] = []
    restarts, statuses, ended = 0, 0, 0
    for cs in _list(status, "containerStatuses"):
        if not isinstance(cs, Mapping):
            continue
        statuses += 1
        restarts += _int(cs.get("restartCount")) or 0
        state = _map(cs, "state")
        running, terminated = _map(state, "running"), _map(state, "terminated")
        starts += _times(running.get("startedAt"), terminated.get("startedAt"))
        if terminated:
            ended += 1
            finishes += _times(terminated.get("finishedAt"))
            code = _int(terminated.get("exitCode"))
            if code is not None:
                exit_codes.append(code)
    first = min(starts) if starts else None
    return _ContainersRun(first, finishes, exit_codes, restarts, 0 < statuses == ended)


def _times(*values: Any) -> list[dt.datetime]:
    return [t for t in map(parse_time, values) if t is not None]


def _pod_end(
    phase: Any,
    run: _ContainersRun,
    meta: Obj,
    *,
    deleted: bool,
    started_at: dt.datetime | None,
    ran: bool,
    now: dt.datetime | None,
) -> tuple[str | None, dt.datetime | None, int | None]:
    """(outcome, finished_at, exit_code) of the attempt. A finished pod's outcome is its phase,
    its exit code the first non-zero one (0 when it succeeded or every container exited 0); a
    deleted one's outcome is ``Deleted``, with a finish unless it never ``ran`` (never started
    nor bound). The finish is ``_run_end``'s, else (nothing known) now."""
    finished = phase in ("Succeeded", "Failed")
    if not finished and not deleted:
        return None, None, None
    observed = _now(now) if deleted else None
    end = _run_end(run, meta, ended=finished, started_at=started_at, observed=observed)
    if not finished:
        return "Deleted", end if ran else None, None
    nonzero = [c for c in run.exit_codes if c != 0]
    exit_code = nonzero[0] if nonzero else (0 if run.exit_codes or phase == "Succeeded" else None)
    return str(phase), end or _now(now), exit_code


def _run_end(
    run: _ContainersRun,
    meta: Obj,
    *,
    ended: bool,
    started_at: dt.datetime | None,
    observed: dt.datetime | None,
) -> dt.datetime | None:
    """When the pod's run ended: the earliest known of its containers' end (the last
    ``finishedAt``, once the phase says it ``ended`` or every container has terminated), the
    moment its deletion was asked for, and when its removal was ``observed``; never before
    ``started_at``. The first two come from the object, so re-reading it gives the same end."""
    containers = max(run.finishes) if run.finishes and (ended or run.all_ended) else None
    known = [t for t in (containers, _deletion_requested(meta), observed) if t is not None]
    if not known:
        return None
    end = min(known)
    return started_at if started_at is not None and end < started_at else end


def _deletion_requested(meta: Obj) -> dt.datetime | None:
    """When the object's deletion was asked for. The API server sets ``deletionTimestamp`` to the
    deadline, the request plus ``deletionGracePeriodSeconds``: subtract the grace (none given:
    the deadline is all that is known)."""
    deadline = parse_time(meta.get("deletionTimestamp"))
    if deadline is None:
        return None
    grace = _int(meta.get("deletionGracePeriodSeconds")) or 0
    return deadline - dt.timedelta(seconds=max(grace, 0))


def _bound_at(conditions: Sequence[Mapping[str, Any]]) -> dt.datetime | None:
    """When the last ``PodScheduled=True`` condition says the pod was bound."""
    bound_at = None
    for cond in conditions:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "True":
            bound_at = parse_time(cond.get("lastTransitionTime"))
    return bound_at


def _eviction_cause(conditions: Sequence[Mapping[str, Any]], status: Obj) -> str | None:
    """Why the pod was disrupted: the last ``DisruptionTarget=True`` condition's reason, else
    ``Evicted`` for a pod the kubelet evicted."""
    cause = None
    for cond in conditions:
        if cond.get("type") == "DisruptionTarget" and cond.get("status") == "True":
            cause = str(cond.get("reason") or "DisruptionTarget")
    if cause is None and status.get("reason") == "Evicted":
        cause = "Evicted"
    return cause


def _pod_role(pod: Obj, adapters: Sequence[WorkloadAdapter]) -> str | None:
    """The pod's role: Volcano's task-spec (annotation, else label), else what the adapter that
    claims the pod reads (``role_of_pod``). An adapter that raises is logged and passed over:
    history must not stop."""
    meta = _meta(pod)
    role = _map(meta, "annotations").get(TASK_SPEC_KEY) or _map(meta, "labels").get(TASK_SPEC_KEY)
    if role:
        return str(role)
    try:
        claimed = adapter_for_pod(pod, adapters)
        role = claimed[0].role_of_pod(pod) if claimed is not None else None
    except Exception:
        log.exception("ledger: reading the role of pod %s failed", meta.get("name"))
        return None
    return str(role) if role else None


def events_from_pod(
    old: Obj | None,
    new: Obj | None,
    *,
    now: dt.datetime | None = None,
    adapters: Iterable[WorkloadAdapter] | None = None,
) -> list[LedgerEvent]:
    """A ``PodAttempt`` snapshot when anything the ledger keeps about the pod changed (the role
    of a framework's pod is read by its adapter; ``adapters``: default, those of the
    ``tephra.integrations`` entry points)."""
    found = default_adapters() if adapters is None else tuple(adapters)
    if new is None:
        if old is None:
            return []
        return [_pod_attempt(old, deleted=True, now=now, adapters=found)]
    attempt = _pod_attempt(new, deleted=False, now=now, adapters=found)
    if old is not None and _pod_attempt(old, deleted=False, now=now, adapters=found) == attempt:
        return []
    return [attempt]


# --------------------------------------------------------------------------------- queues


def _queue_config(queue: Obj, at: dt.datetime, *, deleted: bool = False) -> QueueConfigChanged:
    meta, spec, status = _meta(queue), _map(queue, "spec"), _map(queue, "status")
    name = str(meta.get("name", ""))
    reclaimable = spec.get("reclaimable")
    parent = spec.get("parent") or (None if name == "root" else "root")
    return QueueConfigChanged(
        queue=name,
        at=at,
        queue_uid=str(meta["uid"]) if meta.get("uid") else None,
        weight=_int(spec.get("weight")) or 1,
        capability=_resources(spec.get("capability"), f"Queue {name} spec.capability"),
        guarantee=_resources(
            _map(spec, "guarantee").get("resource"), f"Queue {name} spec.guarantee.resource"
        ),
        deserved=_resources(spec.get("deserved"), f"Queue {name} spec.deserved"),
        reclaimable=bool(reclaimable) if reclaimable is not None else None,
        priority=_int(spec.get("priority")),
        state="Deleted" if deleted else (status.get("state") or None),
        parent=str(parent) if parent else None,
    )


def events_from_queue(
    old: Obj | None, new: Obj | None, *, now: dt.datetime | None = None
) -> list[LedgerEvent]:
    """A ``QueueConfigChanged`` when weight/capability/guarantee/deserved/state/parent changed."""
    at = _now(now)
    if new is None:
        return [] if old is None else [_queue_config(old, at, deleted=True)]
    change = _queue_config(new, at)
    if old is not None and _queue_config(old, at).config_hash == change.config_hash:
        return []
    return [change]


def usage_samples_from_queues(
    queues: Iterable[Obj],
    *,
    at: dt.datetime,
    pending: Mapping[str, Mapping[str, int]] | None = None,
    deserved: Mapping[str, Mapping[str, int]] | None = None,
) -> list[LedgerEvent]:
    """Samples from Queue objects: ``status.allocated`` vs deserved.

    ``deserved`` is the scheduler's figure per queue (its fair-share plugin computes it): given,
    it is the only one, and a queue it does not name is sampled without a deserved share. Only
    when it is None (the caller knows no scheduler's figures) is ``spec.deserved`` taken.
    ``pending`` is the queue's unadmitted demand, when the caller knows it.
    """
    out: list[LedgerEvent] = []
    for queue in queues:
        meta, spec, status = _meta(queue), _map(queue, "spec"), _map(queue, "status")
        name = str(meta.get("name", ""))
        fair = (
            deserved.get(name)
            if deserved is not None
            else _resources(spec.get("deserved"), f"Queue {name} spec.deserved")
        )
        out.append(
            QueueUsageSample(
                queue=name,
                at=at,
                allocated=_resources(status.get("allocated"), f"Queue {name} status.allocated"),
                deserved=dict(fair) if fair else None,
                capability=_resources(spec.get("capability"), f"Queue {name} spec.capability")
                or None,
                pending=dict((pending or {}).get(name, {})) or None,
            )
        )
    return out
