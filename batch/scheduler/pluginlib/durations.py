"""Durations in scheduler arguments and annotations, and how long a pod has been running.

``parse_duration`` reads the forms the time-based plugins accept (``90s``, ``5m``, ``1h30m``,
``2.5m``, plain seconds); ``task_start`` is when a pod started running, as minruntime and
reservation measure it; ``job_estimate`` a job's expected run time (``runningEstimate``), as
reservation and sjf read it.
"""

from __future__ import annotations

from batch.api import durations
from batch.api.integration import RUNNING_ESTIMATE_ANNOTATION
from batch.model.info import JobInfo, TaskInfo
from batch.model.parse import parse_time


def parse_duration(value: object) -> float:
    """``"1h30m"`` / ``"90s"`` / ``"2.5m"`` / ``"2d"`` / ``"120"`` / ``120`` -> seconds: the Go
    grammar of :mod:`batch.api.durations` with days and bare seconds (ValueError)."""
    return durations.parse_duration(value, days=True, bare_seconds=True)


def task_start(task: TaskInfo) -> float:
    """When the pod started running: ``status.startTime``, else its creation time."""
    raw = task.raw
    if raw is not None:
        status = raw.get("status")
        if isinstance(status, dict):
            t = parse_time(status.get("startTime"))
            if t:
                return t
    return task.creation


#: the PodGroup (or pod) annotation the Job controller copies ``Job.spec.runningEstimate`` into
ESTIMATE = RUNNING_ESTIMATE_ANNOTATION


def job_estimate(job: JobInfo, default: float | None) -> float | None:
    value = job.annotations.get(ESTIMATE)
    if value is None:
        for t in job.tasks.values():
            raw = t.raw
            meta = raw.get("metadata") if raw is not None else None
            ann = meta.get("annotations") if isinstance(meta, dict) else None
            if isinstance(ann, dict) and ESTIMATE in ann:
                value = str(ann[ESTIMATE])
                break
    if value is None:
        return default
    try:
        return parse_duration(value)
    except ValueError:
        return default
