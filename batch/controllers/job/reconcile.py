"""The reconcile entry: `reconcile_job` reads, decides and carries out (see the package doc)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from batch.api.admission import DEFAULT_LIMITS, AdmissionLimits
from batch.api.jobview import JobView
from batch.controllers import constants as c
from batch.controllers.effects import (
    Action,
    DeleteObject,
    EmitEvent,
    ObjectRef,
    PatchObject,
    PatchStatus,
    ReconcileResult,
)
from batch.controllers.job.base import (
    _ACTIVE_PHASES,
    _SOFT_KILL_PHASES,
    JSON,
    LAYOUT_KEY,
    RETAIN_FINISHED,
    TIMERS_KEY,
    TOKEN_RETAIN,
    TOKEN_TARGET,
    PodView,
    Request,
    _Plan,
)
from batch.controllers.job.events import _requests
from batch.controllers.job.facts import JobFacts, read_job, refuse_oversized
from batch.controllers.job.helpers import (
    _layout,
    _load_timers,
    _pg_version,
    _store_json,
    _with_kind,
)
from batch.controllers.job.plugin_objects import guard_plugin_objects, job_plugins, spare_foreign
from batch.controllers.job.pods import (
    _missing_pods,
    _missing_priority_classes,
    _report_missing_classes,
)
from batch.controllers.job.policies import Killer, _counts, condemned, fire_policies
from batch.controllers.job.transitions import (
    _record_retained,
    initialise,
    level_phase,
    next_state,
    plan_action,
    plan_kills,
    status_patch,
    sync_podgroup,
    take_command,
    ttl_due,
)
from batch.controllers.jobspec import job_volumes, meta
from batch.controllers.plugins import JobPlugin
from batch.controllers.timeutil import parse_time


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
    taken: list[Action] = field(default_factory=list)  # Commands taken before: deleted first
    waits: list[float] = field(default_factory=list)  # seconds until each pending timer is due


def choose_request(
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
            facts.job, current, views, deleted_pods, podgroup, facts.version, token, timers
        )
        fired = fire_policies(
            facts.job, requests, timers, version=facts.version, retry=facts.retry, now=now
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
            min_success=facts.job.min_success,
            retry=facts.retry,
            max_retry=facts.max_retry,
            restart_min=facts.status.min_available or min_av,
        )
        finishing = plan.phase in (c.COMPLETED, c.FAILED) and facts.phase in (c.RUNNING, c.PENDING)
        if finishing:
            plan.full_kill = RETAIN_FINISHED
    if plan.phase != facts.phase and not plan.reason:
        plan.reason = plan.phase
    return finishing


def release_podgroup(
    phase: str, podgroup: Mapping[str, Any] | None, kills: Sequence[Action]
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


def relayout(job: JobView, plugins: Sequence[JobPlugin], cres: dict[str, str]) -> list[PatchObject]:
    """Plugin objects that follow the task layout (the svc ConfigMap), rewritten when the layout
    recorded in ``cres`` differs. They are written (idempotently) before the status write that
    records the new layout, so a crash or a failed write in between rewrites them again."""
    layout = _layout(job.tasks)
    if cres.get(LAYOUT_KEY) == layout:
        return []
    cres[LAYOUT_KEY] = layout
    return [
        PatchObject(ObjectRef.of(obj), {"data": obj.get("data") or {}})
        for plugin in plugins
        for obj in plugin.on_job_update(job, job.tasks)
    ]


def sync_children(
    job: JobView,
    plugins: Sequence[JobPlugin],
    podgroup: Mapping[str, Any] | None,
    plan: _Plan,
    cres: dict[str, str],
    result: ReconcileResult,
    *,
    priority_values: Mapping[str, int] | None,
) -> tuple[list[Action], list[PatchObject]]:
    """In Pending/Running/Restarting with no full kill: the PodGroup kept in line (one of an
    older version goes first: look again in 0.5 s) and the plugin objects on a new layout."""
    if plan.full_kill is not None or plan.phase not in _ACTIVE_PHASES:
        return [], []
    pv = priority_values
    group = sync_podgroup(job, podgroup, plan.version, priority_values=pv)
    if podgroup is not None and _pg_version(podgroup) < plan.version:
        result.requeue(0.5)
    return group, relayout(job, plugins, cres)


def waiting_for_claims(
    job: JobView, missing_claims: Collection[str], result: ReconcileResult
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
        created = parse_time(facts.job.created or None)
        if created is not None:
            secs = int((now - created).total_seconds())
            desired["runningDuration"] = f"{max(0, secs)}s"
    return desired


def write_status(facts: JobFacts, desired: Mapping[str, Any], notes: list[str]) -> list[Action]:
    """The status write taking the job to ``desired`` (none when nothing changed)."""
    spatch = status_patch(facts.status, desired)
    if not spatch:
        return []
    notes.append(f"status: {sorted(spatch)}")
    return [PatchStatus(facts.ref, spatch)]


def ordered_actions(
    choice: Choice,
    condemned_now: Sequence[Action],
    events: Sequence[Action],
    relaid: Sequence[Action],
    status_write: Sequence[Action],
    kills: Sequence[Action],
    creates: Sequence[Action],
) -> list[Action]:
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
    delete_at = ttl_due(facts.job, facts.phase, new_phase, now=now)
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
    condemned: list[Action]  # the kills the observed status had already decided
    kills: list[Action]  # the kills the plan orders now
    counters: dict[str, int]
    task_status: JSON


def decide(
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
    facts: JobFacts,
    done: Decision,
    views: Sequence[PodView],
    podgroup: Mapping[str, Any] | None,
    plugins: Sequence[JobPlugin],
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
    plan, job = done.plan, facts.job
    creates, relaid = sync_children(
        job, plugins, podgroup, plan, cres, result, priority_values=priority_values
    )
    blocked = waiting_for_claims(job, missing_claims, result)
    no_class = _missing_priority_classes(job, priority_values)
    _report_missing_classes(result, facts.ref, podgroup, facts.status, no_class)
    if may_create_pods(plan, podgroup, blocked=blocked or bool(no_class)):
        present = {v.name for v in views}
        creates += _missing_pods(job, views, present, plugins, plan=plan, limit=max(1, pod_batch))
    _record_retained(cres, views, done.killer, plan)
    desired = desired_status(facts, done, cres, min_av=min_av, no_class=no_class, now=now)
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
    facts = read_job(job)
    if facts.job.deleting:
        return ReconcileResult()
    foreign, refused = guard_plugin_objects(facts, plugin_objects, now)
    refused = refuse_oversized(facts, limits, now) or refused
    if refused is not None:
        return refused
    min_av = facts.min_available
    result = ReconcileResult(notes=list(facts.notes))
    plugins, refused = job_plugins(facts, result.notes, now)
    if refused is not None:
        return refused
    cres: dict[str, str] = dict(facts.status.controlled_resources)
    if facts.phase == "":
        result.actions += initialise(
            facts.job,
            facts.ref,
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
    spare_foreign(facts, result, foreign)
    return result
