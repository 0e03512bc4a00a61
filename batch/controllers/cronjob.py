"""The CronJob controller's decisions: given a CronJob, the Jobs of its namespace and `now`, what to
create, delete and write (Volcano's `pkg/controllers/cronjob`, which follows Kubernetes' CronJob
controller).

A sync, in order:
1. Finished children (Completed, Failed, Terminated) leave `status.active`; a Completed one's
   state.lastTransitionTime advances `lastSuccessfulTime`. The oldest finished children beyond
   `successfulJobsHistoryLimit` (Completed) and `failedJobsHistoryLimit` (the other finished
   phases, as Kubernetes counts them) are deleted.
2. `status.active` loses references to Jobs that are gone or were recreated under another uid;
   an unfinished child missing from it is taken in when it was started for a time at or after
   `lastScheduleTime` (the Job an earlier sync created: a Job's uid is only known once the API
   server made it, so a creation is recorded by the next sync), otherwise it is reported
   (`OrphanedJob`).
3. Suspended: nothing is started. Otherwise the most recent start time that is due and not
   older than `startingDeadlineSeconds` is started, unless it was already (`lastScheduleTime`);
   over 100 missed times raise `TooManyMissedTimes` (and the most recent still starts).
4. `concurrencyPolicy`: Forbid skips while a child runs (the start stays due, so it happens when
   the child ends, deadline permitting); Replace deletes the running children first.
5. The Job is `<cronjob>-<scheduled Unix minutes>`, with the template's labels and annotations,
   `volcano.sh/cronjob-scheduled-timestamp` (RFC 3339 in `timeZone`) and the CronJob as its
   controller owner. The sync asks to run again at the next start time (plus 100 ms, for clock
   skew) or at once after a creation.

Start times come from APScheduler's CronTrigger (calendar and time-zone arithmetic) over the
field values `batch.api.admission.cronjob` parses, with cron's rule that a day-of-month and a
day-of-week both restricted match either (an OrTrigger of the two).
"""

from __future__ import annotations

import copy
import zoneinfo
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.combining import OrTrigger
from apscheduler.triggers.cron import CronTrigger

from batch.api.admission.cronjob import CronSchedule, parse_cron_schedule
from batch.api.cronjob import CRONJOB_SCHEDULED_TIMESTAMP
from batch.api.events import reference_of
from batch.controllers import constants as c
from batch.controllers.effects import (
    CreateObject,
    DeleteObject,
    EmitEvent,
    ObjectRef,
    PatchStatus,
    ReconcileResult,
)
from batch.controllers.jobspec import meta
from batch.controllers.timeutil import format_time, parse_duration, parse_time

__all__ = [
    "MANY_MISSED",
    "Schedule",
    "job_name",
    "reconcile_cronjob",
    "schedule_of",
]

JSON = dict[str, Any]
#: More missed start times than this raise TooManyMissedTimes (Kubernetes' and Volcano's 100).
MANY_MISSED = 100
#: Padding on the requeue at the next start time, against clock skew (Volcano's 100 ms).
NEXT_SCHEDULE_DELTA = 0.1
_APS_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")  # by cron number, 0 = Sunday


class Schedule:
    """The start times of one schedule in one time zone."""

    def __init__(self, parsed: CronSchedule, zone: zoneinfo.ZoneInfo) -> None:
        self.zone = zone
        self._every: timedelta | None = None
        self._trigger: BaseTrigger | None = None
        if parsed.every is not None:
            seconds = int(parse_duration(parsed.every) or 0)  # robfig: whole seconds, >= 1
            self._every = timedelta(seconds=max(1, seconds))
        else:
            self._trigger = _trigger(parsed, zone)

    def next_after(self, t: datetime) -> datetime | None:
        """The first start time strictly after `t` (None when the calendar has none)."""
        start = t.astimezone(UTC).replace(microsecond=0)
        if self._every is not None:
            return start + self._every
        assert self._trigger is not None
        found = self._trigger.get_next_fire_time(None, (start + timedelta(seconds=1)))
        return None if found is None else found.astimezone(UTC)


def _values(values: frozenset[int], full: range, names: Sequence[str] | None = None) -> str:
    if values == frozenset(full):
        return "*"
    return ",".join(names[v] if names else str(v) for v in sorted(values))


def _trigger(p: CronSchedule, zone: zoneinfo.ZoneInfo) -> BaseTrigger:
    def cron(days: str, weekdays: str) -> CronTrigger:
        return CronTrigger(
            month=_values(p.months, range(1, 13)),
            day=days,
            day_of_week=weekdays,
            hour=_values(p.hours, range(24)),
            minute=_values(p.minutes, range(60)),
            timezone=zone,
        )

    days = _values(p.days, range(1, 32))
    weekdays = _values(p.weekdays, range(7), _APS_WEEKDAYS)
    if p.days_star or p.weekdays_star:  # cron: a wildcard on either side means both must match
        return cron(days, weekdays)
    return OrTrigger([cron(days, "*"), cron("*", weekdays)])


def schedule_of(spec: Mapping[str, Any]) -> Schedule:
    """The CronJob's schedule; a `TZ=` prefix wins over `timeZone` (as in Volcano). Raises
    ValueError with the event reason and message."""
    zone_name = spec.get("timeZone")
    try:
        parsed = parse_cron_schedule(str(spec.get("schedule") or ""))
    except ValueError as exc:
        raise ValueError("UnparseableSchedule", f"unparseable schedule: {exc}") from None
    try:
        zone = zoneinfo.ZoneInfo(parsed.time_zone or zone_name or "UTC")
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError("InvalidTimeZone", f"invalid time zone {zone_name!r}") from None
    return Schedule(parsed, zone)


def job_name(cronjob_name: str, scheduled: datetime) -> str:
    """`<cronjob>-<Unix minutes>`: one name per start time, so a start is never made twice."""
    return f"{cronjob_name}-{int(scheduled.timestamp()) // 60}"


def _rfc3339(t: datetime, zone: zoneinfo.ZoneInfo) -> str:
    local = t.astimezone(zone).replace(microsecond=0)
    text = local.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


# -- start times ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Due:
    """The most recent start time due (None: none), how many were missed, the next one."""

    scheduled: datetime | None
    missed: int
    next_time: datetime | None


def due_time(sched: Schedule, *, earliest: datetime, now: datetime, deadline: int | None) -> Due:
    """The most recent start time in (earliest, now], not older than `deadline` seconds."""
    if deadline is not None:
        earliest = max(earliest, now - timedelta(seconds=deadline))
    t1 = sched.next_after(earliest)
    if t1 is None or t1 > now:
        return Due(None, 0, t1)
    t2 = sched.next_after(t1)
    if t2 is None or t2 > now:
        return Due(t1, 1, t2)
    # Kubernetes' estimate of the count, from the first interval; then the last start time at
    # or before now, found by bisecting over whole intervals and walking the last one.
    interval = timedelta(seconds=max(1.0, (t2 - t1).total_seconds()))
    missed = int((now - t1) / interval) + 1
    lo, hi = 0, missed
    while lo < hi:
        mid = (lo + hi + 1) // 2
        probe = sched.next_after(t1 + interval * mid)
        if probe is not None and probe <= now:
            lo = mid
        else:
            hi = mid - 1
    recent, t = t1, sched.next_after(t1 + interval * lo)
    while t is not None and t <= now:
        recent, t = t, sched.next_after(t)
    return Due(recent, missed, t)


# -- children -------------------------------------------------------------------------------------


def _phase(job: Mapping[str, Any]) -> str:
    return str(((job.get("status") or {}).get("state") or {}).get("phase") or "")


def _finished(job: Mapping[str, Any]) -> bool:
    return _phase(job) in c.FINISHED_PHASES


def _controls(cronjob: Mapping[str, Any], job: Mapping[str, Any]) -> bool:
    cm = meta(cronjob)
    return any(
        o.get("controller")
        and o.get("kind") == "CronJob"
        and o.get("name") == cm.get("name")
        and o.get("uid") == cm.get("uid")
        for o in meta(job).get("ownerReferences") or []
    )


def _scheduled_at(job: Mapping[str, Any], cronjob_name: str) -> datetime | None:
    """A child's start time: its annotation, else the minutes in its name (a Volcano without
    the annotation's feature gate names them the same way)."""
    stamp = parse_time((meta(job).get("annotations") or {}).get(CRONJOB_SCHEDULED_TIMESTAMP))
    if stamp is not None:
        return stamp
    prefix, _, minutes = str(meta(job).get("name") or "").rpartition("-")
    if prefix != cronjob_name or not minutes.isdigit():
        return None
    return datetime.fromtimestamp(int(minutes) * 60, UTC)


def _age_key(job: Mapping[str, Any]) -> tuple[int, str, str]:
    stamp = str(meta(job).get("creationTimestamp") or "")
    return (0 if stamp else 1, stamp, str(meta(job).get("name") or ""))


def _job_ref(job: Mapping[str, Any]) -> ObjectRef:
    m = meta(job)
    return ObjectRef(
        c.BATCH_API, "Job", str(m.get("namespace") or ""), str(m.get("name")), uid=m.get("uid")
    )


def _ref_of(ref: Mapping[str, Any]) -> ObjectRef:
    return ObjectRef(
        str(ref.get("apiVersion") or c.BATCH_API),
        str(ref.get("kind") or "Job"),
        str(ref.get("namespace") or ""),
        str(ref.get("name")),
        uid=ref.get("uid"),
    )


# -- the sync -------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Sync:
    cronjob: Mapping[str, Any]
    children: list[Mapping[str, Any]]
    by_name: dict[str, Mapping[str, Any]]
    active: list[JSON]
    last_schedule: datetime | None
    last_success: datetime | None
    result: ReconcileResult = field(default_factory=ReconcileResult)
    gone: set[str] = field(default_factory=set)  # uids of children deleted by this sync

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef.of(self.cronjob)

    def event(self, reason: str, message: str, kind: str = "Normal") -> None:
        self.result.actions.append(EmitEvent(self.ref, reason, message, kind))

    def delete(self, job: Mapping[str, Any], why: str) -> None:
        uid = str(meta(job).get("uid") or "")
        self.result.actions.append(DeleteObject(_job_ref(job)))
        self.gone.add(uid)
        self.active = [a for a in self.active if a.get("uid") != uid]
        self.event("SuccessfulDelete", f"Deleted job {meta(job).get('name')}{why}")

    def running(self) -> list[Mapping[str, Any]]:
        """Children not finished (in `status.active` or not), other than those being deleted."""
        uids = {a.get("uid") for a in self.active}
        return [
            j
            for j in self.children
            if str(meta(j).get("uid")) not in self.gone
            and not meta(j).get("deletionTimestamp")
            and (not _finished(j) or meta(j).get("uid") in uids)
        ]


def _fold_finished(s: _Sync) -> None:
    """Step 1: finished children leave `active`; lastSuccessfulTime; history limits."""
    spec = s.cronjob.get("spec") or {}
    kept: dict[bool, list[Mapping[str, Any]]] = {True: [], False: []}
    for job in s.children:
        if not _finished(job):
            continue
        uid = meta(job).get("uid")
        if any(a.get("uid") == uid for a in s.active):
            s.active = [a for a in s.active if a.get("uid") != uid]
            s.event(
                "SawCompletedJob",
                f"Saw completed job: {meta(job).get('name')}, status: {_phase(job)}",
            )
        ok = _phase(job) == c.COMPLETED
        if ok:
            done = parse_time(
                ((job.get("status") or {}).get("state") or {}).get("lastTransitionTime")
            )
            if done is not None and (s.last_success is None or done > s.last_success):
                s.last_success = done
        if not meta(job).get("deletionTimestamp"):
            kept[ok].append(job)
    for ok, key in ((True, "successfulJobsHistoryLimit"), (False, "failedJobsHistoryLimit")):
        limit = spec.get(key)
        if limit is None:
            continue
        jobs = sorted(kept[ok], key=_age_key)
        for job in jobs[: max(0, len(jobs) - int(limit))]:
            s.delete(job, "")


def _fold_active(s: _Sync) -> None:
    """Step 2: drop stale references; take in the children an earlier sync created."""
    child_uids = {str(meta(j).get("uid")) for j in s.children}
    for ref in list(s.active):
        if ref.get("uid") in child_uids:
            continue
        found = s.by_name.get(str(ref.get("name")))
        if found is None or meta(found).get("uid") != ref.get("uid"):
            s.active.remove(ref)
            s.event(
                "StaleReference",
                f"Active job {ref.get('name')} no longer exists (UID: {ref.get('uid')})",
                "Warning",
            )
    listed = {a.get("uid") for a in s.active}
    name = str(meta(s.cronjob).get("name"))
    oldest = datetime.min.replace(tzinfo=UTC)
    for job in sorted(s.children, key=lambda j: _scheduled_at(j, name) or oldest):
        if meta(job).get("uid") in listed or _finished(job) or meta(job).get("deletionTimestamp"):
            continue
        at = _scheduled_at(job, name)
        if at is not None and (s.last_schedule is None or at >= s.last_schedule):
            s.active.append(reference_of(job, kind="Job", api_version=c.BATCH_API))
            s.last_schedule = at
        else:
            s.event(
                "OrphanedJob",
                f"Detected orphaned job forgotten or not managed by controller: "
                f"{meta(job).get('name')} (UID: {meta(job).get('uid')})",
                "Warning",
            )


def _job_body(cronjob: Mapping[str, Any], scheduled: datetime, zone: zoneinfo.ZoneInfo) -> JSON:
    cm = meta(cronjob)
    template = ((cronjob.get("spec") or {}).get("jobTemplate")) or {}
    tmeta = template.get("metadata") or {}
    annotations = dict(tmeta.get("annotations") or {})
    annotations[CRONJOB_SCHEDULED_TIMESTAMP] = _rfc3339(scheduled, zone)
    body: JSON = {
        "apiVersion": c.BATCH_API,
        "kind": "Job",
        "metadata": {
            "name": job_name(str(cm.get("name")), scheduled),
            "namespace": cm.get("namespace"),
            "labels": dict(tmeta.get("labels") or {}),
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": str(cronjob.get("apiVersion") or c.BATCH_API),
                    "kind": "CronJob",
                    "name": cm.get("name"),
                    "uid": cm.get("uid"),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": copy.deepcopy(template.get("spec") or {}),
    }
    if not body["metadata"]["labels"]:
        del body["metadata"]["labels"]
    return body


def _start(s: _Sync, sched: Schedule, scheduled: datetime) -> None:
    """Steps 4 and 5 for a start time that is due."""
    spec = s.cronjob.get("spec") or {}
    policy = spec.get("concurrencyPolicy") or "Allow"
    running = s.running()
    if policy == "Forbid" and (running or s.active):
        s.event(
            "ForbidConcurrent",
            "Skipping job creation because another job is already running",
            "Warning",
        )
        return
    if policy == "Replace":
        for job in running:
            s.delete(job, ": still running at the next start time")
        for ref in list(s.active):  # listed, though not this CronJob's child any more
            s.result.actions.append(DeleteObject(_ref_of(ref)))
            s.active.remove(ref)
            s.event("SuccessfulDelete", f"Deleted job {ref.get('name')}")
    name = job_name(str(meta(s.cronjob).get("name")), scheduled)
    existing = s.by_name.get(name)
    if existing is not None and str(meta(existing).get("uid")) not in s.gone:
        if not _controls(s.cronjob, existing):
            s.event("ForeignJob", f"Job {name} exists but is not owned by this CronJob", "Warning")
            return
        s.last_schedule = scheduled  # made before; step 2 listed it if it runs
        return
    s.result.actions.append(CreateObject(_job_body(s.cronjob, scheduled, sched.zone)))
    s.event("SuccessfulCreate", f"Created job {name}")
    s.last_schedule = scheduled
    s.result.requeue(0)  # record its reference once the API server gave it a uid


def _schedule(s: _Sync, now: datetime) -> None:
    """Step 3: whether a start is due, and when to look again."""
    spec = s.cronjob.get("spec") or {}
    try:
        sched = schedule_of(spec)
    except ValueError as exc:
        reason, message = exc.args
        s.event(str(reason), str(message), "Warning")
        return
    created = parse_time(meta(s.cronjob).get("creationTimestamp")) or now
    earliest = s.last_schedule or created
    deadline = spec.get("startingDeadlineSeconds")
    due = due_time(
        sched, earliest=earliest, now=now, deadline=None if deadline is None else int(deadline)
    )
    if due.missed > MANY_MISSED:
        s.event(
            "TooManyMissedTimes",
            "too many missed start times. Set or decrease .spec.startingDeadlineSeconds"
            " or check clock skew",
            "Warning",
        )
    if due.scheduled is not None and (s.last_schedule is None or due.scheduled > s.last_schedule):
        _start(s, sched, due.scheduled)
    following = sched.next_after(max(now, s.last_schedule or now))
    if following is not None:
        s.result.requeue((following - now).total_seconds() + NEXT_SCHEDULE_DELTA)
    elif due.scheduled is None:  # e.g. "0 0 30 2 *": valid fields, no such day
        s.event("InvalidSchedule", "the schedule names no date that exists", "Warning")


def _status_patch(s: _Sync, status: Mapping[str, Any]) -> JSON:
    want: JSON = {
        "active": s.active or None,
        "lastScheduleTime": format_time(s.last_schedule) if s.last_schedule else None,
        "lastSuccessfulTime": format_time(s.last_success) if s.last_success else None,
    }
    return {
        k: v for k, v in want.items() if v != status.get(k) and not (v is None and k not in status)
    }


def reconcile_cronjob(
    cronjob: Mapping[str, Any], jobs: Sequence[Mapping[str, Any]], *, now: datetime
) -> ReconcileResult:
    """One sync of `cronjob`; `jobs` are the VCJobs of its namespace (children are picked out by
    their controller reference)."""
    if meta(cronjob).get("deletionTimestamp"):
        return ReconcileResult()
    status = cronjob.get("status") or {}
    s = _Sync(
        cronjob=cronjob,
        children=[j for j in jobs if _controls(cronjob, j)],
        by_name={str(meta(j).get("name")): j for j in jobs},
        active=[dict(a) for a in status.get("active") or []],
        last_schedule=parse_time(status.get("lastScheduleTime")),
        last_success=parse_time(status.get("lastSuccessfulTime")),
    )
    _fold_finished(s)
    _fold_active(s)
    if not (cronjob.get("spec") or {}).get("suspend"):
        _schedule(s, now)
    patch = _status_patch(s, status)
    if patch:
        s.result.actions.append(PatchStatus(s.ref, patch))
    return s.result
