"""Refusal by size before the expensive work (issue 30 item 6).

A VCJob of 10,000 tasks cost the webhook 1.56 s of CPU before its task count refused it: the
object was copied twice, validated by pydantic and diffed first. An object nested 500 deep made
the copy raise `RecursionError`, answered as an internal error (and as an unchanged object on the
mutating endpoint). Both are refused now from the raw object, before any of that work; these
tests count the work rather than time it.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

import batch.api.admission as admission
from batch.api.admission import MAX_DEPTH, AdmissionResult, admit

from .conftest import make_job, make_task


def nested(depth: int) -> dict[str, Any]:
    """A mapping `depth` levels deep."""
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


@pytest.fixture
def work(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The expensive steps admission took (copy, schema validation), by name."""
    seen: list[str] = []
    for name in ("json_copy", "schema_validate"):
        real = getattr(admission, name)

        def spy(*args: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            seen.append(_name)
            return _real(*args, **kw)

        monkeypatch.setattr(admission, name, spy)
    return seen


def _create(kind: str, obj: dict[str, Any]) -> AdmissionResult:
    return admit(kind=kind, operation="CREATE", obj=obj, old=None, lookup=None)


def test_ten_thousand_tasks_are_refused_before_any_copy_or_schema_work(work: list[str]) -> None:
    tasks = [make_task(f"t{i}", replicas=1) for i in range(10_000)]
    result = _create("Job", make_job(tasks=tasks))
    assert not result.allowed and result.early
    assert [str(e) for e in result.errors] == [
        "Job ml/train: spec.tasks: maxTasks (10000 tasks, over the limit of 100 tasks per job)"
    ]
    assert work == []


def test_replicas_and_policies_are_refused_early_too(work: list[str]) -> None:
    policies = [{"exitCode": c, "action": "RestartJob"} for c in range(1, 100)]
    job = make_job(tasks=[make_task(replicas=10**8, policies=policies)])
    result = _create("Job", job)
    rules = {e.path: e.rule for e in result.errors}
    assert rules == {
        "spec.tasks[0].replicas": "maxTaskReplicas",
        "spec.tasks[0].policies": "maxPolicies",
        "spec.tasks": "maxPodsPerJob",
    }
    assert result.early and work == []


def test_cronjob_templates_and_podgroups_are_counted_early(work: list[str]) -> None:
    cron = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "CronJob",
        "metadata": {"name": "nightly"},
        "spec": {"schedule": "@daily", "jobTemplate": {"spec": {"tasks": [{}] * 101}}},
    }
    assert _create("CronJob", cron).errors[0].path == "spec.jobTemplate.spec.tasks"
    pg = {"metadata": {"name": "pg"}, "spec": {"minTaskMember": {str(i): 1 for i in range(101)}}}
    assert _create("PodGroup", pg).errors[0].rule == "maxTasks"
    assert work == []


@pytest.mark.parametrize("kind", ["Job", "Queue", "PodGroup", "Command", "CronJob", "Pod"])
@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 500, 900])
def test_deep_objects_are_refused_by_depth_not_by_recursion_error(kind: str, depth: int) -> None:
    obj = {"apiVersion": "batch.volcano.sh/v1alpha1", "metadata": {"name": "x"}}
    obj["spec"] = nested(depth - 1)
    result = _create(kind, obj)
    assert not result.allowed and result.early
    (error,) = result.errors
    assert error.rule == "maxDepth" and f"limit of {MAX_DEPTH} levels" in error.message


def test_a_deep_pod_template_is_admitted_and_the_limit_is_exact() -> None:
    job = make_job()
    expression = {"key": "a", "operator": "In", "values": ["b"]}
    term = {"labelSelector": {"matchExpressions": [expression]}, "topologyKey": "zone"}
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    job["spec"]["tasks"][0]["template"]["spec"]["affinity"] = affinity
    assert _create("Job", job).allowed
    assert admission.bounds.deeper_than(nested(MAX_DEPTH + 1), MAX_DEPTH)
    assert not admission.bounds.deeper_than(nested(MAX_DEPTH), MAX_DEPTH)


def test_an_update_is_refused_early_only_when_a_count_grows() -> None:
    old = make_job(tasks=[make_task(replicas=20_000)])
    same = copy.deepcopy(old)
    result = admit(kind="Job", operation="UPDATE", obj=same, old=old, lookup=None)
    assert not result.early
    grown = copy.deepcopy(old)
    grown["spec"]["tasks"][0]["replicas"] = 30_000
    result = admit(kind="Job", operation="UPDATE", obj=grown, old=old, lookup=None)
    assert result.early and {e.rule for e in result.errors} == {"maxTaskReplicas", "maxPodsPerJob"}


def test_deleting_a_deep_stored_object_is_not_refused() -> None:
    old = {"metadata": {"name": "q"}, "spec": nested(MAX_DEPTH + 5)}
    result = admit(kind="Queue", operation="DELETE", obj={}, old=old, lookup=None)
    assert not any(e.rule == "maxDepth" for e in result.errors)
