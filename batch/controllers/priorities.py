"""The job controller's list of PriorityClasses, and when it is read again from the API server.

A job whose pods name a PriorityClass that does not exist creates no pods (the API server would
refuse each); issue 30.10: a class created 5 s before such a job was reported missing for 30 s,
because the list was only renewed every 30 s. Now a list lacking a class a job names is read
again on that job's reconcile, at most once every ``MISS_RELIST`` seconds whatever the number of
such jobs, so a class that genuinely does not exist costs one list per interval, not one per
reconcile. A job that found a class missing is looked at again after the same interval. Pure:
the clock is the caller's.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from batch.api.jobview import JobView, TaskView, job_view

MAX_AGE = 30.0  # seconds: a list this old is read again on the next reconcile of any job
MISS_RELIST = 5.0  # seconds: at least this between two reads made because a class was missing


def priority_class_names(
    job: Mapping[str, Any] | JobView, tasks: Collection[TaskView] | None = None
) -> set[str]:
    """The PriorityClasses the job's pods name: the task template's, else the job's (``tasks``:
    the job's, when not given)."""
    view = job if isinstance(job, JobView) else job_view(job)
    job_class = view.priority_class_name
    return {
        name
        for t in (view.tasks if tasks is None else tasks)
        if (name := str(t.pod_spec.get("priorityClassName") or job_class))
    }


@dataclass
class PriorityClassList:
    """PriorityClass values by name as last read, and when the last read was tried."""

    values: dict[str, int] = field(default_factory=dict)
    listed: bool = False  # a read ever succeeded
    tried_at: float | None = None  # monotonic seconds of the last read, failed or not

    def due(self, now: float, wanted: Collection[str]) -> bool:
        """Whether to read the list before answering for a job naming ``wanted``."""
        if self.tried_at is None:
            return True
        age = now - self.tried_at
        if age >= MAX_AGE:
            return True
        return age >= MISS_RELIST and any(name not in self.values for name in wanted)

    def read(self, now: float, values: Mapping[str, int] | None) -> None:
        """Record a read at ``now``: its values, or None when it failed (the old ones stay)."""
        self.tried_at = now
        if values is not None:
            self.values = dict(values)
            self.listed = True

    def known(self) -> dict[str, int] | None:
        """The values, or None while never read (a job is then not held back for a class
        that may exist)."""
        return self.values if self.listed else None
