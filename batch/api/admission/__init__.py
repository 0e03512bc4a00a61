"""Admission for Tephra's kinds as pure functions: defaulting, then validation.

The webhook server, the sandbox API server, `tephra validate` and the simulator all call
`admit()`. Order follows the Kubernetes API server: mutating admission (CREATE only, as
Volcano's webhooks), then schema validation (types, enums, bounds, quantities — the same
models the CRDs are generated from), then the validating webhook's cross-field rules.
`admit` never raises for bad input: everything wrong is an error in the result. The size limits
(`AdmissionLimits`: pods per job, replicas per task, tasks, policies) are the one admission option;
every caller passes the limits it was configured with, or gets the safe defaults.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from batch.api.bus import Command
from batch.api.constants import BATCH_GROUP
from batch.api.cronjob import CronJob
from batch.api.job import Job
from batch.api.kinds import KINDS
from batch.api.scheduling import PodGroup, Queue
from batch.api.topology import HyperNode

from .access import AccessNeed, AccessVerdict, access_needed, access_review, access_verdict
from .bounds import MAX_DEPTH, refuse_early
from .command import validate_command
from .common import Errors, as_dict, json_copy, object_ref, schema_validate
from .cronjob import validate_cronjob
from .hypernode import validate_hypernode
from .job import mutate_job_spec, validate_job_create, validate_job_update
from .limits import DEFAULT_LIMITS, UNBOUNDED, AdmissionLimits
from .patch import json_patch
from .pod import validate_pod
from .podgroup import mutate_podgroup, validate_podgroup
from .queue import mutate_queue, validate_queue, validate_queue_delete
from .types import (
    AdmissionLookup,
    AdmissionResult,
    AssumeAllQueues,
    FieldError,
    StaticLookup,
    builtin_queue,
)

__all__ = [
    "DEFAULT_LIMITS",
    "MAX_DEPTH",
    "OPERATIONS",
    "SERVED_KINDS",
    "UNBOUNDED",
    "AccessNeed",
    "AccessVerdict",
    "AdmissionLimits",
    "AdmissionLookup",
    "AdmissionResult",
    "AssumeAllQueues",
    "FieldError",
    "StaticLookup",
    "access_needed",
    "access_review",
    "access_verdict",
    "admit",
    "builtin_queue",
    "json_patch",
]

log = logging.getLogger(__name__)

OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})
#: Kinds `admit` handles (Kubernetes kind names); anything else is allowed unchanged.
SERVED_KINDS = frozenset({k.kind for k in KINDS} | {"Pod"})
_NAMESPACED = {k.kind: k.namespaced for k in KINDS} | {"Pod": True}


def admit(
    *,
    kind: str,
    operation: str,
    obj: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    lookup: AdmissionLookup | None,
    limits: AdmissionLimits = DEFAULT_LIMITS,
) -> AdmissionResult:
    """Default and validate one object.

    `kind` is the Kubernetes kind ("Job" means batch.volcano.sh's Job: a Job of another
    apiVersion is not ours and passes unchanged); `operation` is CREATE, UPDATE or DELETE
    (for DELETE `old`, when given, is the object being deleted); `lookup=None` skips the checks
    that need queues or namespaces; `limits` bound what one object may ask for. Returns the
    defaulted object, the JSON patch to it from the object under admission (`obj`, or `old` on a
    DELETE that carries no object), and one `FieldError` per violated rule (allowed is False when
    there is any).
    """
    try:
        return _admit(
            kind=kind, operation=operation, obj=obj, old=old, lookup=lookup, limits=limits
        )
    except Exception as exc:  # a bug, not bad input: still answer, and say so
        log.exception("admission of %s failed", kind)
        source = dict(obj) if isinstance(obj, Mapping) else {}
        err = FieldError(path="", rule="internal", message=f"admission failed: {exc!r}", ref=kind)
        return AdmissionResult(allowed=False, object=source, errors=[err], patch=[])


def _admit(
    *,
    kind: str,
    operation: str,
    obj: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    lookup: AdmissionLookup | None,
    limits: AdmissionLimits,
) -> AdmissionResult:
    given = _object_under_admission(operation, obj, old)
    if not isinstance(given, Mapping):
        err = FieldError(
            "", "type", f"the object must be a mapping, not {type(given).__name__}", kind
        )
        return AdmissionResult(allowed=False, object={}, errors=[err], patch=[])
    errors = Errors(object_ref(kind, given, namespaced=_NAMESPACED.get(kind, True)))
    served = _served(kind, operation, given)
    if served and refuse_early(kind, operation, given, old, limits, errors):
        return AdmissionResult(allowed=False, object={}, errors=errors.items, patch=[], early=True)
    source: dict[str, Any] = json_copy(dict(given))
    if _answered_unchanged(kind, operation, source, old=old, lookup=lookup, errors=errors):
        return _result(source, source, errors)
    target: dict[str, Any] = json_copy(source)
    if operation == "CREATE":
        _mutate(kind, target, lookup)
    if kind == "Pod":
        validate_pod(target, errors)
        return _result(source, target, errors)
    typed = schema_validate(_MODELS[kind], target, errors)
    if typed is not None:
        old_map = old if isinstance(old, Mapping) else None
        review = _Review(operation, source, target, old_map, lookup, errors, limits)
        _validate(typed, review)
    return _result(source, target, errors)


def _served(kind: str, operation: str, given: Mapping[str, Any]) -> bool:
    """Whether `given` under `operation` is defaulted and validated (the size refusals apply)."""
    if kind in ("Job", "CronJob") and not _is_batch_volcano(given):
        return False
    return kind in SERVED_KINDS and operation in ("CREATE", "UPDATE")


def _object_under_admission(
    operation: str, obj: Mapping[str, Any], old: Mapping[str, Any] | None
) -> Any:
    """`obj`, or on a DELETE that carries none (an AdmissionReview's null object) `old`."""
    given: Any = obj  # callers may pass anything decoded from JSON or YAML
    if operation == "DELETE" and not given:
        given = old if isinstance(old, Mapping) else {}
    return given


def _answered_unchanged(
    kind: str,
    operation: str,
    source: dict[str, Any],
    *,
    old: Mapping[str, Any] | None,
    lookup: AdmissionLookup | None,
    errors: Errors,
) -> bool:
    """Whether the object skips defaulting and schema validation (another API's kind, an unknown
    operation, CONNECT, DELETE); the errors such an answer carries are added to `errors`."""
    if kind not in SERVED_KINDS or operation not in OPERATIONS:
        if operation not in OPERATIONS:
            errors.add("", "operation", f"unknown operation {operation!r}")
        return True
    if kind in ("Job", "CronJob") and not _is_batch_volcano(source):
        return True  # e.g. a batch/v1 Job: not ours
    if operation == "DELETE" and kind == "Queue":
        validate_queue_delete(old if isinstance(old, Mapping) else source, lookup, errors)
    return operation in ("CONNECT", "DELETE")


def _is_batch_volcano(source: Mapping[str, Any]) -> bool:
    """A Job or CronJob of batch.volcano.sh (or one that names no apiVersion)."""
    api_version = source.get("apiVersion")
    return not isinstance(api_version, str) or api_version.startswith(f"{BATCH_GROUP}/")


@dataclass(frozen=True)
class _Review:
    """One request as a kind's validator sees it: `source` is the object under admission,
    `target` the defaulted one, `old` the stored object of an UPDATE."""

    operation: str
    source: dict[str, Any]
    target: dict[str, Any]
    old: Mapping[str, Any] | None
    lookup: AdmissionLookup | None
    errors: Errors
    limits: AdmissionLimits


def _validate(typed: Job | Queue | PodGroup | Command | HyperNode | CronJob, r: _Review) -> None:
    """The validating webhook's cross-field rules for one schema-valid object."""
    if isinstance(typed, Job):
        _validate_job(typed, r)
    elif isinstance(typed, Queue):
        validate_queue(
            typed, r.target, operation=r.operation, old=r.old, lookup=r.lookup, errors=r.errors
        )
    elif isinstance(typed, PodGroup):
        validate_podgroup(
            typed,
            operation=r.operation,
            lookup=r.lookup,
            errors=r.errors,
            limits=r.limits,
            old=r.old,
        )
    elif isinstance(typed, Command):
        validate_command(typed, r.errors)
    elif isinstance(typed, HyperNode):
        validate_hypernode(typed, r.errors)
    else:
        validate_cronjob(typed, r.target, r.errors, limits=r.limits)


def _validate_job(job: Job, r: _Review) -> None:
    spec = job.spec
    if spec is None:
        r.errors.add("spec", "required", "a Job needs a spec")
    elif r.operation == "UPDATE" and r.old is not None:
        validate_job_update(spec, r.target, r.old, r.errors, limits=r.limits)
    else:
        validate_job_create(
            spec, r.target, r.source, lookup=r.lookup, errors=r.errors, limits=r.limits
        )


_MODELS: dict[str, type[Job | Queue | PodGroup | Command | HyperNode | CronJob]] = {
    "Job": Job,
    "Queue": Queue,
    "PodGroup": PodGroup,
    "Command": Command,
    "HyperNode": HyperNode,
    "CronJob": CronJob,
}


def _mutate(kind: str, obj: dict[str, Any], lookup: AdmissionLookup | None) -> None:
    if kind == "Job":
        spec = as_dict(obj.get("spec"))
        if spec is not None:
            mutate_job_spec(spec)
    elif kind == "Queue":
        mutate_queue(obj)
    elif kind == "PodGroup":
        mutate_podgroup(obj, lookup)


def _result(source: dict[str, Any], target: dict[str, Any], errors: Errors) -> AdmissionResult:
    return AdmissionResult(
        allowed=not errors.items,
        object=target,
        errors=list(errors.items),
        patch=json_patch(source, target),
    )
