"""The bounds on one object's work as command-line options: the admission size limits, for every
command that admits objects or runs the controllers (`webhook`, `controller`, `sandbox up`,
`validate`), and the job controller's pod batch (`controller`, `sandbox up`).

One decorator each so that the flags, their defaults and their help are the same everywhere;
`limit_options` gives the command one `limits: AdmissionLimits` argument instead of its flags.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

import click

from batch.api.admission import DEFAULT_LIMITS, AdmissionLimits
from batch.controllers.constants import POD_BATCH

F = TypeVar("F", bound=Callable[..., Any])


def limit_options(fn: F) -> F:
    """Add `--max-pods-per-job` and `--max-task-replicas`; pass `limits=AdmissionLimits(...)`."""

    @functools.wraps(fn)
    def wrapper(*args: Any, max_pods_per_job: int, max_task_replicas: int, **kwargs: Any) -> Any:
        limits = AdmissionLimits(pods_per_job=max_pods_per_job, replicas_per_task=max_task_replicas)
        return fn(*args, limits=limits, **kwargs)

    wrapper = click.option(
        "--max-task-replicas",
        type=click.IntRange(min=1),
        default=DEFAULT_LIMITS.replicas_per_task,
        show_default=True,
        help="Admission refuses a task with more replicas.",
    )(wrapper)
    wrapper = click.option(
        "--max-pods-per-job",
        type=click.IntRange(min=1),
        default=DEFAULT_LIMITS.pods_per_job,
        show_default=True,
        help="Admission refuses a job whose tasks ask for more pods in all.",
    )(wrapper)
    return cast(F, wrapper)


def pod_batch_option(fn: F) -> F:
    """Add `--pod-batch` (an int argument `pod_batch`)."""
    return click.option(
        "--pod-batch",
        type=click.IntRange(min=1),
        default=POD_BATCH,
        show_default=True,
        help="Pods the job controller creates per reconcile at most.",
    )(fn)
