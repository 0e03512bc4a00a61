"""Pod building for a reconcile: the missing pods, their resources and priority classes."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from batch.api.jobview import JobStatusView, JobView, TaskView
from batch.api.quantity import QuantityError
from batch.api.resources import is_extended_resource, to_internal
from batch.controllers import constants as c
from batch.controllers.effects import (
    CreateObject,
    EmitEvent,
    ObjectRef,
    PatchStatus,
    ReconcileResult,
)
from batch.controllers.job.base import PodView, _Plan
from batch.controllers.job.helpers import _dependencies_ready, _with_kind
from batch.controllers.jobspec import build_pod, pod_name
from batch.controllers.plugins import JobPlugin
from batch.controllers.priorities import MISS_RELIST, priority_class_names
from batch.controllers.timeutil import format_time


def _missing_pods(
    job: JobView,
    views: Sequence[PodView],
    present: Collection[str],
    plugins: Sequence[JobPlugin],
    *,
    plan: _Plan,
    limit: int,
) -> list[CreateObject]:
    """The first `limit` missing pods, task by task, of the tasks whose dependencies are ready.

    Each index either names a pod that exists or adds one, so this takes time in the pods that
    exist plus `limit`, and memory in `limit` only (the rest come in the next reconciles)."""
    tasks = job.tasks
    out: list[CreateObject] = []
    for task in tasks:
        if not _dependencies_ready(task, tasks, views):
            continue
        for i in range(task.replicas):
            if len(out) >= limit:
                return out
            if pod_name(job.name, task.name, i) in present:
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
        for group in ("initContainers", "containers"):
            for cont in t.pod_spec.get(group) or []:
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


def _missing_priority_classes(job: JobView, values: Mapping[str, int] | None) -> str:
    """Why no pod of the job can be created when a PriorityClass its pods name (the task
    template's, else the job's) does not exist ("" when all exist, or when `values` is None:
    unknown). The API server's Priority admission refuses such pods with a 403."""
    if values is None:
        return ""
    missing = sorted(n for n in priority_class_names(job) if n not in values)
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
    status: JobStatusView,
    message: str,
) -> None:
    """Say it once, on the job and on its PodGroup (`tephra job why` lists the PodGroup's
    events), and look again in MISS_RELIST seconds (when the controller reads the list again
    for a missing class). Nothing when ``message`` is empty (every class exists)."""
    if not message:
        return
    result.notes.append(message)
    result.requeue(MISS_RELIST)
    if status.reason == NO_PRIORITY_CLASS and status.message == message:
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
