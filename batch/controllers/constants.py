"""Names the controllers share with Volcano: API groups, phases, events, actions, annotation keys.

Kept in one place so the pure reconcilers, the kopf shell and the CLI agree on every string that
crosses the API boundary (these are Volcano's own constants, `volcano.md` §1.5, §3.3, App. A).
"""

from __future__ import annotations

from typing import Final

BATCH_GROUP: Final = "batch.volcano.sh"
BATCH_VERSION: Final = "v1alpha1"
BATCH_API: Final = f"{BATCH_GROUP}/{BATCH_VERSION}"
BUS_GROUP: Final = "bus.volcano.sh"
BUS_VERSION: Final = "v1alpha1"
BUS_API: Final = f"{BUS_GROUP}/{BUS_VERSION}"
SCHED_GROUP: Final = "scheduling.volcano.sh"
SCHED_VERSION: Final = "v1beta1"
SCHED_API: Final = f"{SCHED_GROUP}/{SCHED_VERSION}"

DEFAULT_QUEUE: Final = "default"
ROOT_QUEUE: Final = "root"
DEFAULT_SCHEDULER_NAMES: Final = ("volcano", "tephra")

# Job phases (status.state.phase).
PENDING: Final = "Pending"
ABORTING: Final = "Aborting"
ABORTED: Final = "Aborted"
RUNNING: Final = "Running"
RESTARTING: Final = "Restarting"
COMPLETING: Final = "Completing"
COMPLETED: Final = "Completed"
TERMINATING: Final = "Terminating"
TERMINATED: Final = "Terminated"
FAILED: Final = "Failed"
JOB_PHASES: Final = (
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
)
FINISHED_PHASES: Final = frozenset({COMPLETED, TERMINATED, FAILED})

# Events (policy event/events).
ANY_EVENT: Final = "*"
POD_FAILED: Final = "PodFailed"
POD_EVICTED: Final = "PodEvicted"
POD_PENDING: Final = "PodPending"
UNKNOWN_EVENT: Final = "Unknown"
TASK_COMPLETED: Final = "TaskCompleted"
TASK_FAILED: Final = "TaskFailed"
JOB_UPDATED: Final = "JobUpdated"
OUT_OF_SYNC: Final = "OutOfSync"
COMMAND_ISSUED: Final = "CommandIssued"

# Actions.
ABORT_JOB: Final = "AbortJob"
RESTART_JOB: Final = "RestartJob"
RESTART_TASK: Final = "RestartTask"
RESTART_POD: Final = "RestartPod"
RESTART_PARTITION: Final = "RestartPartition"
TERMINATE_JOB: Final = "TerminateJob"
COMPLETE_JOB: Final = "CompleteJob"
RESUME_JOB: Final = "ResumeJob"
SYNC_JOB: Final = "SyncJob"
OPEN_QUEUE: Final = "OpenQueue"
CLOSE_QUEUE: Final = "CloseQueue"
SYNC_QUEUE: Final = "SyncQueue"
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

# Annotations and labels Volcano puts on pods (`volcano.md` §1.3, §3.3).
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
PODGROUP_RUNNING_ESTIMATE: Final = "tephra.io/running-estimate"
TOKEN_COMMAND: Final = "tephra.io/last-command"
TOKEN_KILL: Final = "tephra.io/kill"
TOKEN_EVENT: Final = "tephra.io/last-event"
