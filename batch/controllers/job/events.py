"""Deriving the policy events (PodFailed, PodEvicted, TaskCompleted, ...) from observed state."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from batch.api.jobview import JobView, TaskView
from batch.controllers import constants as c
from batch.controllers.job.base import JSON, RETAINED_KEY, PodView, Request
from batch.controllers.job.helpers import _load_counts, _timer_key
from batch.controllers.job.policies import _token_matches
from batch.controllers.jobspec import meta
from batch.controllers.timeutil import parse_time


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
    job: JobView,
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
    remembered = _remembered_evictions(job.tasks, current, views, timers, version, token)
    out += [r for r in remembered if _timer_key(r, version) not in seen]
    out += vanished_pods(job, views, version, explicit={r.task for r in out})
    out += evictions_under_way(views, version, token)
    out += pod_events(current)
    out += task_events(job.tasks, current)
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
    job: JobView,
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
    retained = _load_counts(job.status.controlled_resources.get(RETAINED_KEY))
    out: list[Request] = []
    for t in job.tasks:
        counted = job.status.counted(t.name) - retained.get(t.name, 0)
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
