"""Job plugins glue: the plugins' objects, their ownership and the foreign ones spared."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from batch.api.jobview import JobView, job_view
from batch.controllers import constants as c
from batch.controllers.effects import (
    Action,
    CreateObject,
    EmitEvent,
    ObjectRef,
    PatchObject,
    ReconcileResult,
)
from batch.controllers.job.facts import JobFacts
from batch.controllers.job.pods import _refuse_job, _resource_problem
from batch.controllers.jobspec import (
    meta,
    owned_by_job,
)
from batch.controllers.plugins import JobPlugin, ObjectKey, PluginArgsError, build_plugins


def job_plugins(
    facts: JobFacts, notes: list[str], now: datetime
) -> tuple[list[JobPlugin], ReconcileResult | None]:
    """The job's plugins, or the refusal of a new job whose resources or plugin arguments cannot
    work (admission refuses it; one that bypassed admission is refused here, once). A job
    already running with bad plugin arguments gets none (a note says why): it is never expanded
    further, but its Commands and pods are still handled."""
    unfit = _resource_problem(facts.tasks) if facts.phase == "" else ""
    if unfit:
        return [], _refuse_job(facts.ref, "InvalidResources", unfit, now)
    try:
        return build_plugins(facts.job), None
    except PluginArgsError as exc:
        if facts.phase == "":
            return [], _refuse_job(facts.ref, "InvalidPluginArguments", str(exc), now)
        notes.append(str(exc))
        return [], None


NOT_OWNED = "PluginObjectNotOwned"


def plugin_object_keys(job: Mapping[str, Any] | JobView) -> list[ObjectKey]:
    """The objects the job's plugins create or rewrite, for the operator to read (none when
    its plugin arguments are bad: such a job gets no plugins)."""
    job = job if isinstance(job, JobView) else job_view(job)
    try:
        plugins = build_plugins(job)
    except PluginArgsError:
        return []
    return [key for plugin in plugins for key in plugin.object_keys(job)]


def _not_owned(job: JobView, obj: Mapping[str, Any]) -> str:
    m = meta(obj)
    return (
        f"{obj.get('kind')} {m.get('namespace')}/{m.get('name')} exists and is not owned by job "
        f"{job.name}: refusing to take it over (delete or rename it, or rename the "
        "job)"
    )


def _stale(job: JobView, obj: Mapping[str, Any]) -> bool:
    """Whether a VCJob of the same name, since deleted, controls ``obj`` (the garbage collector
    removes it soon: the job being submitted again waits for that instead of failing)."""
    return any(
        ref.get("controller") is True
        and str(ref.get("apiVersion")).startswith(f"{c.BATCH_GROUP}/")
        and ref.get("kind") == "Job"
        and ref.get("name") == job.name
        for ref in meta(obj).get("ownerReferences") or []
    )


def guard_plugin_objects(
    facts: JobFacts,
    plugin_objects: Sequence[Mapping[str, Any]],
    now: datetime,
) -> tuple[list[Mapping[str, Any]], ReconcileResult | None]:
    """The plugin objects that exist and the job does not control (never created over nor
    patched), and for a new job with any the refusal: Failed with reason PluginObjectNotOwned
    naming them, or a wait (looked at again in 1 s) while they belong to a deleted job of the
    same name (`controllers.md#job-plugins`)."""
    job = facts.job
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
    facts: JobFacts, result: ReconcileResult, foreign: Sequence[Mapping[str, Any]]
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
    job = facts.job
    result.notes += [_not_owned(job, o) for o in foreign]
    if mounted:
        message = "; ".join(_not_owned(job, o) for o in mounted) + ": no pod is created"
        ref = ObjectRef(
            job.api_version,
            job.kind,
            job.namespace,
            job.name,
            job.uid or None,
            job.resource_version or None,
        )
        result.actions.append(EmitEvent(ref, NOT_OWNED, message, type="Warning"))
        result.requeue_after = FOREIGN_RECHECK_SECONDS  # not at once: nothing changes by itself
