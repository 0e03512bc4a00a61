"""VCJob (`batch.volcano.sh/v1alpha1`, kind Job): spec and status
(volcano-semantics.md#vcjob-spec, #job-state-machine).

Field bounds and enums here are the CRD schema's (the CRD in `crds/` is generated from these
models); the webhook's cross-field rules live in `batch.api.admission.job`.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from batch.api.base import DNS1123_LABEL, DNS1123_SUBDOMAIN, KubeModel, ResourceList
from batch.api.constants import JobPhase
from batch.api.core import PodTemplateSpec
from batch.api.meta import ObjectMeta

__all__ = [
    "DependsOn",
    "Job",
    "JobCondition",
    "JobSpec",
    "JobState",
    "JobStatus",
    "LifecyclePolicy",
    "NetworkTopologySpec",
    "PartitionPolicy",
    "PersistentVolumeClaimSpec",
    "TaskSpec",
    "TaskState",
    "VolumeSpec",
]

Event = Literal[
    "*",
    "PodPending",
    "PodRunning",
    "PodFailed",
    "PodEvicted",
    "Unknown",
    "TaskCompleted",
    "OutOfSync",
    "CommandIssued",
    "JobUpdated",
    "TaskFailed",
]


class LifecyclePolicy(KubeModel):
    action: str | None = None
    event: Event | None = None
    events: list[Event] | None = None
    exit_code: int | None = None
    timeout: str | None = None


class NetworkTopologySpec(KubeModel):
    mode: Literal["hard", "soft"] | None = Field(
        default=None, json_schema_extra={"x-tephra-default": "hard"}
    )
    highest_tier_allowed: int | None = Field(default=None, ge=0)
    highest_tier_name: str | None = Field(default=None, max_length=253)


class DependsOn(KubeModel):
    name: list[str] | None = None
    iteration: Literal["any", "all"] | None = None


class PartitionPolicy(KubeModel):
    total_partitions: int = Field(ge=1)
    partition_size: int = Field(ge=1)
    network_topology: NetworkTopologySpec | None = None
    min_partitions: int | None = Field(
        default=None, ge=0, json_schema_extra={"x-tephra-default": 0}
    )


class PersistentVolumeClaimSpec(KubeModel):
    """core/v1 PersistentVolumeClaimSpec, kept whole; `resources` typed for quantity checks."""

    crd_preserve_unknown: ClassVar[bool] = True

    access_modes: list[str] | None = None
    storage_class_name: str | None = None
    resources: dict[str, ResourceList] | None = None


class VolumeSpec(KubeModel):
    mount_path: str
    volume_claim_name: str | None = None
    volume_claim: PersistentVolumeClaimSpec | None = None


class TaskSpec(KubeModel):
    name: str | None = Field(default=None, max_length=63, pattern=DNS1123_LABEL)
    replicas: int | None = Field(default=None, ge=0)
    min_available: int | None = Field(default=None, ge=0)
    template: PodTemplateSpec | None = None
    policies: list[LifecyclePolicy] | None = None
    topology_policy: Literal["none", "best-effort", "restricted", "single-numa-node"] | None = None
    max_retry: int | None = Field(default=None, ge=0)
    depends_on: DependsOn | None = None
    partition_policy: PartitionPolicy | None = None


class JobSpec(KubeModel):
    scheduler_name: str | None = Field(default=None, max_length=63)
    min_available: int | None = Field(default=None, ge=0)
    volumes: list[VolumeSpec] | None = None
    tasks: list[TaskSpec] | None = None
    policies: list[LifecyclePolicy] | None = None
    plugins: dict[str, list[str]] | None = None
    running_estimate: str | None = None
    queue: str | None = Field(
        default=None,
        max_length=253,
        pattern=DNS1123_SUBDOMAIN,
        json_schema_extra={"x-tephra-default": "default"},
    )
    max_retry: int | None = Field(default=None, ge=0, json_schema_extra={"x-tephra-default": 3})
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0)
    priority_class_name: str | None = Field(default=None, max_length=253, pattern=DNS1123_SUBDOMAIN)
    min_success: int | None = Field(default=None, ge=1)
    network_topology: NetworkTopologySpec | None = None


#: The CRD refuses any other phase (`JobPhase`), and negative counts, in a status write: a status
#: patched by hand (`phase: Bogus`, `running: -7`) used to be stored, and the job never
#: completed (issue 19.2).
Count = Annotated[int, Field(ge=0)]


class JobState(KubeModel):
    phase: JobPhase | None = None
    reason: str | None = None
    message: str | None = None
    last_transition_time: str | None = None


class TaskState(KubeModel):
    phase: dict[str, Count] | None = None


class JobCondition(KubeModel):
    status: str | None = None
    last_transition_time: str | None = None


class JobStatus(KubeModel):
    state: JobState | None = None
    min_available: Count | None = None
    task_status_count: dict[str, TaskState] | None = None
    pending: Count | None = None
    running: Count | None = None
    succeeded: Count | None = None
    failed: Count | None = None
    terminating: Count | None = None
    unknown: Count | None = None
    version: Count | None = None
    retry_count: Count | None = None
    running_duration: str | None = None
    controlled_resources: dict[str, str] | None = None
    conditions: list[JobCondition] | None = None


class Job(KubeModel):
    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta | None = None
    spec: JobSpec | None = None
    status: JobStatus | None = None
