"""The VCJob reconciler: a pure function from observed state to intended changes.

`reconcile_job(job, pods, podgroup, now=...)` reproduces Volcano's job controller
(`volcano-semantics.md#job-podgroup-and-pods, #events-and-actions, #policy-matching,
#job-state-machine`): initialisation (phase Pending, plugin objects, PVCs, PodGroup
`<job>-<uid>`), pods only once the PodGroup has left Pending, lifecycle policies (task-level before
job-level, exit codes, timeouts), the job state machine with kill(soft)/kill(all), maxRetry and
retryCount, minSuccess, dependsOn, scale up/down, bus Commands and ttlSecondsAfterFinished.

It is level-triggered: events (PodFailed, PodEvicted, PodPending, TaskCompleted, TaskFailed,
Unknown) are derived from the pods' and PodGroup's current state, and every transition is made
idempotent by what it writes to the job status first:
* a full kill bumps `status.version`; pods of an older version never raise events again and are
  deleted unless the kill keeps finished pods;
* a targeted kill (RestartTask/Pod/Partition) writes a kill token
  (`status.controlledResources["tephra.io/kill-target"]`) naming the target and the retry count
  it was issued at; matching pods created before it are deleted, never re-raise the event;
* a Command's uid is written (`tephra.io/last-command`) in the same status write as its
  transition; a Command whose uid is already recorded is only deleted.
Marks of pods already condemned by the observed status are written before any new status write,
deletions only after the write that counts them as terminating, so a controller killed between
any two writes neither repeats nor loses a transition, nor mistakes its own deletions for evictions.
A pod missing against the last written `taskStatusCount` is an eviction only if it was of the
current version (`tephra.io/retained` counts the older finished pods a kill kept). Plugin objects
that follow the task layout (the svc ConfigMap) are rewritten before the status write that records
the layout (`tephra.io/layout`).

A policy `timeout` runs from the event's own time (pod creation for PodPending, the containers'
finishedAt, or the conditions/startTime of a pod the kubelet rejected, for PodFailed, the last
finishedAt for TaskCompleted, the PodGroup's Unschedulable condition for Unknown, the
deletionTimestamp for PodEvicted), else from when a reconcile first saw the condition; those
first-seen times, and the timed PodEvicted events of pods that are gone, are kept in
`tephra.io/timers` until the action runs (once) or the condition clears.
Bounded work: a reconcile creates at most `pod_batch` pods (the first missing ones, task by task)
and asks to run again at once for the rest, so it never holds more than a batch of new pods and the
work queue, a deletion of the job and shutdown are served between batches. A job over the size
limits (`batch.api.admission.AdmissionLimits`; admission refuses it, so it got here without
admission) is never expanded: a new one fails at once, one scaled over them is left as it is.
No I/O, no wall clock: `now` is passed in (the simulator drives this on a virtual clock).

A reconcile reads as its steps, each a pure function tested on its own
(tests/controllers/test_job_steps.py): `read_job`, the refusals (`refuse_oversized`,
`job_plugins`), `initialise` for a new job; then `decide` (`condemned`, `choose_request`,
`plan_action`, `plan_kills`, `settle_phase`) and `carry_out` (`sync_children`, `_missing_pods`,
`desired_status`, `ordered_actions`, `apply_ttl`).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from batch.api.admission import DEFAULT_LIMITS, AdmissionLimits
from batch.api.defaults import max_retry as default_max_retry
from batch.api.events import identity
from batch.api.quantity import QuantityError
from batch.api.resources import is_extended_resource, to_internal
from batch.controllers import constants as c
from batch.controllers.actions import (
    Action,
    CreateObject,
    DeleteObject,
    EmitEvent,
    ObjectRef,
    PatchObject,
    PatchStatus,
    ReconcileResult,
)
from batch.controllers.jobspec import (
    TaskView,
    build_pod,
    build_podgroup,
    build_pvc,
    job_min_available,
    job_volumes,
    meta,
    owned_by_job,
    pod_name,
    podgroup_name,
    podgroup_spec,
    tasks_of,
)
from batch.controllers.plugins import ObjectKey, PluginArgsError, build_plugins
from batch.controllers.priorities import MISS_RELIST, priority_class_names
from batch.controllers.timeutil import format_time, merge_patch, parse_duration, parse_time

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


def policy_action(
    policies: Sequence[Mapping[str, Any]], req: Request
) -> tuple[str, float | None] | None:
    """First policy matching the request: (action, timeout seconds) or None
    (`volcano-semantics.md#policy-matching`)."""
    for pol in policies:
        events = list(pol.get("events") or [])
        if pol.get("event"):
            events.append(pol["event"])
        timeout = parse_duration(pol.get("timeout"))
        matched = False
        if events and (req.event in events or c.ANY_EVENT in events):
            matched = req.event != c.POD_PENDING or timeout is not None
        elif pol.get("exitCode") is not None and req.exit_code is not None:
            matched = int(pol["exitCode"]) == req.exit_code
        if matched:
            return str(pol.get("action") or c.SYNC_JOB), timeout
    return None


def select_action(
    job: Mapping[str, Any], tasks: Sequence[TaskView], req: Request
) -> tuple[str, float | None]:
    """Task-level policies first, then job-level; default SyncJob."""
    if req.action:
        return req.action, None
    if req.task is not None:
        task = next((t for t in tasks if t.name == req.task), None)
        if task is not None:
            found = policy_action(task.policies, req)
            if found is not None:
                return found
    found = policy_action((job.get("spec") or {}).get("policies") or [], req)
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

    def kill(self, pv: PodView, *, mark: bool, into: list[Any]) -> None:
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
) -> list[Any]:
    """The kills the observed status already decided (emitted before any new transition):
    marked pods, pods of an older version (finished ones kept when ``retain`` says so), the
    pending targeted kill (``token``), pods beyond the replicas, and in a soft-kill phase every
    unfinished pod."""
    replicas = {t.name: t.replicas for t in tasks}
    out: list[Any] = []
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
    job: Mapping[str, Any],
    tasks: Sequence[TaskView],
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
        act, timeout = select_action(job, tasks, r)
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


def initialise(
    job: Mapping[str, Any],
    ref: ObjectRef,
    tasks: Sequence[TaskView],
    plugins: Sequence[Any],
    cres: dict[str, str],
    *,
    min_av: int,
    now: datetime,
    priority_values: Mapping[str, int] | None,
) -> list[Any]:
    """A new job's first reconcile: plugin objects, PVCs, the Pending status and the PodGroup
    (`volcano-semantics.md#job-podgroup-and-pods`); records what it made in ``cres``."""
    actions: list[Any] = []
    for plugin in plugins:
        actions += [CreateObject(obj) for obj in plugin.on_job_add(job, tasks)]
        cres[f"plugin-{plugin.name}"] = plugin.name
    for claim, _mount, claim_spec in job_volumes(job):
        if claim_spec is not None:
            actions.append(CreateObject(build_pvc(job, claim, claim_spec)))
        cres[f"volume-pvc-{claim}"] = claim
    cres[LAYOUT_KEY] = _layout(tasks)
    state: JSON = {"phase": c.PENDING, "lastTransitionTime": format_time(now)}
    if _initialise_refused(job.get("status") or {}):
        state |= {"reason": None, "message": None}  # merge patch: the refusal is over
    new_status: JSON = {
        "state": state,
        "minAvailable": min_av,
        "version": 0,
        "retryCount": 0,
        "controlledResources": cres,
        "conditions": [{"status": c.PENDING, "lastTransitionTime": format_time(now)}],
    }
    actions.append(PatchStatus(ref, new_status))
    actions.append(CreateObject(build_podgroup(job, version=0, priority_values=priority_values)))
    return actions


def take_command(
    commands: Sequence[Mapping[str, Any]], ns: str, cres: dict[str, str]
) -> tuple[Request | None, ObjectRef | None, list[Any]]:
    """The oldest bus Command not yet taken becomes the request (its uid recorded in ``cres``);
    Commands already taken are deleted (`volcano-semantics.md#commands`)."""
    req: Request | None = None
    command_ref: ObjectRef | None = None
    done: list[Any] = []
    for cmd in sorted(
        commands, key=lambda x: (str(meta(x).get("creationTimestamp") or ""), meta(x).get("name"))
    ):
        cm = meta(cmd)
        cref = ObjectRef(c.BUS_API, "Command", ns, str(cm.get("name")), cm.get("uid"))
        if cm.get("uid") and cm.get("uid") == cres.get(c.TOKEN_COMMAND):
            done.append(DeleteObject(cref))
        elif req is None:
            req = Request(event=c.COMMAND_ISSUED, action=str(cmd.get("action") or c.SYNC_JOB))
            command_ref = cref
            cres[c.TOKEN_COMMAND] = str(cm.get("uid") or cm.get("name"))
    return req, command_ref, done


def sync_podgroup(
    job: Mapping[str, Any],
    podgroup: Mapping[str, Any] | None,
    version: int,
    *,
    priority_values: Mapping[str, int] | None,
) -> list[Any]:
    """Keep the job's PodGroup in line: create it, delete one of an older job version, or patch
    the fields Volcano updates (minMember, minTaskMember, minResources, priorityClassName)."""
    if podgroup is None:
        return [CreateObject(build_podgroup(job, version=version, priority_values=priority_values))]
    pg_ref = ObjectRef.of(_with_kind(podgroup, "PodGroup"))
    if _pg_version(podgroup) < version:
        return [] if meta(podgroup).get("deletionTimestamp") else [DeleteObject(pg_ref)]
    want = podgroup_spec(job, priority_values=priority_values)
    have = podgroup.get("spec") or {}
    keys = ["minMember", "minTaskMember", "minResources"]
    if want.get("priorityClassName"):
        keys.append("priorityClassName")
    patch = merge_patch({k: have.get(k) for k in keys}, {k: want.get(k) for k in keys})
    return [PatchObject(pg_ref, {"spec": patch})] if patch else []


def plan_action(
    phase: str,
    req: Request | None,
    action: str,
    *,
    retry: int,
    max_retry: int,
    version: int,
) -> _Plan:
    """What the state machine does with the request's ``action`` in ``phase``
    (`volcano-semantics.md#job-state-machine`): the kill it orders and the phase it enters."""
    plan = _Plan(phase=phase, retry=retry, version=version)
    if req is None:
        return plan
    if action != c.SYNC_JOB:
        plan.reason = req.event if req.action is None else "CommandIssued"
        plan.message = f"{action} on {req.event}" + (f" of pod {req.pod.name}" if req.pod else "")
    if phase in (c.PENDING, c.RUNNING):
        if action == c.RESTART_JOB:
            plan.full_kill = RETAIN_FINISHED if retry >= max_retry - 1 else RETAIN_NONE
            plan.phase, plan.retry = c.RESTARTING, retry + 1
        elif action in _TARGETED:
            plan.target = _target_of(action, req, retry + 1)
            if plan.target is not None:
                plan.phase, plan.retry = c.RESTARTING, retry + 1
        elif action in _FULL_KILL_PHASES:
            plan.full_kill = RETAIN_FINISHED
            plan.phase = _FULL_KILL_PHASES[action]
    elif phase == c.RESTARTING and action != c.SYNC_JOB:
        if action in _TARGETED:
            plan.target = _target_of(action, req, retry)
        else:
            plan.full_kill = RETAIN_NONE
    elif phase in (c.ABORTING, c.ABORTED) and action == c.RESUME_JOB:
        plan.full_kill = RETAIN_FINISHED
        plan.phase, plan.retry = c.RESTARTING, retry + 1
    return plan


def level_phase(
    phase: str,
    tasks: Sequence[TaskView],
    counters: Mapping[str, int],
    task_status: Mapping[str, Any],
    *,
    min_av: int,
    min_success: Any,
    retry: int,
    max_retry: int,
    restart_min: int,
) -> str:
    """The phase a sync moves the job to from the pod counts alone (the SyncJob rows of the
    state machine); ``restart_min`` is the minAvailable recorded in the status."""
    total = sum(t.replicas for t in tasks)
    running, pending = counters["running"], counters["pending"]
    succeeded, failed = counters["succeeded"], counters["failed"]
    idle = counters["terminating"] == pending == running == 0
    if phase == c.PENDING:
        return c.RUNNING if min_av <= running + succeeded + failed else phase
    if phase == c.RUNNING:
        task_ok = {
            t: int((v.get("phase") or {}).get("Succeeded", 0)) for t, v in task_status.items()
        }
        new = _running_check(
            tasks,
            dict(counters),
            total=total,
            min_av=min_av,
            min_success=min_success,
            task_succeeded=task_ok,
        )
        return c.PENDING if new == c.RUNNING and pending > total - min_av else new
    if phase == c.RESTARTING:
        if retry >= max_retry:
            return c.FAILED
        return c.PENDING if total - counters["terminating"] >= restart_min else phase
    if phase == c.ABORTING and idle:
        return c.ABORTED
    if phase in (c.COMPLETING, c.TERMINATING) and idle:
        return c.COMPLETED if phase == c.COMPLETING else c.TERMINATED
    return phase


def next_state(
    status: Mapping[str, Any], phase: str, plan: _Plan, *, no_class: str, now: datetime
) -> tuple[JSON, list[Any]]:
    """``status.state`` and ``status.conditions`` after the plan (a phase entered moves its
    condition to the end); a missing PriorityClass is the reason of a Pending job."""
    state: JSON = dict(status.get("state") or {})
    conditions = list(status.get("conditions") or [])
    if plan.phase != phase:
        state = {
            "phase": plan.phase,
            "reason": plan.reason,
            "message": plan.message,
            "lastTransitionTime": format_time(now),
        }
        conditions = [x for x in conditions if x.get("status") != plan.phase]
        conditions.append({"status": plan.phase, "lastTransitionTime": format_time(now)})
    elif plan.reason and (plan.target or plan.full_kill):
        state = {**state, "reason": plan.reason, "message": plan.message}
    elif no_class and plan.phase == c.PENDING:
        state = {**state, "reason": NO_PRIORITY_CLASS, "message": no_class}
    elif state.get("reason") == NO_PRIORITY_CLASS:
        state = {k: v for k, v in state.items() if k not in ("reason", "message")}
    return state, conditions


def ttl_due(
    spec: Mapping[str, Any],
    state: Mapping[str, Any],
    phase: str,
    new_phase: str,
    *,
    now: datetime,
) -> datetime | None:
    """When ``ttlSecondsAfterFinished`` deletes a finished job (None: never, or not finished)."""
    ttl = spec.get("ttlSecondsAfterFinished")
    if ttl is None or new_phase not in c.FINISHED_PHASES:
        return None
    since = now if new_phase != phase else parse_time(state.get("lastTransitionTime")) or now
    return since + timedelta(seconds=int(ttl))


def _record_retained(
    cres: dict[str, str], views: Sequence[PodView], killer: Killer, plan: _Plan
) -> None:
    """Pods of an older version counted in taskStatusCount (finished pods a kill kept), per
    task, kept in ``cres``: the vanished-pod check compares the current version's pods only."""
    retained: dict[str, int] = {}
    for pv in views:
        if not (pv.deleting or pv.name in killer.deleting or pv.version >= plan.version):
            retained[pv.task] = retained.get(pv.task, 0) + 1
    _store_json(cres, RETAINED_KEY, retained if plan.phase in _ACTIVE_PHASES else {})


def status_patch(status: Mapping[str, Any], desired: Mapping[str, Any]) -> JSON | None:
    """The merge patch from the observed ``status`` to ``desired`` (None: nothing to write;
    a refreshed ``runningDuration`` alone is not worth a write)."""
    observed = {k: status.get(k) for k in desired}
    observed_norm = {
        k: (v if v is not None else _empty_like(desired[k])) for k, v in observed.items()
    }
    spatch: JSON | None = merge_patch(observed_norm, dict(desired))
    if spatch and set(spatch) == {"runningDuration"}:
        return None
    return spatch


def plan_kills(
    plan: _Plan,
    views: Sequence[PodView],
    current: Sequence[PodView],
    podgroup: Mapping[str, Any] | None,
    killer: Killer,
    cres: dict[str, str],
    *,
    version: int,
) -> list[Any]:
    """The deletions the plan orders now: a full kill (every pod, finished ones kept when it
    retains them; the job version goes up and the PodGroup goes) or a targeted one (the pods
    of one task, pod or partition, marked first). The kill tokens are recorded in ``cres``."""
    out: list[Any] = []
    if plan.full_kill is not None:
        plan.version = version + 1
        cres[TOKEN_RETAIN] = plan.full_kill
        for pv in views:
            if not (plan.full_kill == RETAIN_FINISHED and pv.finished):
                killer.kill(pv, mark=False, into=out)
        if podgroup is not None:
            out.append(DeleteObject(ObjectRef.of(_with_kind(podgroup, "PodGroup"))))
    if plan.target is not None:
        cres[TOKEN_TARGET] = plan.target
        for pv in current:
            if _token_matches(plan.target, pv):
                killer.kill(pv, mark=True, into=out)
    return out


@dataclass(frozen=True, slots=True)
class JobFacts:
    """What a reconcile reads from the job object: who it is, its status counters and its tasks.

    ``phase`` is "" for a job never reconciled; ``notes`` say what was read in an unusual way."""

    ref: ObjectRef
    spec: Mapping[str, Any]
    status: Mapping[str, Any]
    phase: str
    version: int
    retry: int
    max_retry: int
    tasks: Sequence[TaskView]
    notes: tuple[str, ...] = ()

    @property
    def namespace(self) -> str:
        return self.ref.namespace

    @property
    def state(self) -> Mapping[str, Any]:
        return self.status.get("state") or {}


def read_job(job: Mapping[str, Any]) -> JobFacts:
    """The job's identity (events name it as client-go's recorder does), status counters and
    tasks. A phase the controller did not write is taken for Pending, as Volcano's state
    machine does."""
    m = meta(job)
    uid, seen = identity(job)
    ref = ObjectRef(
        c.BATCH_API,
        "Job",
        str(m.get("namespace") or "default"),
        str(m.get("name")),
        uid or None,
        seen or None,
    )
    spec = job.get("spec") or {}
    status: Mapping[str, Any] = job.get("status") or {}
    phase = str((status.get("state") or {}).get("phase") or "")
    if _initialise_refused(status):
        phase = ""  # Pending only to say why it is not yet initialised: try again
    notes: tuple[str, ...] = ()
    if phase and phase not in c.JOB_PHASES:
        notes = (f"unknown phase {phase!r} taken as {c.PENDING}",)
        phase = c.PENDING
    return JobFacts(
        ref=ref,
        spec=spec,
        status=status,
        phase=phase,
        version=_count(status.get("version")),
        retry=_count(status.get("retryCount")),
        max_retry=int(default_max_retry(spec.get("maxRetry"))),
        tasks=tasks_of(job),
        notes=notes,
    )


def _initialise_refused(status: Mapping[str, Any]) -> bool:
    state = status.get("state") or {}
    return (
        state.get("phase") == c.PENDING
        and state.get("reason") == c.FORBIDDEN_REASON
        and not status.get("controlledResources")
    )


def pending_forbidden(job: Mapping[str, Any], message: str, now: datetime) -> list[Any]:
    """The status of a new job whose first reconcile the API server forbade: Pending, the state
    naming the refusal (none for a job already initialised). `read_job` still takes it for new,
    so it is initialised once the write is allowed (issue 30.9: such a job kept an empty phase
    for 24 minutes)."""
    facts = read_job(job)
    if facts.phase != "" or facts.state.get("message") == message:
        return []
    state = {
        "phase": c.PENDING,
        "reason": c.FORBIDDEN_REASON,
        "message": message,
        "lastTransitionTime": format_time(now),
    }
    return [PatchStatus(facts.ref, {"state": state})]


def refuse_oversized(
    facts: JobFacts, limits: AdmissionLimits, now: datetime
) -> ReconcileResult | None:
    """A job over the size limits is never expanded (no PodGroup, plugin objects or pods): a new
    one fails at once, saying why; one scaled over them is left as it is until scaled back
    (None: within the limits, or finished)."""
    message = limits.job_error([t.replicas for t in facts.tasks])
    if not message or facts.phase in c.FINISHED_PHASES:
        return None
    if facts.phase == "":
        return _refuse_job(facts.ref, "JobTooLarge", message, now)
    result = ReconcileResult(notes=[message])
    result.actions.append(EmitEvent(facts.ref, "JobTooLarge", message, type="Warning"))
    return result


def job_plugins(
    job: Mapping[str, Any], facts: JobFacts, notes: list[str], now: datetime
) -> tuple[list[Any], ReconcileResult | None]:
    """The job's plugins, or the refusal of a new job whose resources or plugin arguments cannot
    work (admission refuses it; one that bypassed admission is refused here, once). A job
    already running with bad plugin arguments gets none (a note says why): it is never expanded
    further, but its Commands and pods are still handled."""
    unfit = _resource_problem(facts.tasks) if facts.phase == "" else ""
    if unfit:
        return [], _refuse_job(facts.ref, "InvalidResources", unfit, now)
    try:
        return build_plugins(job), None
    except PluginArgsError as exc:
        if facts.phase == "":
            return [], _refuse_job(facts.ref, "InvalidPluginArguments", str(exc), now)
        notes.append(str(exc))
        return [], None


NOT_OWNED = "PluginObjectNotOwned"


def plugin_object_keys(job: Mapping[str, Any]) -> list[ObjectKey]:
    """The objects the job's plugins create or rewrite, for the operator to read (none when
    its plugin arguments are bad: such a job gets no plugins)."""
    try:
        plugins = build_plugins(job)
    except PluginArgsError:
        return []
    return [key for plugin in plugins for key in plugin.object_keys(job)]


def _not_owned(job: Mapping[str, Any], obj: Mapping[str, Any]) -> str:
    m = meta(obj)
    return (
        f"{obj.get('kind')} {m.get('namespace')}/{m.get('name')} exists and is not owned by job "
        f"{meta(job).get('name')}: refusing to take it over (delete or rename it, or rename the "
        "job)"
    )


def _stale(job: Mapping[str, Any], obj: Mapping[str, Any]) -> bool:
    """Whether a VCJob of the same name, since deleted, controls ``obj`` (the garbage collector
    removes it soon: the job being submitted again waits for that instead of failing)."""
    return any(
        ref.get("controller") is True
        and str(ref.get("apiVersion")).startswith(f"{c.BATCH_GROUP}/")
        and ref.get("kind") == "Job"
        and ref.get("name") == meta(job).get("name")
        for ref in meta(obj).get("ownerReferences") or []
    )


def guard_plugin_objects(
    job: Mapping[str, Any],
    facts: JobFacts,
    plugin_objects: Sequence[Mapping[str, Any]],
    now: datetime,
) -> tuple[list[Mapping[str, Any]], ReconcileResult | None]:
    """The plugin objects that exist and the job does not control (never created over nor
    patched), and for a new job with any the refusal: Failed with reason PluginObjectNotOwned
    naming them, or a wait (looked at again in 1 s) while they belong to a deleted job of the
    same name (`controllers.md#job-plugins`)."""
    foreign = [o for o in plugin_objects if not owned_by_job(o, job)]
    if not foreign or facts.phase != "":
        return foreign, None
    message = "; ".join(_not_owned(job, o) for o in foreign)
    if all(_stale(job, o) for o in foreign):
        waiting = ReconcileResult(notes=[f"waiting for a deleted job's objects to go: {message}"])
        waiting.requeue(1.0)
        return foreign, waiting
    return foreign, _refuse_job(facts.ref, NOT_OWNED, message, now)


#: plugin objects the job's pods mount: a pod made while one is foreign would mount it
_MOUNTED_KINDS = frozenset({"Secret", "ConfigMap"})
#: how soon a job that holds back its pods for a foreign plugin object looks again
FOREIGN_RECHECK_SECONDS = 5.0


def spare_foreign(
    job: Mapping[str, Any], result: ReconcileResult, foreign: Sequence[Mapping[str, Any]]
) -> None:
    """Drop the writes of a running job to plugin objects it does not control (one replaced
    under it), with a note naming each; while one the pods mount is foreign (an ssh Secret
    holding another user's key), also the pods it would create, with a Warning event."""
    keys = {(str(o.get("kind")), str(meta(o).get("name"))) for o in foreign}
    mounted = [o for o in foreign if o.get("kind") in _MOUNTED_KINDS]

    def spared(a: Action) -> bool:
        if not isinstance(a, CreateObject | PatchObject):
            return False
        return (a.ref.kind, a.ref.name) in keys or bool(mounted and a.ref.kind == "Pod")

    kept = [a for a in result.actions if not spared(a)]
    if len(kept) == len(result.actions):
        return
    result.actions = kept
    result.notes += [_not_owned(job, o) for o in foreign]
    if mounted:
        message = "; ".join(_not_owned(job, o) for o in mounted) + ": no pod is created"
        result.actions.append(EmitEvent(ObjectRef.of(job), NOT_OWNED, message, type="Warning"))
        result.requeue_after = FOREIGN_RECHECK_SECONDS  # not at once: nothing changes by itself


def live_pods(views: Sequence[PodView], version: int, killer: Killer) -> list[PodView]:
    """The pods of the current version that nothing condemned: the ones events come from."""
    return [
        v for v in views if v.version >= version and not v.marked and v.name not in killer.deleting
    ]


@dataclass(slots=True)
class Choice:
    """The request a reconcile acts on, and the Commands taking it leaves to delete."""

    request: Request | None = None
    action: str = c.SYNC_JOB
    command: ObjectRef | None = None  # the Command taken now: deleted after the status write
    taken: list[Any] = field(default_factory=list)  # Commands taken before: deleted first
    waits: list[float] = field(default_factory=list)  # seconds until each pending timer is due


def choose_request(
    job: Mapping[str, Any],
    facts: JobFacts,
    cres: dict[str, str],
    *,
    commands: Sequence[Mapping[str, Any]],
    current: Sequence[PodView],
    views: Sequence[PodView],
    deleted_pods: Sequence[Mapping[str, Any]],
    podgroup: Mapping[str, Any] | None,
    token: str | None,
    now: datetime,
) -> Choice:
    """A bus Command not yet taken, else (in Pending/Running/Restarting) the first event whose
    policy is due. The policy timers still pending are recorded in ``cres``: kept as they are
    while a Command is taken, none in the other phases (no policy is consulted there)."""
    req, command, taken = take_command(commands, facts.namespace, cres)
    action = (req.action or c.SYNC_JOB) if req is not None else c.SYNC_JOB
    choice = Choice(request=req, action=action, command=command, taken=taken)
    timers = _load_timers(cres.get(TIMERS_KEY))
    if req is None and facts.phase in _ACTIVE_PHASES:
        requests = _requests(
            job, facts.tasks, current, views, deleted_pods, podgroup, facts.version, token, timers
        )
        fired = fire_policies(
            job, facts.tasks, requests, timers, version=facts.version, retry=facts.retry, now=now
        )
        if fired.request is not None:
            choice.request, choice.action = fired.request, fired.action
        timers, choice.waits = fired.timers, fired.waits
    elif req is None:
        timers = {}
    _store_json(cres, TIMERS_KEY, timers)
    return choice


def announce(ref: ObjectRef, choice: Choice, plan: _Plan) -> list[EmitEvent]:
    """The events saying a Command is taken and which action the plan executes."""
    out: list[EmitEvent] = []
    if choice.command is not None:
        text = f"Start to execute command {choice.action}, and clean it up"
        out.append(EmitEvent(ref, c.COMMAND_ISSUED, text))
    if plan.message:
        text = f"Start to execute action {choice.action}: {plan.message}"
        out.append(EmitEvent(ref, "ExecuteAction", text))
    return out


def settle_phase(
    plan: _Plan,
    facts: JobFacts,
    counters: Mapping[str, int],
    task_status: Mapping[str, Any],
    *,
    min_av: int,
) -> bool:
    """With no transition ordered, the phase the pod counts move the job to (the SyncJob rows
    of the state machine); a phase entered without a reason gets its own name as the reason.

    True when that finishes a Pending/Running job: what still runs is then killed (kill(soft),
    finished pods kept; ``plan.full_kill`` is set for :func:`plan_kills`)."""
    finishing = False
    if plan.phase == facts.phase:
        plan.phase = level_phase(
            facts.phase,
            facts.tasks,
            counters,
            task_status,
            min_av=min_av,
            min_success=facts.spec.get("minSuccess"),
            retry=facts.retry,
            max_retry=facts.max_retry,
            restart_min=int(facts.status.get("minAvailable") or min_av),
        )
        finishing = plan.phase in (c.COMPLETED, c.FAILED) and facts.phase in (c.RUNNING, c.PENDING)
        if finishing:
            plan.full_kill = RETAIN_FINISHED
    if plan.phase != facts.phase and not plan.reason:
        plan.reason = plan.phase
    return finishing


def release_podgroup(
    phase: str, podgroup: Mapping[str, Any] | None, kills: Sequence[Any]
) -> list[DeleteObject]:
    """Aborted/Completed/Failed/... jobs hold no PodGroup (Volcano's kill deletes it): the
    deletion of one still there in a kill phase, unless ``kills`` already deletes it."""
    if (
        phase not in _SOFT_KILL_PHASES
        or podgroup is None
        or meta(podgroup).get("deletionTimestamp")
        or any(isinstance(a, DeleteObject) and a.ref.kind == "PodGroup" for a in kills)
    ):
        return []
    return [DeleteObject(ObjectRef.of(_with_kind(podgroup, "PodGroup")))]


def relayout(
    job: Mapping[str, Any], tasks: Sequence[TaskView], plugins: Sequence[Any], cres: dict[str, str]
) -> list[PatchObject]:
    """Plugin objects that follow the task layout (the svc ConfigMap), rewritten when the layout
    recorded in ``cres`` differs. They are written (idempotently) before the status write that
    records the new layout, so a crash or a failed write in between rewrites them again."""
    layout = _layout(tasks)
    if cres.get(LAYOUT_KEY) == layout:
        return []
    cres[LAYOUT_KEY] = layout
    return [
        PatchObject(ObjectRef.of(obj), {"data": obj.get("data") or {}})
        for plugin in plugins
        for obj in plugin.on_job_update(job, tasks)
    ]


def sync_children(
    job: Mapping[str, Any],
    tasks: Sequence[TaskView],
    plugins: Sequence[Any],
    podgroup: Mapping[str, Any] | None,
    plan: _Plan,
    cres: dict[str, str],
    result: ReconcileResult,
    *,
    priority_values: Mapping[str, int] | None,
) -> tuple[list[Any], list[PatchObject]]:
    """In Pending/Running/Restarting with no full kill: the PodGroup kept in line (one of an
    older version goes first: look again in 0.5 s) and the plugin objects on a new layout."""
    if plan.full_kill is not None or plan.phase not in _ACTIVE_PHASES:
        return [], []
    group = sync_podgroup(job, podgroup, plan.version, priority_values=priority_values)
    if podgroup is not None and _pg_version(podgroup) < plan.version:
        result.requeue(0.5)
    return group, relayout(job, tasks, plugins, cres)


def waiting_for_claims(
    job: Mapping[str, Any], missing_claims: Collection[str], result: ReconcileResult
) -> bool:
    """Whether a ``volumes[].volumeClaimName`` the job names does not exist: it then creates no
    pods and stays Pending (a note says which; look again in 5 s)."""
    absent = sorted(
        claim for claim, _m, spec in job_volumes(job) if spec is None and claim in missing_claims
    )
    if absent:
        result.notes.append(f"waiting for PersistentVolumeClaim(s) {', '.join(absent)}")
        result.requeue(5.0)
    return bool(absent)


def may_create_pods(plan: _Plan, podgroup: Mapping[str, Any] | None, *, blocked: bool) -> bool:
    """Pods are created in Pending/Running with no kill under way, once the PodGroup of the
    job's version has left Pending (the scheduler admitted it) and is not being deleted."""
    if blocked or plan.full_kill is not None or plan.target is not None or podgroup is None:
        return False
    pg_phase = str((podgroup.get("status") or {}).get("phase") or "")
    return (
        plan.phase in (c.PENDING, c.RUNNING)
        and _pg_version(podgroup) >= plan.version
        and pg_phase not in ("", c.PG_PENDING)
        and not meta(podgroup).get("deletionTimestamp")
    )


def desired_status(
    job: Mapping[str, Any],
    facts: JobFacts,
    done: Decision,
    cres: dict[str, str],
    *,
    min_av: int,
    no_class: str,
    now: datetime,
) -> JSON:
    """The job status after the decision (``runningDuration`` while it runs)."""
    plan = done.plan
    new_state, conditions = next_state(facts.status, facts.phase, plan, no_class=no_class, now=now)
    desired: JSON = {
        "state": new_state,
        "minAvailable": min_av,
        **done.counters,
        "taskStatusCount": done.task_status,
        "version": plan.version,
        "retryCount": plan.retry,
        "controlledResources": cres,
        "conditions": conditions,
    }
    if plan.phase == c.RUNNING or facts.phase == c.RUNNING:
        created = parse_time(meta(job).get("creationTimestamp"))
        if created is not None:
            secs = int((now - created).total_seconds())
            desired["runningDuration"] = f"{max(0, secs)}s"
    return desired


def write_status(facts: JobFacts, desired: Mapping[str, Any], notes: list[str]) -> list[Any]:
    """The status write taking the job to ``desired`` (none when nothing changed)."""
    spatch = status_patch(facts.status, desired)
    if not spatch:
        return []
    notes.append(f"status: {sorted(spatch)}")
    return [PatchStatus(facts.ref, spatch)]


def ordered_actions(
    choice: Choice,
    condemned_now: Sequence[Any],
    events: Sequence[Any],
    relaid: Sequence[Any],
    status_write: Sequence[Any],
    kills: Sequence[Any],
    creates: Sequence[Any],
) -> list[Any]:
    """Every action in application order. Marks of pods already condemned by the observed status
    go before any new status write (so a new kill token can never un-condemn them); every
    deletion goes after the write that counts the pod as terminating (so a pod that vanishes is
    never mistaken for an eviction); the Command taken now goes after the write recording it."""
    marks = [a for a in condemned_now if isinstance(a, PatchObject)]
    deletes = [a for a in condemned_now if not isinstance(a, PatchObject)]
    command = [DeleteObject(choice.command)] if choice.command is not None else []
    return [
        *choice.taken,
        *marks,
        *events,
        *relaid,
        *status_write,
        *deletes,
        *command,
        *kills,
        *creates,
    ]


def apply_ttl(result: ReconcileResult, facts: JobFacts, new_phase: str, now: datetime) -> None:
    """``ttlSecondsAfterFinished``: delete the finished job once due, else look again then."""
    delete_at = ttl_due(facts.spec, facts.state, facts.phase, new_phase, now=now)
    if delete_at is None:
        return
    if delete_at <= now:
        result.actions.append(DeleteObject(facts.ref))
    else:
        result.requeue((delete_at - now).total_seconds())


@dataclass(slots=True)
class Decision:
    """What the state machine decided in one reconcile, with the kills it takes."""

    choice: Choice
    plan: _Plan
    killer: Killer
    condemned: list[Any]  # the kills the observed status had already decided
    kills: list[Any]  # the kills the plan orders now
    counters: dict[str, int]
    task_status: JSON


def decide(
    job: Mapping[str, Any],
    facts: JobFacts,
    views: Sequence[PodView],
    podgroup: Mapping[str, Any] | None,
    cres: dict[str, str],
    result: ReconcileResult,
    *,
    commands: Sequence[Mapping[str, Any]],
    deleted_pods: Sequence[Mapping[str, Any]],
    min_av: int,
    now: datetime,
) -> Decision:
    """The kills the observed status already decided, the request (a Command, else the first
    event whose policy is due), the state machine's plan for it and the kills it orders, and the
    pod counts after them. Its events go to ``result``, with when to look again for a timer."""
    killer = Killer(facts.namespace)
    token = cres.get(TOKEN_TARGET)
    retain = cres.get(TOKEN_RETAIN, RETAIN_FINISHED)
    pre = condemned(
        views,
        facts.tasks,
        killer,
        phase=facts.phase,
        version=facts.version,
        retain=retain,
        token=token,
    )
    current = live_pods(views, facts.version, killer)
    choice = choose_request(
        job,
        facts,
        cres,
        commands=commands,
        current=current,
        views=views,
        deleted_pods=deleted_pods,
        podgroup=podgroup,
        token=token,
        now=now,
    )
    for wait in choice.waits:
        result.requeue(wait)
    plan = plan_action(
        facts.phase,
        choice.request,
        choice.action,
        retry=facts.retry,
        max_retry=facts.max_retry,
        version=facts.version,
    )
    result.actions += announce(facts.ref, choice, plan)
    kills = plan_kills(plan, views, current, podgroup, killer, cres, version=facts.version)
    counters, tsc = _counts(views, killer.deleting)
    if settle_phase(plan, facts, counters, tsc, min_av=min_av):
        kills += plan_kills(plan, views, current, podgroup, killer, cres, version=facts.version)
        counters, tsc = _counts(views, killer.deleting)
    kills += release_podgroup(plan.phase, podgroup, kills)
    return Decision(choice, plan, killer, pre, kills, counters, tsc)


def carry_out(
    job: Mapping[str, Any],
    facts: JobFacts,
    done: Decision,
    views: Sequence[PodView],
    podgroup: Mapping[str, Any] | None,
    plugins: Sequence[Any],
    cres: dict[str, str],
    result: ReconcileResult,
    *,
    min_av: int,
    now: datetime,
    priority_values: Mapping[str, int] | None,
    missing_claims: Collection[str],
    pod_batch: int,
) -> None:
    """What the decision leaves to do, into ``result`` in application order: the children
    (PodGroup, plugin objects, the next batch of missing pods), the status write, and the job's
    deletion once ``ttlSecondsAfterFinished`` is due."""
    plan = done.plan
    creates, relaid = sync_children(
        job, facts.tasks, plugins, podgroup, plan, cres, result, priority_values=priority_values
    )
    blocked = waiting_for_claims(job, missing_claims, result)
    no_class = _missing_priority_classes(job, facts.tasks, priority_values)
    _report_missing_classes(result, facts.ref, podgroup, facts.state, no_class)
    if may_create_pods(plan, podgroup, blocked=blocked or bool(no_class)):
        present = {v.name for v in views}
        creates += _missing_pods(
            job, facts.tasks, views, present, plugins, plan=plan, limit=max(1, pod_batch)
        )
    _record_retained(cres, views, done.killer, plan)
    desired = desired_status(job, facts, done, cres, min_av=min_av, no_class=no_class, now=now)
    written = write_status(facts, desired, result.notes)
    result.actions = ordered_actions(
        done.choice, done.condemned, result.actions, relaid, written, done.kills, creates
    )
    if written or done.kills or creates or done.condemned or relaid:
        result.requeue(0)
    apply_ttl(result, facts, plan.phase, now)


def reconcile_job(
    job: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    podgroup: Mapping[str, Any] | None,
    *,
    now: datetime,
    commands: Sequence[Mapping[str, Any]] = (),
    deleted_pods: Sequence[Mapping[str, Any]] = (),
    priority_values: Mapping[str, int] | None = None,
    missing_claims: Collection[str] = (),
    pod_batch: int = c.POD_BATCH,
    limits: AdmissionLimits = DEFAULT_LIMITS,
    plugin_objects: Sequence[Mapping[str, Any]] = (),
) -> ReconcileResult:
    """Everything the controller wants done for one VCJob, in application order.

    `pods` are the job's pods (any version), `podgroup` its PodGroup `<job>-<uid>` or None,
    `commands` the bus Commands targeting it, `deleted_pods` pods the watch saw disappear that the
    controller did not delete (they raise PodEvicted), `priority_values` PriorityClass values by
    name (task order for minResources), `missing_claims` the `volumes[].volumeClaimName`s that do
    not exist (the job then creates no pods and stays Pending, retried), `pod_batch` the most
    pods one reconcile creates, `limits` the size limits of the job (as admission's),
    `plugin_objects` the existing objects of `plugin_object_keys(job)`."""
    if meta(job).get("deletionTimestamp"):
        return ReconcileResult()
    facts = read_job(job)
    foreign, refused = guard_plugin_objects(job, facts, plugin_objects, now)
    refused = refuse_oversized(facts, limits, now) or refused
    if refused is not None:
        return refused
    min_av = job_min_available(job)
    result = ReconcileResult(notes=list(facts.notes))
    plugins, refused = job_plugins(job, facts, result.notes, now)
    if refused is not None:
        return refused
    cres: dict[str, str] = dict(facts.status.get("controlledResources") or {})
    if facts.phase == "":
        result.actions += initialise(
            job,
            facts.ref,
            facts.tasks,
            plugins,
            cres,
            min_av=min_av,
            now=now,
            priority_values=priority_values,
        )
        result.requeue(0)
        return result

    views = sorted((PodView.of(p) for p in pods), key=lambda v: (v.task, v.index, v.name))
    done = decide(
        job,
        facts,
        views,
        podgroup,
        cres,
        result,
        commands=commands,
        deleted_pods=deleted_pods,
        min_av=min_av,
        now=now,
    )
    carry_out(
        job,
        facts,
        done,
        views,
        podgroup,
        plugins,
        cres,
        result,
        min_av=min_av,
        now=now,
        priority_values=priority_values,
        missing_claims=missing_claims,
        pod_batch=pod_batch,
    )
    spare_foreign(job, result, foreign)
    return result


def _missing_pods(
    job: Mapping[str, Any],
    tasks: Sequence[TaskView],
    views: Sequence[PodView],
    present: Collection[str],
    plugins: Sequence[Any],
    *,
    plan: _Plan,
    limit: int,
) -> list[CreateObject]:
    """The first `limit` missing pods, task by task, of the tasks whose dependencies are ready.

    Each index either names a pod that exists or adds one, so this takes time in the pods that
    exist plus `limit`, and memory in `limit` only (the rest come in the next reconciles)."""
    name = str(meta(job).get("name"))
    out: list[CreateObject] = []
    for task in tasks:
        if not _dependencies_ready(task, tasks, views):
            continue
        for i in range(task.replicas):
            if len(out) >= limit:
                return out
            if pod_name(name, task.name, i) in present:
                continue
            pod = build_pod(job, task, i, version=plan.version, retry_count=plan.retry)
            for plugin in plugins:
                plugin.on_pod_create(job, tasks, pod, task, i)
            out.append(CreateObject(pod))
    return out


NO_PRIORITY_CLASS = "PriorityClassNotFound"


def _resource_problem(tasks: Sequence[TaskView]) -> str:
    """Why the API server would refuse every pod of the job, or the scheduler could not
    account it: a quantity that does not parse or exceeds Kubernetes' int64 bound, or a
    fraction of an extended resource ("" when none)."""
    for t in tasks:
        spec = t.template.get("spec") or {}
        for group in ("initContainers", "containers"):
            for cont in spec.get(group) or []:
                if not isinstance(cont, Mapping):
                    continue
                res = cont.get("resources") or {}
                for kind in ("requests", "limits"):
                    for rname, value in (res.get(kind) or {}).items():
                        where = f"task {t.name} container {cont.get('name')} {kind}[{rname}]"
                        try:
                            amount = to_internal(str(rname), value)
                        except (QuantityError, ValueError, TypeError) as exc:
                            return f"{where}: {exc}"
                        if is_extended_resource(str(rname)) and amount % 1000:
                            return f"{where}: {value!r} must be an integer"
    return ""


def _missing_priority_classes(
    job: Mapping[str, Any], tasks: Sequence[TaskView], values: Mapping[str, int] | None
) -> str:
    """Why no pod of the job can be created when a PriorityClass its pods name (the task
    template's, else the job's) does not exist ("" when all exist, or when `values` is None:
    unknown). The API server's Priority admission refuses such pods with a 403."""
    if values is None:
        return ""
    missing = sorted(n for n in priority_class_names(job, tasks) if n not in values)
    if not missing:
        return ""
    names = ", ".join(f'"{n}"' for n in missing)
    return (
        f"PriorityClass {names} does not exist: the API server refuses the job's pods until it is "
        "created (kubectl get priorityclass)"
    )


def _report_missing_classes(
    result: ReconcileResult,
    ref: ObjectRef,
    podgroup: Mapping[str, Any] | None,
    state: Mapping[str, Any],
    message: str,
) -> None:
    """Say it once, on the job and on its PodGroup (`tephra job why` lists the PodGroup's
    events), and look again in MISS_RELIST seconds (when the controller reads the list again
    for a missing class). Nothing when ``message`` is empty (every class exists)."""
    if not message:
        return
    result.notes.append(message)
    result.requeue(MISS_RELIST)
    if state.get("reason") == NO_PRIORITY_CLASS and state.get("message") == message:
        return
    result.actions.append(EmitEvent(ref, NO_PRIORITY_CLASS, message, type="Warning"))
    if podgroup is not None:
        pg_ref = ObjectRef.of(_with_kind(podgroup, "PodGroup"))
        result.actions.append(EmitEvent(pg_ref, NO_PRIORITY_CLASS, message, type="Warning"))


def _refuse_job(ref: ObjectRef, reason: str, message: str, now: datetime) -> ReconcileResult:
    """Fail a new job the controller cannot act on, saying why (a Warning event too)."""
    result = ReconcileResult(notes=[message])
    result.actions.append(EmitEvent(ref, reason, message, type="Warning"))
    stamp = format_time(now)
    state = {"phase": c.FAILED, "reason": reason, "message": message}
    status = {
        "state": {**state, "lastTransitionTime": stamp},
        "conditions": [{"status": c.FAILED, "lastTransitionTime": stamp}],
    }
    result.actions.append(PatchStatus(ref, status))
    return result


def _count(value: Any) -> int:
    """A counter of the status (version, retryCount): 0 unless a non-negative integer."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _layout(tasks: Sequence[TaskView]) -> str:
    """The task layout recorded in the status (`LAYOUT_KEY`): ``name=replicas`` per task."""
    return ",".join(f"{t.name}={t.replicas}" for t in tasks)


def _store_json(cres: dict[str, str], key: str, value: Mapping[str, Any]) -> None:
    """Record ``value`` as compact JSON under ``key`` of the status; none when it is empty."""
    if value:
        cres[key] = json.dumps(value, sort_keys=True, separators=(",", ":"))
    else:
        cres.pop(key, None)


def _empty_like(v: Any) -> Any:
    if isinstance(v, dict):
        return {}
    if isinstance(v, list):
        return []
    return None


def _with_kind(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    if obj.get("kind"):
        return obj
    return {**obj, "kind": kind, "apiVersion": c.SCHED_API}


def _pg_version(pg: Mapping[str, Any] | None) -> int:
    if pg is None:
        return -1
    try:
        return int((meta(pg).get("annotations") or {}).get(c.PODGROUP_JOB_VERSION, 0))
    except (TypeError, ValueError):
        return 0


def _running_check(
    tasks: Sequence[TaskView],
    counters: Mapping[str, int],
    *,
    total: int,
    min_av: int,
    min_success: Any,
    task_succeeded: Mapping[str, int],
) -> str:
    """Running + SyncJob: rows (a)-(c) of the table; (d) is applied by the caller."""
    succeeded, failed = counters["succeeded"], counters["failed"]
    if total == 0:
        return c.RUNNING
    if min_success is not None and succeeded >= int(min_success):
        return c.COMPLETED
    if succeeded + failed >= total and counters["pending"] + counters["running"] == 0:
        return _finished_phase(
            tasks, counters, min_av=min_av, min_success=min_success, task_succeeded=task_succeeded
        )
    return c.RUNNING


def _finished_phase(
    tasks: Sequence[TaskView],
    counters: Mapping[str, int],
    *,
    min_av: int,
    min_success: Any,
    task_succeeded: Mapping[str, int],
) -> str:
    succeeded = counters["succeeded"]
    if min_av >= sum(t.min_available for t in tasks):
        short = [
            t
            for t in tasks
            if t.min_available > 0 and task_succeeded.get(t.name, 0) < t.min_available
        ]
        if short:
            return c.FAILED
    if min_success is not None and succeeded < int(min_success):
        return c.FAILED
    if succeeded >= min_av:
        return c.COMPLETED
    return c.FAILED


def _dependencies_ready(
    task: TaskView, tasks: Sequence[TaskView], views: Sequence[PodView]
) -> bool:
    dep = task.depends_on
    if not dep or not dep.get("name"):
        return True
    names = list(dep.get("name") or [])
    iteration = str(dep.get("iteration") or "all")

    def ready(tname: str) -> bool:
        t = next((x for x in tasks if x.name == tname), None)
        if t is None:
            return True
        ok = sum(1 for v in views if v.task == tname and (v.phase == "Succeeded" or v.ready()))
        return ok >= t.min_available

    if iteration == "any" and len(names) > 1:
        return any(ready(n) for n in names)
    return all(ready(n) for n in names)


def _load_timers(raw: Any) -> dict[str, JSON]:
    """The pending policy timers recorded in the status (`TIMERS_KEY`); {} when absent/invalid."""
    try:
        data = json.loads(raw) if raw else {}
    except (TypeError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): v for k, v in data.items() if isinstance(v, dict)}


def _load_counts(raw: Any) -> dict[str, int]:
    """Per-task counts recorded as JSON in the status (`RETAINED_KEY`); {} when absent/invalid."""
    try:
        data = json.loads(raw) if raw else {}
        return {str(k): int(v) for k, v in data.items()} if isinstance(data, dict) else {}
    except (TypeError, ValueError):
        return {}


def _timer_key(r: Request, version: int) -> str:
    """One timer per event occurrence: job version, event, task and pod (name and uid)."""
    parts = [f"v{version}", r.event, r.task or ""]
    if r.pod is not None:
        parts += [r.pod.name, r.pod.uid]
    return "/".join(parts)


def _timer_entry(r: Request, since: datetime, *, version: int, retry: int) -> JSON:
    entry: JSON = {"since": format_time(since)}
    if r.event == c.POD_EVICTED:
        entry["evicted"] = (
            _pod_stub(r.pod)
            if r.pod is not None
            else _pod_stub(PodView.of({}), task=r.task or "", version=version, retry=retry)
        )
    return entry


def _pod_stub(
    pv: PodView, *, task: str | None = None, version: int | None = None, retry: int | None = None
) -> JSON:
    """What identifies an evicted pod once it is gone (name, uid, task, index, version, retry,
    partition): enough to raise its PodEvicted again and to aim RestartPod/Partition at it. A
    task's eviction found from the counts has no pod: an empty name and the job's retry count."""
    stub: JSON = {
        "metadata": {
            "name": pv.name if task is None else "",
            "uid": pv.uid if task is None else "",
            "annotations": {
                c.TASK_SPEC: pv.task if task is None else task,
                c.TASK_INDEX: str(pv.index),
                c.JOB_VERSION: str(pv.version if version is None else version),
                c.JOB_RETRY_COUNT: str(pv.retry if retry is None else retry),
            },
        }
    }
    if task is None and pv.partition:
        stub["metadata"]["labels"] = {c.PARTITION_ID: pv.partition}
    return stub


def _remembered_evictions(
    tasks: Sequence[TaskView],
    current: Sequence[PodView],
    views: Sequence[PodView],
    timers: Mapping[str, JSON],
    version: int,
    token: str | None,
) -> list[Request]:
    """Timed PodEvicted events of pods that are gone, from the timers, until the pod's
    replacement runs (Volcano cancels a delayed PodEvicted action when the pod becomes Running;
    for a task's eviction found from the counts: until the task has all its pods, none Pending).
    A kill of the pod's scope issued since (version, kill token) cancels them too."""
    out: list[Request] = []
    uids = {v.uid for v in views if v.uid}
    by_name = {v.name: v for v in current}
    replicas = {t.name: t.replicas for t in tasks}
    for entry in timers.values():
        stub = entry.get("evicted")
        if not isinstance(stub, Mapping):
            continue
        dv = PodView.of(stub)
        if dv.version < version or dv.task not in replicas or _token_matches(token, dv):
            continue
        if dv.name:
            repl = by_name.get(dv.name)
            if dv.uid in uids or (repl is not None and repl.phase in ("Running", "Succeeded")):
                continue
            out.append(Request(event=c.POD_EVICTED, task=dv.task, pod=dv))
        else:
            mine = [v for v in current if v.task == dv.task and not v.deleting]
            if len(mine) >= replicas[dv.task] and all(v.phase != "Pending" for v in mine):
                continue
            out.append(Request(event=c.POD_EVICTED, task=dv.task))
    return out


def _requests(
    job: Mapping[str, Any],
    tasks: Sequence[TaskView],
    current: Sequence[PodView],
    views: Sequence[PodView],
    deleted_pods: Sequence[Mapping[str, Any]],
    podgroup: Mapping[str, Any] | None,
    version: int,
    token: str | None,
    timers: Mapping[str, JSON],
) -> list[Request]:
    """Events implied by the observed state (and by the timers of pods gone), in a stable order:
    evictions (pods the watch saw go, remembered ones, pods missing against the counts, pods
    being deleted), then the pods' own events, the tasks' and the PodGroup's."""
    out = evictions_seen(deleted_pods, views, version, token)
    seen = {_timer_key(r, version) for r in out}
    remembered = _remembered_evictions(tasks, current, views, timers, version, token)
    out += [r for r in remembered if _timer_key(r, version) not in seen]
    out += vanished_pods(job, tasks, views, version, explicit={r.task for r in out})
    out += evictions_under_way(views, version, token)
    out += pod_events(current)
    out += task_events(tasks, current)
    out += podgroup_events(podgroup)
    return out


def evictions_seen(
    deleted_pods: Sequence[Mapping[str, Any]],
    views: Sequence[PodView],
    version: int,
    token: str | None,
) -> list[Request]:
    """PodEvicted for each pod the watch saw disappear that the controller did not delete: of
    the current version, not marked, not back under its name, not aimed at by a kill token."""
    present = {v.name for v in views}
    out: list[Request] = []
    for d in deleted_pods:
        dv = PodView.of(d)
        if dv.version < version or dv.marked or dv.name in present or _token_matches(token, dv):
            continue
        since = parse_time(meta(d).get("deletionTimestamp"))
        out.append(Request(event=c.POD_EVICTED, task=dv.task, pod=dv, since=since))
    return out


def vanished_pods(
    job: Mapping[str, Any],
    tasks: Sequence[TaskView],
    views: Sequence[PodView],
    version: int,
    *,
    explicit: Collection[str | None],
) -> list[Request]:
    """PodEvicted of each task (not already in ``explicit``) with fewer live pods than the last
    status write counted: pods that vanished while nobody watched (controller down).

    The controller deletes pods only after a write that already counts them as terminating, so
    fewer live pods now means someone else deleted one. Only pods of the current version count:
    the pods of an older version the last write also counted (finished pods a kill kept,
    `RETAINED_KEY`) raise no event when they go (Volcano syncs an old-version pod's deletion:
    it is simply recreated)."""
    status = job.get("status") or {}
    recorded = status.get("taskStatusCount") or {}
    retained = _load_counts((status.get("controlledResources") or {}).get(RETAINED_KEY))
    out: list[Request] = []
    for t in tasks:
        phases = (recorded.get(t.name) or {}).get("phase") or {}
        counted = sum(int(n or 0) for n in phases.values()) - retained.get(t.name, 0)
        live = sum(1 for v in views if v.task == t.name and not v.deleting and v.version >= version)
        if live < counted and t.name not in explicit:
            out.append(Request(event=c.POD_EVICTED, task=t.name))
    return out


def evictions_under_way(views: Sequence[PodView], version: int, token: str | None) -> list[Request]:
    """PodEvicted for each pod of the current version being deleted by someone else (not marked
    by the controller, not aimed at by a kill token), timed from its deletionTimestamp."""
    return [
        Request(
            event=c.POD_EVICTED,
            task=pv.task,
            pod=pv,
            since=parse_time(meta(pv.pod).get("deletionTimestamp")),
        )
        for pv in views
        if pv.deleting and not pv.marked and pv.version >= version and not _token_matches(token, pv)
    ]


def pod_events(current: Sequence[PodView]) -> list[Request]:
    """PodFailed (with the exit code, timed from the failure) and PodPending (timed from the
    pod's creation) of the live pods."""
    out: list[Request] = []
    for pv in current:
        if pv.phase == "Failed":
            out.append(
                Request(
                    event=c.POD_FAILED,
                    task=pv.task,
                    pod=pv,
                    exit_code=pv.exit_code(),
                    since=pv.failed_at(),
                )
            )
        elif pv.phase == "Pending":
            since = parse_time(meta(pv.pod).get("creationTimestamp"))
            out.append(Request(event=c.POD_PENDING, task=pv.task, pod=pv, since=since))
    return out


def task_events(tasks: Sequence[TaskView], current: Sequence[PodView]) -> list[Request]:
    """Per task: TaskCompleted once all its replicas succeeded (timed from the last pod's
    finish, when every one is known), TaskFailed once its unfinished pods restarted maxRetry
    times."""
    out: list[Request] = []
    for t in tasks:
        mine = [v for v in current if v.task == t.name]
        done = [v for v in mine if v.phase == "Succeeded"]
        if t.replicas > 0 and len(done) >= t.replicas:
            ends = [e for v in done if (e := v.finished_at()) is not None]
            since = max(ends) if len(ends) == len(done) else None
            out.append(Request(event=c.TASK_COMPLETED, task=t.name, since=since))
        restarts = sum(v.restarts() for v in mine if v.phase in ("Running", "Pending"))
        if t.max_retry >= 0 and restarts >= t.max_retry and restarts > 0:
            out.append(Request(event=c.TASK_FAILED, task=t.name))
    return out


def podgroup_events(podgroup: Mapping[str, Any] | None) -> list[Request]:
    """Unknown while the PodGroup is Unknown, timed from its Unschedulable condition (the group
    turns Unknown in the session that sets that condition)."""
    pg_status = (podgroup or {}).get("status") or {}
    if pg_status.get("phase") != c.PG_UNKNOWN:
        return []
    marks = [
        when
        for cond in pg_status.get("conditions") or []
        if cond.get("type") == "Unschedulable"
        and str(cond.get("status")) == "True"
        and (when := parse_time(cond.get("lastTransitionTime"))) is not None
    ]
    return [Request(event=c.UNKNOWN_EVENT, since=max(marks) if marks else None)]


__all__ = ["PodView", "Request", "podgroup_name", "policy_action", "reconcile_job", "select_action"]
