"""Volcano's API constants: groups, events, actions, job plugins, annotation keys.

Values are Volcano's own (volcano-semantics.md#events-and-actions, #job-plugins,
#pod-to-podgroup) so that YAML written for Volcano means the same thing to Tephra.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

BATCH_GROUP: Final = "batch.volcano.sh"
BUS_GROUP: Final = "bus.volcano.sh"
SCHEDULING_GROUP: Final = "scheduling.volcano.sh"
TOPOLOGY_GROUP: Final = "topology.volcano.sh"

DEFAULT_QUEUE: Final = "default"
ROOT_QUEUE: Final = "root"
DEFAULT_SCHEDULER: Final = "volcano"
DEFAULT_MAX_RETRY: Final = 3

# --- lifecycle policy events (bus.volcano.sh/v1alpha1) ---
ANY_EVENT: Final = "*"
POD_FAILED: Final = "PodFailed"
POD_EVICTED: Final = "PodEvicted"
POD_PENDING: Final = "PodPending"
POD_RUNNING: Final = "PodRunning"
JOB_UNKNOWN: Final = "Unknown"
TASK_COMPLETED: Final = "TaskCompleted"
TASK_FAILED: Final = "TaskFailed"
JOB_UPDATED: Final = "JobUpdated"
OUT_OF_SYNC: Final = "OutOfSync"
COMMAND_ISSUED: Final = "CommandIssued"

#: Every event the CRD schema accepts, in the CRD's order.
ALL_EVENTS: Final = (
    ANY_EVENT,
    POD_PENDING,
    POD_RUNNING,
    POD_FAILED,
    POD_EVICTED,
    JOB_UNKNOWN,
    TASK_COMPLETED,
    OUT_OF_SYNC,
    COMMAND_ISSUED,
    JOB_UPDATED,
    TASK_FAILED,
)
#: Events a user may put in a lifecycle policy (the validating webhook's list).
POLICY_EVENTS: Final = frozenset(
    {
        ANY_EVENT,
        POD_FAILED,
        POD_EVICTED,
        POD_PENDING,
        JOB_UNKNOWN,
        TASK_COMPLETED,
        TASK_FAILED,
        JOB_UPDATED,
    }
)

# --- actions ---
ABORT_JOB: Final = "AbortJob"
RESTART_JOB: Final = "RestartJob"
RESTART_TASK: Final = "RestartTask"
RESTART_POD: Final = "RestartPod"
RESTART_PARTITION: Final = "RestartPartition"
TERMINATE_JOB: Final = "TerminateJob"
COMPLETE_JOB: Final = "CompleteJob"
RESUME_JOB: Final = "ResumeJob"
SYNC_JOB: Final = "SyncJob"
ENQUEUE_JOB: Final = "EnqueueJob"
SYNC_QUEUE: Final = "SyncQueue"
OPEN_QUEUE: Final = "OpenQueue"
CLOSE_QUEUE: Final = "CloseQueue"

#: The 8 actions a lifecycle policy may name.
POLICY_ACTIONS: Final = frozenset(
    {
        ABORT_JOB,
        RESTART_JOB,
        RESTART_TASK,
        RESTART_POD,
        RESTART_PARTITION,
        TERMINATE_JOB,
        COMPLETE_JOB,
        RESUME_JOB,
    }
)
JOB_COMMAND_ACTIONS: Final = POLICY_ACTIONS | {SYNC_JOB, ENQUEUE_JOB}
QUEUE_COMMAND_ACTIONS: Final = frozenset({OPEN_QUEUE, CLOSE_QUEUE, SYNC_QUEUE})
#: Every action a bus Command may carry.
COMMAND_ACTIONS: Final = JOB_COMMAND_ACTIONS | QUEUE_COMMAND_ACTIONS

# --- job plugins (controller side) ---
JOB_PLUGINS: Final = frozenset(
    {"ssh", "env", "svc", "tensorflow", "mpi", "pytorch", "ray", "hcclrank"}
)
#: Plugins that imply `svc` (the mutating webhook adds `svc: []`).
PLUGINS_IMPLYING_SVC: Final = ("tensorflow", "mpi", "pytorch", "ray")

# --- job phases / queue states / podgroup phases ---
#: A job's phases (status.state.phase), defined here once: the CRD's enum and the pydantic
#: model read this type, the controllers the tuple.
JobPhase = Literal[
    "Pending",
    "Aborting",
    "Aborted",
    "Running",
    "Restarting",
    "Completing",
    "Completed",
    "Terminating",
    "Terminated",
    "Failed",
]
JOB_PHASES: Final[tuple[str, ...]] = get_args(JobPhase)
QUEUE_OPEN: Final = "Open"
QUEUE_CLOSED: Final = "Closed"
QUEUE_STATES: Final = ("Open", "Closed", "Closing", "Unknown")
PODGROUP_PHASES: Final = ("Pending", "Inqueue", "Running", "Unknown", "Completed")

# --- annotation / label keys ---
ANN_GROUP_NAME: Final = "scheduling.k8s.io/group-name"
ANN_QUEUE_NAME: Final = "scheduling.volcano.sh/queue-name"
ANN_HIERARCHY: Final = "volcano.sh/hierarchy"
ANN_HIERARCHY_WEIGHTS: Final = "volcano.sh/hierarchy-weights"
ANN_JDB_MIN_AVAILABLE: Final = "volcano.sh/jdb-min-available"
ANN_JDB_MAX_UNAVAILABLE: Final = "volcano.sh/jdb-max-unavailable"
ANN_TASK_SPEC: Final = "volcano.sh/task-spec"
ANN_PARTITION_ID: Final = "volcano.sh/partition-id"
ANN_CLOSED_BY_PARENT: Final = "volcano.sh/closed-by-parent"

# --- eviction reasons the scheduler's actions give (Eviction.reason) ---
EVICT_PREEMPT: Final = "preempt"
EVICT_GANG_PREEMPT: Final = "gangpreempt"
EVICT_RECLAIM: Final = "reclaim"
EVICT_GANG_RECLAIM: Final = "gangreclaim"
#: Evictions that count as preemption in Volcano's preemption metrics (victims, attempts):
#: a higher-priority job of the same queue took the resources, task by task or gang by gang.
PREEMPTION_REASONS: Final = frozenset({EVICT_PREEMPT, EVICT_GANG_PREEMPT})
#: Evictions that return resources to a queue below its deserved share.
RECLAIM_REASONS: Final = frozenset({EVICT_RECLAIM, EVICT_GANG_RECLAIM})


def is_preemption(reason: str) -> bool:
    """Whether an eviction with ``reason`` is a preemption (see :data:`PREEMPTION_REASONS`)."""
    return reason in PREEMPTION_REASONS
