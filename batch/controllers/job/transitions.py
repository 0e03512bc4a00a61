"""The job state machine: initialisation, Commands, the action plan and the next phase."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from batch.api.jobview import JobStatusView, JobView, TaskView
from batch.controllers import constants as c
from batch.controllers.effects import (
    Action,
    CreateObject,
    DeleteObject,
    ObjectRef,
    PatchObject,
    PatchStatus,
)
from batch.controllers.job.base import (
    _ACTIVE_PHASES,
    _FULL_KILL_PHASES,
    _TARGETED,
    JSON,
    LAYOUT_KEY,
    RETAIN_FINISHED,
    RETAIN_NONE,
    RETAINED_KEY,
    TOKEN_RETAIN,
    TOKEN_TARGET,
    PodView,
    Request,
    _Plan,
)
from batch.controllers.job.facts import initialise_refused
from batch.controllers.job.helpers import (
    _empty_like,
    _layout,
    _pg_version,
    _running_check,
    _store_json,
    _with_kind,
)
from batch.controllers.job.pods import NO_PRIORITY_CLASS
from batch.controllers.job.policies import Killer, _target_of, _token_matches
from batch.controllers.jobspec import (
    build_podgroup,
    build_pvc,
    job_volumes,
    meta,
    podgroup_spec,
)
from batch.controllers.plugins import JobPlugin
from batch.controllers.timeutil import format_time, merge_patch, parse_time


def initialise(
    job: JobView,
    ref: ObjectRef,
    plugins: Sequence[JobPlugin],
    cres: dict[str, str],
    *,
    min_av: int,
    now: datetime,
    priority_values: Mapping[str, int] | None,
) -> list[Action]:
    """A new job's first reconcile: plugin objects, PVCs, the Pending status and the PodGroup
    (`volcano-semantics.md#job-podgroup-and-pods`); records what it made in ``cres``."""
    actions: list[Action] = []
    for plugin in plugins:
        actions += [CreateObject(obj) for obj in plugin.on_job_add(job, job.tasks)]
        cres[f"plugin-{plugin.name}"] = plugin.name
    for claim, _mount, claim_spec in job_volumes(job):
        if claim_spec is not None:
            actions.append(CreateObject(build_pvc(job, claim, claim_spec)))
        cres[f"volume-pvc-{claim}"] = claim
    cres[LAYOUT_KEY] = _layout(job.tasks)
    state: JSON = {"phase": c.PENDING, "lastTransitionTime": format_time(now)}
    if initialise_refused(job.status):
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
    pg = build_podgroup(job, version=0, priority_values=priority_values)
    actions.append(CreateObject(pg))
    return actions


def take_command(
    commands: Sequence[Mapping[str, Any]], ns: str, cres: dict[str, str]
) -> tuple[Request | None, ObjectRef | None, list[Action]]:
    """The oldest bus Command not yet taken becomes the request (its uid recorded in ``cres``);
    Commands already taken are deleted (`volcano-semantics.md#commands`)."""
    req: Request | None = None
    command_ref: ObjectRef | None = None
    done: list[Action] = []
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
    job: JobView,
    podgroup: Mapping[str, Any] | None,
    version: int,
    *,
    priority_values: Mapping[str, int] | None,
) -> list[Action]:
    """Keep the job's PodGroup in line: create it, delete one of an older job version, or patch
    the fields Volcano updates (minMember, minTaskMember, minResources, priorityClassName)."""
    if podgroup is None:
        pv = priority_values
        return [CreateObject(build_podgroup(job, version=version, priority_values=pv))]
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
    min_success: int | None,
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
    status: JobStatusView, phase: str, plan: _Plan, *, no_class: str, now: datetime
) -> tuple[JSON, list[JSON]]:
    """``status.state`` and ``status.conditions`` after the plan (a phase entered moves its
    condition to the end); a missing PriorityClass is the reason of a Pending job."""
    state: JSON = dict(status.state)
    conditions = list(status.raw.get("conditions") or [])
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


def ttl_due(job: JobView, phase: str, new_phase: str, *, now: datetime) -> datetime | None:
    """When ``ttlSecondsAfterFinished`` deletes a finished job (None: never, or not finished)."""
    ttl = job.ttl_seconds_after_finished
    if ttl is None or new_phase not in c.FINISHED_PHASES:
        return None
    since = now if new_phase != phase else parse_time(job.status.last_transition or None) or now
    return since + timedelta(seconds=ttl)


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


def status_patch(status: JobStatusView, desired: Mapping[str, Any]) -> JSON | None:
    """The merge patch from the observed ``status`` to ``desired`` (None: nothing to write;
    a refreshed ``runningDuration`` alone is not worth a write)."""
    observed = {k: status.raw.get(k) for k in desired}
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
) -> list[Action]:
    """The deletions the plan orders now: a full kill (every pod, finished ones kept when it
    retains them; the job version goes up and the PodGroup goes) or a targeted one (the pods
    of one task, pod or partition, marked first). The kill tokens are recorded in ``cres``."""
    out: list[Action] = []
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
