"""Task statuses and status groups of Volcano's scheduler (volcano-semantics.md#task-status).

Every pod the scheduler tracks is a task in exactly one status; the groups below are the sets the
readiness helpers and the fair-share plugins count over.
"""

from __future__ import annotations

import enum


class TaskStatus(enum.IntEnum):
    """Per-pod in-session status, as in Volcano's ``api.TaskStatus``."""

    PENDING = 1
    ALLOCATED = 2
    PIPELINED = 3
    BINDING = 4
    BOUND = 5
    RUNNING = 6
    RELEASING = 7
    SUCCEEDED = 8
    FAILED = 9
    UNKNOWN = 10


ALLOCATED_STATUS = frozenset(
    {TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING}
)
SCHEDULED_STATUS = frozenset(
    {TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.FAILED, TaskStatus.SUCCEEDED}
)
PREEMPTABLE_STATUS = frozenset({TaskStatus.BOUND, TaskStatus.RUNNING})
COMPLETED_STATUS = frozenset({TaskStatus.SUCCEEDED, TaskStatus.FAILED})
READY_STATUS = frozenset(
    {
        TaskStatus.BOUND,
        TaskStatus.BINDING,
        TaskStatus.RUNNING,
        TaskStatus.ALLOCATED,
        TaskStatus.SUCCEEDED,
    }
)
VALID_STATUS = frozenset(
    ALLOCATED_STATUS | {TaskStatus.SUCCEEDED, TaskStatus.PIPELINED, TaskStatus.PENDING}
)
#: statuses in which a task holds resources on its node (Pipelined holds *future* resources)
ON_NODE_STATUS = frozenset(
    {
        TaskStatus.ALLOCATED,
        TaskStatus.BINDING,
        TaskStatus.BOUND,
        TaskStatus.RUNNING,
        TaskStatus.RELEASING,
        TaskStatus.UNKNOWN,
    }
)


def pod_task_status(
    phase: str, *, node_name: str, deleting: bool, assumed_node: str | None = None
) -> TaskStatus:
    """Volcano's ``getTaskStatus``: derive a task status from a pod's observed state."""
    if phase == "Running":
        return TaskStatus.RELEASING if deleting else TaskStatus.RUNNING
    if phase == "Pending" or phase == "":
        if deleting:
            return TaskStatus.RELEASING
        if not node_name:
            return TaskStatus.BINDING if assumed_node else TaskStatus.PENDING
        return TaskStatus.BOUND
    if phase == "Succeeded":
        return TaskStatus.SUCCEEDED
    if phase == "Failed":
        return TaskStatus.FAILED
    return TaskStatus.UNKNOWN
