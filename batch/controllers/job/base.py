"""Shared shapes of the job controller: status keys, phase families, pod views, requests, plans."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from batch.controllers import constants as c
from batch.controllers.jobspec import (
    meta,
)
from batch.controllers.timeutil import parse_time

JSON = dict[str, Any]

TOKEN_TARGET = "tephra.io/kill-target"
TOKEN_RETAIN = "tephra.io/kill-retain"
LAYOUT_KEY = "tephra.io/layout"
TIMERS_KEY = "tephra.io/timers"
RETAINED_KEY = "tephra.io/retained"

RETAIN_NONE = "none"
RETAIN_FINISHED = "finished"

_FULL_KILL_PHASES = {
    c.ABORT_JOB: c.ABORTING,
    c.COMPLETE_JOB: c.COMPLETING,
    c.TERMINATE_JOB: c.TERMINATING,
}
_TARGETED = (c.RESTART_TASK, c.RESTART_POD, c.RESTART_PARTITION)
_ACTIVE_PHASES = (c.PENDING, c.RUNNING, c.RESTARTING)  # policies consulted, children synced
_SOFT_KILL_PHASES = {
    c.ABORTING,
    c.ABORTED,
    c.COMPLETING,
    c.COMPLETED,
    c.TERMINATING,
    c.TERMINATED,
    c.FAILED,
}


@dataclass(slots=True)
class PodView:
    """One observed pod with the fields the state machine reads."""

    pod: Mapping[str, Any]
    name: str
    uid: str
    task: str
    index: int
    version: int
    retry: int
    phase: str
    deleting: bool
    marked: bool

    @classmethod
    def of(cls, pod: Mapping[str, Any]) -> PodView:
        m = meta(pod)
        ann = m.get("annotations") or {}
        labels = m.get("labels") or {}

        def _int(v: Any, default: int) -> int:
            try:
                return int(v)
            except (TypeError, ValueError):
                return default

        return cls(
            pod=pod,
            name=str(m.get("name")),
            uid=str(m.get("uid") or ""),
            task=str(ann.get(c.TASK_SPEC) or labels.get(c.TASK_SPEC) or ""),
            index=_int(ann.get(c.TASK_INDEX, labels.get(c.TASK_INDEX)), -1),
            version=_int(ann.get(c.JOB_VERSION), 0),
            retry=_int(ann.get(c.JOB_RETRY_COUNT), 0),
            phase=str((pod.get("status") or {}).get("phase") or "Pending"),
            deleting=bool(m.get("deletionTimestamp")),
            marked=ann.get(c.OUT_OF_SYNC_ANNOTATION) == "true",
        )

    @property
    def finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def partition(self) -> str:
        labels = meta(self.pod).get("labels") or {}
        return str(labels.get(c.PARTITION_ID, ""))

    def ready(self) -> bool:
        """Running with every container ready (used by dependsOn)."""
        if self.phase != "Running":
            return False
        statuses = (self.pod.get("status") or {}).get("containerStatuses") or []
        return bool(statuses) and all(s.get("ready") for s in statuses)

    def exit_code(self) -> int | None:
        statuses = (self.pod.get("status") or {}).get("containerStatuses") or []
        if not statuses:
            return None
        term = (statuses[0].get("state") or {}).get("terminated") or {}
        code = term.get("exitCode")
        return int(code) if code is not None else None

    def restarts(self) -> int:
        statuses = (self.pod.get("status") or {}).get("containerStatuses") or []
        return sum(int(s.get("restartCount") or 0) for s in statuses)

    def finished_at(self) -> datetime | None:
        """When the last container terminated (the pod reached Succeeded/Failed), if recorded."""
        statuses = (self.pod.get("status") or {}).get("containerStatuses") or []
        times = [
            t
            for s in statuses
            if (t := parse_time(((s.get("state") or {}).get("terminated") or {}).get("finishedAt")))
            is not None
        ]
        return max(times) if times else None

    def failed_at(self) -> datetime | None:
        """When the pod failed: its containers' finishedAt, else (a pod the kubelet rejected,
        e.g. OutOfcpu, has no containerStatuses) its latest condition transition or startTime."""
        done = self.finished_at()
        if done is not None:
            return done
        status = self.pod.get("status") or {}
        times = [
            t
            for cond in status.get("conditions") or []
            if (t := parse_time(cond.get("lastTransitionTime"))) is not None
        ]
        start = parse_time(status.get("startTime"))
        if start is not None:
            times.append(start)
        return max(times) if times else None


@dataclass(frozen=True, slots=True)
class Request:
    """One event (or command) the policies are consulted for."""

    event: str
    task: str | None = None
    pod: PodView | None = None
    exit_code: int | None = None
    since: datetime | None = None
    action: str | None = None


@dataclass(slots=True)
class _Plan:
    """What the state machine decided, before it is turned into actions."""

    phase: str
    retry: int
    version: int
    full_kill: str | None = None  # retain policy of a full kill issued now
    target: str | None = None  # new targeted-kill token
    reason: str = ""
    message: str = ""
    kills: list[PodView] = field(default_factory=list)
