"""VCJob defaults (Volcano's job mutating webhook), for admission and the controllers alike.

Why this exists: admission writes these defaults into a Job it admits, and the controllers must
read a Job the same way when it never went through admission (a cluster without the webhook, an
object restored from a backup). Each rule is stated once here:

* a task without a name is ``default<i>``;
* ``maxRetry`` (job and task) unset or 0 is :data:`~batch.api.constants.DEFAULT_MAX_RETRY`;
* a task's ``minAvailable`` unset is its ``replicas``, or ``minPartitions * partitionSize``
  when the task has a partition policy asking for at least one partition;
* the job's ``minAvailable`` unset or 0 is the sum of its tasks' minAvailable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from batch.api.constants import DEFAULT_MAX_RETRY

__all__ = [
    "default_job_min_available",
    "default_task_min_available",
    "max_retry",
    "task_name",
    "unset_or_zero",
]


def unset_or_zero(value: object) -> bool:
    """Volcano's "not given" for integer fields: absent, null or 0."""
    return value is None or (type(value) is int and value == 0)


def max_retry(value: Any) -> Any:
    """``maxRetry`` as defaulted: the given value, or the default when unset or 0."""
    return DEFAULT_MAX_RETRY if unset_or_zero(value) else value


def task_name(task: Mapping[str, Any], index: int) -> str:
    """The task's name, ``default<index>`` when it has none."""
    return str(task.get("name") or f"default{index}")


def default_task_min_available(task: Mapping[str, Any]) -> int | None:
    """What a task's ``minAvailable`` defaults to (None when its replicas are not a count)."""
    default = task.get("replicas")
    partition = task.get("partitionPolicy")
    if isinstance(partition, Mapping):
        mp, size = partition.get("minPartitions"), partition.get("partitionSize")
        if type(mp) is int and type(size) is int and mp * size > 0:
            default = mp * size
    return default if type(default) is int and default >= 0 else None


def default_job_min_available(task_minimums: Iterable[int]) -> int:
    """What the job's ``minAvailable`` defaults to: the sum of its tasks' minimums."""
    return sum(task_minimums)
