"""Small status helpers shared by the phases: counts, layout, timers and stubs."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from batch.api.jobview import TaskView
from batch.controllers import constants as c
from batch.controllers.job.base import JSON, PodView, Request
from batch.controllers.jobspec import meta
from batch.controllers.timeutil import format_time


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
    min_success: int | None,
    task_succeeded: Mapping[str, int],
) -> str:
    """Running + SyncJob: rows (a)-(c) of the table; (d) is applied by the caller."""
    succeeded, failed = counters["succeeded"], counters["failed"]
    if total == 0:
        return c.RUNNING
    if min_success is not None and succeeded >= min_success:
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
    min_success: int | None,
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
    if min_success is not None and succeeded < min_success:
        return c.FAILED
    if succeeded >= min_av:
        return c.COMPLETED
    return c.FAILED


def _dependencies_ready(
    task: TaskView, tasks: Sequence[TaskView], views: Sequence[PodView]
) -> bool:
    dep = task.depends_on
    if dep is None:
        return True
    names, iteration = dep.names, dep.iteration

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
