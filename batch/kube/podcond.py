"""Pending pods' `PodScheduled=False` condition and `FailedScheduling` events, rate-bounded.

Why this exists: kube-scheduler and Volcano give a pod they cannot place the condition
`PodScheduled` status False reason `Unschedulable` with their reason as the message, and post a
`FailedScheduling` Warning event. Cluster-autoscaler and Karpenter scale up for pods with that
condition only; tools read the event. Volcano writes both for every pending pod whose condition
changed (`taskUnschedulable` in its cache); so does this planner, from the session's pending
reasons (one per gang, so every pod of a gang gets the same message; none for a job that fails
JobValid, such as a gang whose controller is still making its pods, which Volcano leaves out
of the session and so of its pod conditions), and only on a change of
(status, reason, message): what it last offered is remembered per pod, and a pod it has never
written is compared with the condition the watch last showed (a restarted scheduler rewrites
nothing). A gang whose reason and state (JobInfo.version) are as in the last session is not
looked at again. The event is coalesced per gang: one, on the gang's first pod whose condition
changed, posted with that pod's condition. The status queue (`batch.kube.dispatch`) sends at
most 500 conditions a second, so 20,000 new pending pods are written over 40 seconds, not at
once. Binding turns the condition True (the API server does that, and the sandbox).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from batch.api.events import identity
from batch.kube.status import EventSpec
from batch.model.cache import ClusterCache
from batch.model.info import JobInfo, TaskInfo
from batch.model.status import TaskStatus
from batch.scheduler.framework.decisions import Decisions

__all__ = ["PodConditions", "scheduled_event"]

UNSCHEDULABLE = "Unschedulable"
#: the reason of a job that fails JobValid (a gang whose pods are not all made yet): Volcano
#: drops such a job from the session before close, so its pods get no condition nor event
INVALID = "InvalidJob"
_Said = tuple[str, str, str]  # status, reason, message
PodPatch = tuple[str, str, dict[str, Any]]


def _condition(said: _Said) -> dict[str, Any]:
    status, reason, message = said
    return {
        "type": "PodScheduled",
        "status": status,
        "reason": reason,
        "message": message,
        "lastProbeTime": None,
    }


def _observed(task: TaskInfo) -> _Said | None:
    """The pod's PodScheduled condition as the watch last showed it."""
    status = (task.raw or {}).get("status") or {}
    for cond in status.get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == "PodScheduled":
            return (
                str(cond.get("status", "")),
                str(cond.get("reason", "")),
                str(cond.get("message", "")),
            )
    return None


class PodConditions:
    """Remembers what it offered; ``plan`` gives this session's condition patches and events."""

    def __init__(self) -> None:
        #: pod uid -> what its condition was last offered as
        self.sent: dict[str, _Said] = {}
        #: job id -> (its reason's message, JobInfo.version, its pending pods' uids) when last
        #: looked at
        self.jobs: dict[str, tuple[str, int, tuple[str, ...]]] = {}

    def plan(
        self, cache: ClusterCache, decisions: Decisions, stamp: str
    ) -> tuple[list[PodPatch], list[EventSpec]]:
        patches: list[PodPatch] = []
        events: list[EventSpec] = []
        looks = self.jobs
        seen: set[str] = set()
        for job_id, reason in decisions.pending_reasons.items():
            job = cache.jobs.get(job_id)
            if job is None or reason.kind == INVALID:
                continue
            seen.add(job_id)
            old = looks.get(job_id)
            if old is not None and old[0] == reason.message and old[1] == job.version:
                continue  # coalesced: the gang and its reason are as when last looked at
            tasks = _pending(job)
            looks[job_id] = (reason.message, job.version, tuple(t.uid for t in tasks))
            if old is not None:
                self._forget(old[2], looks[job_id][2])
            cond = ("False", UNSCHEDULABLE, reason.message)
            changed = self._gang(tasks, cond, stamp, patches)
            if changed is not None:
                events.append(_failed_scheduling(changed, reason.message))
        if len(seen) < len(looks):
            for job_id in [j for j in looks if j not in seen]:
                self._forget(looks.pop(job_id)[2], ())
        return patches, events

    def _gang(
        self, tasks: list[TaskInfo], said: _Said, stamp: str, patches: list[PodPatch]
    ) -> TaskInfo | None:
        """Patches for the gang's pods whose condition says something else; the first such pod."""
        first: TaskInfo | None = None
        for task in tasks:
            have = self.sent.get(task.uid) or _observed(task)
            if have == said:
                continue
            self.sent[task.uid] = said
            cond = {**_condition(said), "lastTransitionTime": stamp}
            patches.append((task.namespace, task.name, {"conditions": [cond]}))
            if first is None:
                first = task
        return first

    def _forget(self, before: tuple[str, ...], now: tuple[str, ...]) -> None:
        """Forget the pods of a gang that are no longer pending (a pod bound meanwhile has
        PodScheduled True from the API server; a deleted one has nothing)."""
        keep = set(now)
        for uid in before:
            if uid not in keep:
                self.sent.pop(uid, None)


def _pending(job: JobInfo) -> list[TaskInfo]:
    """The job's pending, ungated, unbound pods in task order (gated pods carry the API server's
    `SchedulingGated` condition, which is not ours to change)."""
    tasks = [
        t
        for t in job.tasks.values()
        if t.status is TaskStatus.PENDING and not t.gated and not t.node_name
    ]
    tasks.sort(key=lambda t: t.sort_key())
    return tasks


def _failed_scheduling(task: TaskInfo, message: str) -> EventSpec:
    return EventSpec(
        kind="Pod",
        namespace=task.namespace,
        name=task.name,
        uid=task.uid,
        resource_version=identity(task.raw)[1],
        reason="FailedScheduling",
        message=message,
        type="Warning",
    )


def scheduled_event(namespace: str, name: str, uid: str, node: str) -> EventSpec:
    """kube-scheduler's event for a pod bound to a node."""
    return EventSpec(
        kind="Pod",
        namespace=namespace,
        name=name,
        uid=uid,
        reason="Scheduled",
        message=f"Successfully assigned {namespace}/{name} to {node}",
        type="Normal",
    )
