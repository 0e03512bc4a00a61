"""Names the controllers share with Volcano: API groups, phases, events, actions, annotation keys.

Kept in one place so the pure reconcilers, the kopf shell and the CLI agree on every string that
crosses the API boundary (these are Volcano's own constants,
`volcano-semantics.md#events-and-actions, #pod-to-podgroup`).
"""

# ruff: noqa: PLC0414
from __future__ import annotations

from typing import Final

# The names Volcano's API defines live in batch.api.constants; re-exported (`X as X`, which
# mypy --strict reads as an explicit re-export) for the controllers.
from batch.api.constants import (
    ABORT_JOB as ABORT_JOB,
    ANY_EVENT as ANY_EVENT,
    BATCH_GROUP as BATCH_GROUP,
    BUS_GROUP as BUS_GROUP,
    CLOSE_QUEUE as CLOSE_QUEUE,
    COMMAND_ISSUED as COMMAND_ISSUED,
    COMPLETE_JOB as COMPLETE_JOB,
    DEFAULT_QUEUE as DEFAULT_QUEUE,
    JOB_PHASES as JOB_PHASES,
    JOB_UPDATED as JOB_UPDATED,
    OPEN_QUEUE as OPEN_QUEUE,
    OUT_OF_SYNC as OUT_OF_SYNC,
    POD_EVICTED as POD_EVICTED,
    POD_FAILED as POD_FAILED,
    POD_PENDING as POD_PENDING,
    RESTART_JOB as RESTART_JOB,
    RESTART_PARTITION as RESTART_PARTITION,
    RESTART_POD as RESTART_POD,
    RESTART_TASK as RESTART_TASK,
    RESUME_JOB as RESUME_JOB,
    ROOT_QUEUE as ROOT_QUEUE,
    SYNC_JOB as SYNC_JOB,
    SYNC_QUEUE as SYNC_QUEUE,
    TASK_COMPLETED as TASK_COMPLETED,
    TASK_FAILED as TASK_FAILED,
    TERMINATE_JOB as TERMINATE_JOB,
)
from batch.api.integration import RUNNING_ESTIMATE_ANNOTATION

BATCH_VERSION: Final = "v1alpha1"
BATCH_API: Final = f"{BATCH_GROUP}/{BATCH_VERSION}"
BUS_VERSION: Final = "v1alpha1"
BUS_API: Final = f"{BUS_GROUP}/{BUS_VERSION}"
SCHED_GROUP: Final = "scheduling.volcano.sh"
SCHED_VERSION: Final = "v1beta1"
SCHED_API: Final = f"{SCHED_GROUP}/{SCHED_VERSION}"

DEFAULT_SCHEDULER_NAMES: Final = ("volcano", "tephra")
#: Pods the job controller creates per reconcile at most (Kubernetes' Job controller creates 500
#: per sync, its ReplicaSet controller 500 per burst): a job's pods arrive in batches, each its
#: own reconcile, so the work queue, deletion and shutdown are served between batches.
POD_BATCH: Final = 500

# Job phases (status.state.phase): named here, defined once (`batch.api.constants.JOB_PHASES`).
(
    PENDING,
    ABORTING,
    ABORTED,
    RUNNING,
    RESTARTING,
    COMPLETING,
    COMPLETED,
    TERMINATING,
    TERMINATED,
    FAILED,
) = JOB_PHASES
FINISHED_PHASES: Final = frozenset({COMPLETED, TERMINATED, FAILED})
#: state.reason of a new job Pending because the API server forbade a write of its first
#: reconcile (its plugin objects, say): it is still initialised once the write is allowed
FORBIDDEN_REASON: Final = "Forbidden"

# Events (policy event/events).
UNKNOWN_EVENT: Final = "Unknown"

# Events (reasons) of Tephra's own.
#: A queue Command from outside `--queue-command-namespace`: not executed, deleted.
COMMAND_REFUSED: Final = "CommandRefused"

# Actions.
JOB_COMMAND_ACTIONS: Final = frozenset(
    {ABORT_JOB, RESUME_JOB, RESTART_JOB, COMPLETE_JOB, TERMINATE_JOB}
)
QUEUE_COMMAND_ACTIONS: Final = frozenset({OPEN_QUEUE, CLOSE_QUEUE})

# PodGroup phases.
PG_PENDING: Final = "Pending"
PG_INQUEUE: Final = "Inqueue"
PG_RUNNING: Final = "Running"
PG_UNKNOWN: Final = "Unknown"
PG_COMPLETED: Final = "Completed"

# Queue states.
Q_OPEN: Final = "Open"
Q_CLOSED: Final = "Closed"
Q_CLOSING: Final = "Closing"
Q_UNKNOWN: Final = "Unknown"

# Annotations and labels Volcano puts on pods (`volcano-semantics.md#job-podgroup-and-pods,
# #pod-to-podgroup`).
GROUP_NAME_ANNOTATION: Final = "scheduling.k8s.io/group-name"
TASK_INDEX: Final = "volcano.sh/task-index"
TASK_SPEC: Final = "volcano.sh/task-spec"
JOB_NAME: Final = "volcano.sh/job-name"
JOB_NAMESPACE: Final = "volcano.sh/job-namespace"
QUEUE_NAME: Final = "volcano.sh/queue-name"
JOB_VERSION: Final = "volcano.sh/job-version"
TEMPLATE_UID: Final = "volcano.sh/template-uid"
JOB_RETRY_COUNT: Final = "volcano.sh/job-retry-count"
NUMA_POLICY: Final = "volcano.sh/numa-topology-policy"
PARTITION_ID: Final = "volcano.sh/partition-id"
JOB_TYPE_LABEL: Final = "volcano.sh/job-type"
CLOSED_BY_PARENT: Final = "volcano.sh/closed-by-parent"
GROUP_MIN_MEMBER: Final = "scheduling.volcano.sh/group-min-member"
POD_QUEUE_ANNOTATION: Final = "scheduling.volcano.sh/queue-name"
NETWORK_TOPOLOGY_MODE: Final = "volcano.sh/network-topology-mode"
NETWORK_TOPOLOGY_TIER: Final = "volcano.sh/network-topology-highest-tier"
COPIED_JOB_ANNOTATIONS: Final = (
    "volcano.sh/preemptable",
    "volcano.sh/cooldown-time",
    "volcano.sh/revocable-zone",
    "volcano.sh/jdb-min-available",
    "volcano.sh/jdb-max-unavailable",
)
COPIED_JOB_LABELS: Final = ("volcano.sh/preemptable", "volcano.sh/cooldown-time")

# Tephra's own bookkeeping (crash safety; see docs/controllers.md "Exactly once").
OUT_OF_SYNC_ANNOTATION: Final = "tephra.io/out-of-sync"
PODGROUP_JOB_VERSION: Final = "tephra.io/job-version"
# Job.spec.runningEstimate, for the scheduler's reservation (EASY backfill) plugin.
PODGROUP_RUNNING_ESTIMATE: Final = RUNNING_ESTIMATE_ANNOTATION
TOKEN_COMMAND: Final = "tephra.io/last-command"
TOKEN_KILL: Final = "tephra.io/kill"
TOKEN_EVENT: Final = "tephra.io/last-event"
