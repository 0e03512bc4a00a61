"""A typed, read-only view of a VCJob (`batch.volcano.sh/v1alpha1` Job) as its controllers read it.

Why this exists: the job controller read a VCJob as a raw dict, each step with its own string keys
and defaults, and parsed its tasks again in several places per reconcile (issue 32.1). As with
`batch.api.views.PodGroupView`, a view is built once per object version (`job_view`, cached by
uid and resourceVersion) with the webhook defaults applied (`batch.api.defaults`): task names,
task and job minAvailable, maxRetry. Raw mappings stay only where they are passed through to an
object the controller writes (a task's pod template, a policy list, a volume's claim spec) or
diffed against (the status as stored, for a merge patch).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from batch.api.constants import DEFAULT_QUEUE, JOB_PHASES, JobPhase
from batch.api.defaults import (
    default_job_min_available,
    default_task_min_available,
    max_retry,
    task_name,
    unset_or_zero,
)
from batch.api.durations import duration_or_none
from batch.api.views import VersionCache, as_mapping

__all__ = [
    "DependsOnView",
    "JobStatusView",
    "JobView",
    "PartitionView",
    "PolicyView",
    "TaskView",
    "is_job_phase",
    "job_view",
    "policies_view",
    "tasks_view",
]

_CACHE_SIZE = 8192


def is_job_phase(value: str) -> TypeGuard[JobPhase]:
    """Whether ``value`` is one of the job phases (`batch.api.constants.JobPhase`)."""
    return value in JOB_PHASES


def _counter(value: object) -> int:
    """A status counter (version, retryCount): 0 unless a positive integer (not a bool)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _maps(value: object) -> tuple[Mapping[str, Any], ...]:
    return tuple(v for v in value if isinstance(v, Mapping)) if isinstance(value, list) else ()


@dataclass(frozen=True, slots=True)
class PolicyView:
    """One lifecycle policy (`spec.policies[]`, `tasks[].policies[]`)."""

    #: ``events`` with ``event`` after them
    events: tuple[str, ...]
    exit_code: int | None
    #: the action as written ("" when unset: SyncJob)
    action: str
    #: ``timeout`` in seconds (None: unset or not a duration)
    timeout: float | None


@dataclass(frozen=True, slots=True)
class DependsOnView:
    """A task's ``dependsOn``: the tasks it waits for, and whether ``any`` or ``all`` of them."""

    names: tuple[str, ...]
    iteration: str


def policies_view(policies: object) -> tuple[PolicyView, ...]:
    """The policies of a list as written (entries that are not mappings are skipped)."""
    out = []
    for pol in _maps(policies):
        events = [str(e) for e in pol.get("events") or ()]
        if pol.get("event"):
            events.append(str(pol["event"]))
        code = pol.get("exitCode")
        out.append(
            PolicyView(
                events=tuple(events),
                exit_code=None if code is None else int(code),
                action=str(pol.get("action") or ""),
                timeout=duration_or_none(pol.get("timeout")),
            )
        )
    return tuple(out)


@dataclass(frozen=True, slots=True)
class PartitionView:
    """A task's ``partitionPolicy``: pods in partitions of ``size``, a PodGroup subgroup each."""

    size: int
    min_partitions: int
    network_topology: Mapping[str, Any] | None


def _partition(value: object) -> PartitionView | None:
    part = as_mapping(value)
    if not part:
        return None
    return PartitionView(
        size=int(part.get("partitionSize") or 1),
        min_partitions=int(part.get("minPartitions") or 0),
        network_topology=part.get("networkTopology") or None,
    )


def _depends_on(value: object) -> DependsOnView | None:
    dep = as_mapping(value)
    if not dep.get("name"):
        return None
    return DependsOnView(
        names=tuple(str(n) for n in dep.get("name") or ()),
        iteration=str(dep.get("iteration") or "all"),
    )


@dataclass(frozen=True, slots=True)
class TaskView:
    """One task of a job with the webhook defaults applied."""

    name: str
    index: int
    replicas: int
    min_available: int
    max_retry: int
    #: the pod template as written (passed through to the pods, deep-copied there)
    template: Mapping[str, Any]
    policies: tuple[PolicyView, ...]
    depends_on: DependsOnView | None
    partition: PartitionView | None
    topology_policy: str | None

    @property
    def pod_spec(self) -> Mapping[str, Any]:
        """The template's pod spec ({} when it has none)."""
        return as_mapping(self.template.get("spec"))


@dataclass(frozen=True, slots=True)
class JobStatusView:
    """A VCJob's status as written (`status.state.phase` "" while the controller never wrote it)."""

    #: status.state.phase as written: "" when unset, possibly not a `JobPhase`
    written_phase: str
    reason: str
    message: str
    last_transition: str
    #: status.state as written (the next state is built from it)
    state: Mapping[str, Any]
    version: int
    retry_count: int
    #: status.minAvailable; None when unset or 0
    min_available: int | None
    controlled_resources: Mapping[str, str]
    task_status_count: Mapping[str, Any]
    conditions: tuple[Mapping[str, Any], ...]
    #: the status as stored, for the merge patch taking it to the next one
    raw: Mapping[str, Any]

    def counted(self, task: str) -> int:
        """The pods of ``task`` the last status write counted (``taskStatusCount``)."""
        phases = as_mapping(as_mapping(self.task_status_count.get(task)).get("phase"))
        return sum(int(n or 0) for n in phases.values())

    @property
    def phase(self) -> JobPhase | None:
        """The phase when it is one of `JobPhase` (None: unset or unknown)."""
        return self.written_phase if is_job_phase(self.written_phase) else None


@dataclass(frozen=True, slots=True)
class JobView:
    """A VCJob as its controllers use it, defaults applied."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str
    resource_version: str
    #: metadata.creationTimestamp as written ("" when unset)
    created: str
    deleting: bool
    labels: Mapping[str, Any]
    annotations: Mapping[str, Any]
    tasks: tuple[TaskView, ...]
    #: spec.minAvailable, else the sum of the tasks' minAvailable (unset or 0: the default)
    min_available: int
    min_success: int | None
    max_retry: int
    #: spec.queue; "" when unset (`queue_or_default`)
    queue: str
    scheduler_name: str
    priority_class_name: str
    network_topology: Mapping[str, Any] | None
    #: spec.plugins as written: plugin name -> its arguments
    plugins: Mapping[str, Any]
    policies: tuple[PolicyView, ...]
    ttl_seconds_after_finished: int | None
    #: spec.runningEstimate as written ("" when unset)
    running_estimate: str
    volumes: tuple[Mapping[str, Any], ...]
    status: JobStatusView

    @property
    def queue_or_default(self) -> str:
        return self.queue or DEFAULT_QUEUE

    def task(self, name: str) -> TaskView | None:
        return next((t for t in self.tasks if t.name == name), None)


def tasks_view(spec: Mapping[str, Any]) -> tuple[TaskView, ...]:
    """The tasks of a job spec with the webhook defaults (name `default<i>`, minAvailable,
    maxRetry)."""
    out = []
    for i, t in enumerate(spec.get("tasks") or []):
        replicas = int(t.get("replicas") or 0)
        if t.get("minAvailable") is not None:
            min_av = int(t["minAvailable"])
        else:
            default = default_task_min_available(t)
            min_av = replicas if default is None else default
        out.append(
            TaskView(
                name=task_name(t, i),
                index=i,
                replicas=replicas,
                min_available=min_av,
                max_retry=int(max_retry(t.get("maxRetry"))),
                template=t.get("template") or {},
                policies=policies_view(t.get("policies")),
                depends_on=_depends_on(t.get("dependsOn")),
                partition=_partition(t.get("partitionPolicy")),
                topology_policy=t.get("topologyPolicy"),
            )
        )
    return tuple(out)


def _status(status: Mapping[str, Any]) -> JobStatusView:
    state = as_mapping(status.get("state"))
    status_min = status.get("minAvailable")
    return JobStatusView(
        written_phase=str(state.get("phase") or ""),
        reason=str(state.get("reason") or ""),
        message=str(state.get("message") or ""),
        last_transition=str(state.get("lastTransitionTime") or ""),
        state=state,
        version=_counter(status.get("version")),
        retry_count=_counter(status.get("retryCount")),
        min_available=int(status_min) if status_min else None,
        controlled_resources=dict(as_mapping(status.get("controlledResources"))),
        task_status_count=as_mapping(status.get("taskStatusCount")),
        conditions=_maps(status.get("conditions")),
        raw=status,
    )


def _optional_int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


def _build(obj: Mapping[str, Any]) -> JobView:
    meta = as_mapping(obj.get("metadata"))
    spec, status = as_mapping(obj.get("spec")), as_mapping(obj.get("status"))
    tasks = tasks_view(spec)
    min_av = spec.get("minAvailable")
    return JobView(
        api_version=str(obj.get("apiVersion") or ""),
        kind=str(obj.get("kind") or ""),
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        created=str(meta.get("creationTimestamp") or ""),
        deleting=bool(meta.get("deletionTimestamp")),
        labels=as_mapping(meta.get("labels")),
        annotations=as_mapping(meta.get("annotations")),
        tasks=tasks,
        min_available=default_job_min_available(t.min_available for t in tasks)
        if unset_or_zero(min_av)
        else int(min_av),  # type: ignore[arg-type]
        min_success=_optional_int(spec.get("minSuccess")),
        max_retry=int(max_retry(spec.get("maxRetry"))),
        queue=str(spec.get("queue") or ""),
        scheduler_name=str(spec.get("schedulerName") or ""),
        priority_class_name=str(spec.get("priorityClassName") or ""),
        network_topology=spec.get("networkTopology") or None,
        plugins=as_mapping(spec.get("plugins")),
        policies=policies_view(spec.get("policies")),
        ttl_seconds_after_finished=_optional_int(spec.get("ttlSecondsAfterFinished")),
        running_estimate=str(spec.get("runningEstimate") or ""),
        volumes=tuple(spec.get("volumes") or ()),
        status=_status(status),
    )


#: The view of VCJob ``obj``, built once per uid and resourceVersion (an object without either,
#: such as one not yet stored, is read every time).
job_view = VersionCache(_build, size=_CACHE_SIZE)
