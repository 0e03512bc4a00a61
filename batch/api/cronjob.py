"""Volcano CronJob (`batch.volcano.sh/v1alpha1`, volcano-semantics.md#cronjob): a VCJob on a cron
schedule."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from batch.api.base import KubeModel
from batch.api.job import JobSpec
from batch.api.meta import ObjectMeta

__all__ = [
    "CRONJOB_SCHEDULED_TIMESTAMP",
    "CronJob",
    "CronJobSpec",
    "CronJobStatus",
    "JobTemplateSpec",
    "ObjectReference",
]

#: Annotation on each Job a CronJob creates: its nominal start time, RFC 3339 in the CronJob's
#: timeZone (Volcano's batch/v1alpha1 CronJobScheduledTimestampAnnotation).
CRONJOB_SCHEDULED_TIMESTAMP = "volcano.sh/cronjob-scheduled-timestamp"


class JobTemplateSpec(KubeModel):
    metadata: ObjectMeta | None = None
    spec: JobSpec | None = None


class CronJobSpec(KubeModel):
    schedule: str = Field(min_length=1)
    time_zone: str | None = None
    starting_deadline_seconds: int | None = Field(default=None, ge=0)
    concurrency_policy: Literal["Allow", "Forbid", "Replace"] | None = Field(
        default=None, json_schema_extra={"x-tephra-default": "Allow"}
    )
    suspend: bool | None = Field(default=None, json_schema_extra={"x-tephra-default": False})
    job_template: JobTemplateSpec
    successful_jobs_history_limit: int | None = Field(
        default=None, ge=0, json_schema_extra={"x-tephra-default": 3}
    )
    failed_jobs_history_limit: int | None = Field(
        default=None, ge=0, json_schema_extra={"x-tephra-default": 1}
    )


class ObjectReference(KubeModel):
    """core/v1 ObjectReference: what `status.active` lists (as Volcano's CRD has it)."""

    api_version: str | None = None
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    field_path: str | None = None


class CronJobStatus(KubeModel):
    active: list[ObjectReference] | None = None
    last_schedule_time: str | None = None
    last_successful_time: str | None = None


class CronJob(KubeModel):
    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta | None = None
    spec: CronJobSpec | None = None
    status: CronJobStatus | None = None
