"""Refusals by size before any expensive work: nesting depth and the counts `limits.py` bounds.

Why this exists: the rules of `job.py` run on a defaulted copy validated by pydantic, work that
grows with the object. A VCJob of 10,000 tasks cost the webhook 1.56 s of CPU before its task
count refused it, and eight of them in parallel starved every other admission (issue 30 item 6).
The counts that refuse such an object (tasks, replicas, policies, a PodGroup's per-task entries)
are read here straight from the raw JSON, in time proportional to the number of tasks, before the
object is copied or parsed. The nesting walk is linear in the object and keeps every recursive step
after it (the copy, the JSON patch, pydantic, the answer's encoding) far from Python's recursion
limit: an object nested 500 deep used to leak `RecursionError` instead of an answer.
On UPDATE a count is refused only when it grows past the limit, as `job.py` does for a scale-up, so
a lowered limit never freezes an object that is already over it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from .common import Errors, join
from .limits import AdmissionLimits

__all__ = ["MAX_DEPTH", "deeper_than", "refuse_early"]

#: Deepest nesting admitted (objects and lists). The deepest field of a real VCJob, a pod
#: anti-affinity term's value, is 15 levels down (17 in a CronJob's template); 64 leaves room
#: for annotations-free extensions and stays far below Python's recursion limit (1,000 frames).
MAX_DEPTH = 64

_Check = tuple[str, str, int, str | None]


def deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` nests dicts and lists more than `limit` levels (iterative: any depth)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def refuse_early(
    kind: str,
    operation: str,
    obj: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    limits: AdmissionLimits,
    errors: Errors,
) -> bool:
    """Add the size refusals of `obj` to `errors`; True when there is any (admission stops).
    The counts come first: they read a few fields per task, the depth walk reads everything."""
    grown = operation != "UPDATE" or not isinstance(old, Mapping)
    before = {} if grown else {(p, r): n for p, r, n, _ in _counts(kind, old, limits)}
    for path, rule, count, message in _counts(kind, obj, limits):
        if message and (grown or count > before.get((path, rule), 0)):
            errors.add(path, rule, message)
    if not errors.items and deeper_than(obj, MAX_DEPTH):
        errors.add("", "maxDepth", f"the object nests deeper than the limit of {MAX_DEPTH} levels")
    return bool(errors.items)


def _counts(kind: str, obj: Mapping[str, Any] | None, limits: AdmissionLimits) -> Iterator[_Check]:
    """(path, rule, count, the limit's refusal or None) of every count `kind` bounds."""
    spec = _dict(obj, "spec")
    if kind == "Job":
        yield from _job_counts(spec, "spec", limits)
    elif kind == "CronJob":
        template = _dict(_dict(spec, "jobTemplate"), "spec")
        yield from _job_counts(template, "spec.jobTemplate.spec", limits)
    elif kind == "PodGroup":
        for key in ("minTaskMember", "subGroupPolicy"):
            count = _len(spec.get(key))
            message = limits.tasks_error(count)
            yield join("spec", key), "maxTasks", count, message and f"{message} (one per task)"


def _job_counts(spec: Mapping[str, Any], path: str, limits: AdmissionLimits) -> Iterator[_Check]:
    """The task count, each task's replicas and policies, the pods in all, the job's policies."""
    count = _len(spec.get("policies"))
    yield join(path, "policies"), "maxPolicies", count, limits.policies_error(count)
    tasks = spec.get("tasks")
    tasks = tasks if isinstance(tasks, list) else []
    tpath = join(path, "tasks")
    yield tpath, "maxTasks", len(tasks), limits.tasks_error(len(tasks))
    if len(tasks) > limits.tasks_per_job:
        return  # each task's counts would be one more line per task
    pods = 0
    for i, task in enumerate(tasks):
        replicas = _int(_dict_of(task).get("replicas"))
        pods += replicas
        ipath = join(tpath, i)
        message = limits.task_replicas_error(replicas)
        yield join(ipath, "replicas"), "maxTaskReplicas", replicas, message
        count = _len(_dict_of(task).get("policies"))
        yield join(ipath, "policies"), "maxPolicies", count, limits.policies_error(count)
    yield tpath, "maxPodsPerJob", pods, limits.pods_error(pods)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _len(value: Any) -> int:
    return len(value) if isinstance(value, list | dict) else 0


def _dict_of(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _dict(obj: Mapping[str, Any] | None, key: str) -> Mapping[str, Any]:
    return _dict_of(obj.get(key) if isinstance(obj, Mapping) else None)
