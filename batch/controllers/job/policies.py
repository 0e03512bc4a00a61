"""Lifecycle policies: events matched to actions (task level first) and the kills they imply."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from batch.api.jobview import JobView, PolicyView, TaskView
from batch.controllers import constants as c
from batch.controllers.effects import (
    Action,
    DeleteObject,
    ObjectRef,
    PatchObject,
)
from batch.controllers.job.base import _SOFT_KILL_PHASES, JSON, RETAIN_FINISHED, PodView, Request
from batch.controllers.job.helpers import _timer_entry, _timer_key
from batch.controllers.timeutil import parse_time


def policy_action(policies: Sequence[PolicyView], req: Request) -> tuple[str, float | None] | None:
    """First policy matching the request: (action, timeout seconds) or None
    (`volcano-semantics.md#policy-matching`)."""
    for pol in policies:
        matched = False
        if pol.events and (req.event in pol.events or c.ANY_EVENT in pol.events):
            matched = req.event != c.POD_PENDING or pol.timeout is not None
        elif pol.exit_code is not None and req.exit_code is not None:
            matched = pol.exit_code == req.exit_code
        if matched:
            return pol.action or c.SYNC_JOB, pol.timeout
    return None


def select_action(job: JobView, req: Request) -> tuple[str, float | None]:
    """Task-level policies first, then job-level; default SyncJob."""
    if req.action:
        return req.action, None
    if req.task is not None:
        task = job.task(req.task)
        if task is not None:
            found = policy_action(task.policies, req)
            if found is not None:
                return found
    found = policy_action(job.policies, req)
    return found if found is not None else (c.SYNC_JOB, None)


def _target_of(action: str, req: Request, retry: int) -> str | None:
    if req.pod is None and action in (c.RESTART_POD, c.RESTART_PARTITION):
        return None
    if action == c.RESTART_TASK:
        task = req.task if req.task is not None else (req.pod.task if req.pod else None)
        return f"task:{task}:{retry}" if task is not None else None
    if action == c.RESTART_POD and req.pod is not None:
        return f"pod:{req.pod.name}:{retry}"
    if action == c.RESTART_PARTITION and req.pod is not None:
        return f"partition:{req.pod.task}/{req.pod.partition}:{retry}"
    return None


def _token_matches(token: str | None, pv: PodView) -> bool:
    if not token:
        return False
    try:
        scope, rest = token.split(":", 1)
        target, threshold_s = rest.rsplit(":", 1)
        threshold = int(threshold_s)
    except ValueError:
        return False
    if pv.retry >= threshold:
        return False
    if scope == "task":
        return pv.task == target
    if scope == "pod":
        return pv.name == target
    if scope == "partition":
        return f"{pv.task}/{pv.partition}" == target
    return False


def _counts(pods: Sequence[PodView], deleting_now: set[str]) -> tuple[JSON, JSON]:
    counters = dict.fromkeys(
        ("pending", "running", "succeeded", "failed", "terminating", "unknown"), 0
    )
    per_task: dict[str, dict[str, int]] = {}
    for pv in pods:
        if pv.deleting or pv.name in deleting_now:
            counters["terminating"] += 1
            continue
        key = {
            "Pending": "pending",
            "Running": "running",
            "Succeeded": "succeeded",
            "Failed": "failed",
        }.get(pv.phase, "unknown")
        counters[key] += 1
        per_task.setdefault(pv.task, {})
        per_task[pv.task][pv.phase] = per_task[pv.task].get(pv.phase, 0) + 1
    tsc = {t: {"phase": phases} for t, phases in sorted(per_task.items())}
    return counters, tsc


@dataclass
class Killer:
    """The pod deletions of one reconcile: each pod is deleted once (``deleting`` names them);
    ``mark`` first patches the out-of-sync annotation, so a crash cannot un-condemn it."""

    namespace: str
    deleting: set[str] = field(default_factory=set)

    def kill(self, pv: PodView, *, mark: bool, into: list[Action]) -> None:
        if pv.deleting or pv.name in self.deleting:
            return
        self.deleting.add(pv.name)
        pref = ObjectRef("v1", "Pod", self.namespace, pv.name, pv.uid or None)
        if mark and not pv.marked:
            into.append(
                PatchObject(pref, {"metadata": {"annotations": {c.OUT_OF_SYNC_ANNOTATION: "true"}}})
            )
        into.append(DeleteObject(pref))


def condemned(
    views: Sequence[PodView],
    tasks: Sequence[TaskView],
    killer: Killer,
    *,
    phase: str,
    version: int,
    retain: str,
    token: str | None,
) -> list[Action]:
    """The kills the observed status already decided (emitted before any new transition):
    marked pods, pods of an older version (finished ones kept when ``retain`` says so), the
    pending targeted kill (``token``), pods beyond the replicas, and in a soft-kill phase every
    unfinished pod."""
    replicas = {t.name: t.replicas for t in tasks}
    out: list[Action] = []
    for pv in views:
        if pv.deleting:
            continue
        if pv.marked:
            killer.kill(pv, mark=False, into=out)
        elif pv.version < version:
            if not (retain == RETAIN_FINISHED and pv.finished):
                killer.kill(pv, mark=False, into=out)
        elif _token_matches(token, pv):
            killer.kill(pv, mark=True, into=out)
        elif (
            pv.task not in replicas or pv.index >= replicas[pv.task]
        ) and phase not in _SOFT_KILL_PHASES:
            killer.kill(pv, mark=True, into=out)  # scale down
        if phase in _SOFT_KILL_PHASES and not pv.finished:
            killer.kill(pv, mark=pv.version >= version, into=out)
    return out


@dataclass
class Fired:
    """What the lifecycle policies make of the events of one reconcile."""

    request: Request | None = None  # the event whose action runs now (the first one due)
    action: str = c.SYNC_JOB
    timers: dict[str, JSON] = field(default_factory=dict)  # delayed actions still pending
    waits: list[float] = field(default_factory=list)  # seconds until each pending one is due


def fire_policies(
    job: JobView,
    requests: Sequence[Request],
    timers: Mapping[str, JSON],
    *,
    version: int,
    retry: int,
    now: datetime,
) -> Fired:
    """Match each event against the policies (`volcano-semantics.md#policy-matching`).

    A policy with a timeout runs from the event's own time, else from when a reconcile first
    saw the condition (kept in ``timers`` until it clears); a timed PodEvicted of a pod that is
    gone is kept there too, since nothing else will show it again. The first action due runs.
    """
    fired = Fired()
    for r in requests:
        act, timeout = select_action(job, r)
        if act == c.SYNC_JOB:
            continue
        keep = False
        if timeout:
            key = _timer_key(r, version)
            since = r.since or parse_time((timers.get(key) or {}).get("since")) or now
            keep = r.since is None or r.event == c.POD_EVICTED
            due = since + timedelta(seconds=timeout)
            if due > now:
                fired.waits.append((due - now).total_seconds())
                if keep:
                    fired.timers[key] = _timer_entry(r, since, version=version, retry=retry)
                continue
        if fired.request is None:
            fired.request, fired.action = r, act  # runs now, once: its timer goes
        elif keep:
            fired.timers[key] = _timer_entry(r, since, version=version, retry=retry)
    return fired
