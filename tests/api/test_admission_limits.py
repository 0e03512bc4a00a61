"""Size limits in admission: one object may not ask for unbounded work (issue 19, item 1).

A VCJob with `replicas: 100000000` was admitted, and the job controller grew past 9.6 GB building
its pods. Admission refuses it now, naming the field and the limit, with configurable limits.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from batch.api.admission import DEFAULT_LIMITS, AdmissionLimits, AdmissionResult, admit

from .conftest import make_job, make_task

SMALL = AdmissionLimits(pods_per_job=10, replicas_per_task=6, tasks_per_job=3, policies_per_list=2)


def create(obj: dict[str, Any], limits: AdmissionLimits = DEFAULT_LIMITS) -> AdmissionResult:
    return admit(kind="Job", operation="CREATE", obj=obj, old=None, lookup=None, limits=limits)


def errors(result: AdmissionResult) -> dict[str, tuple[str, str]]:
    assert not result.allowed
    return {e.path: (e.rule, e.message) for e in result.errors}


def test_huge_replicas_are_refused_naming_the_field_and_the_limit() -> None:
    result = create(make_job(tasks=[make_task(replicas=100_000_000)], minAvailable=1))
    found = errors(result)
    rule, message = found["spec.tasks[0].replicas"]
    assert rule == "maxTaskReplicas"
    assert "100000000" in message and "limit of 10000 pods per task" in message
    assert "--max-task-replicas" in message
    assert found["spec.tasks"][0] == "maxPodsPerJob"
    line = next(m for m in result.messages() if "spec.tasks[0].replicas" in m)
    assert line.startswith("Job ml/train: spec.tasks[0].replicas: maxTaskReplicas (replicas ")


def test_the_default_limits_admit_jobs_at_the_limit() -> None:
    job = make_job(tasks=[make_task("a", replicas=5_000), make_task("b", replicas=5_000)])
    assert create(job).allowed, create(job).messages()


def test_total_pods_are_bounded_across_tasks() -> None:
    job = make_job(tasks=[make_task("a", replicas=6), make_task("b", replicas=5)])
    found = errors(create(job, SMALL))
    assert set(found) == {"spec.tasks"}
    assert found["spec.tasks"][0] == "maxPodsPerJob"
    assert "11 pods in all" in found["spec.tasks"][1]
    assert "limit of 10 pods per job" in found["spec.tasks"][1]


def test_limits_are_configurable() -> None:
    job = make_job(tasks=[make_task(replicas=7)])
    assert create(job).allowed
    assert set(errors(create(job, SMALL))) == {"spec.tasks[0].replicas"}
    assert create(job, AdmissionLimits(pods_per_job=7, replicas_per_task=7)).allowed
    with pytest.raises(ValueError, match="pods_per_job must be an integer >= 1"):
        AdmissionLimits(pods_per_job=0)


def test_too_many_tasks_is_one_error_and_nothing_else_is_walked() -> None:
    # 4 tasks with duplicate names, each with too many replicas: only the task count is reported
    tasks = [make_task("same", replicas=100) for _ in range(4)]
    found = errors(create(make_job(tasks=tasks), SMALL))
    assert found == {"spec.tasks": ("maxTasks", "4 tasks, over the limit of 3 tasks per job")}


def test_policy_lists_are_bounded() -> None:
    policies = [{"exitCode": code, "action": "RestartJob"} for code in (1, 2, 3)]
    task = make_task(replicas=1, policies=copy.deepcopy(policies))
    found = errors(create(make_job(tasks=[task], policies=policies), SMALL))
    assert found["spec.policies"][0] == "maxPolicies"
    assert found["spec.tasks[0].policies"][0] == "maxPolicies"


def test_tensorflow_jobs_bound_the_hosts_every_pod_lists() -> None:
    tasks = [make_task("ps", replicas=100), make_task("worker", replicas=901)]
    job = make_job(tasks=tasks, plugins={"tensorflow": []})
    found = errors(create(job))
    rule, message = found["spec.plugins.tensorflow"]
    assert rule == "maxHostsPerPod" and "1001 hosts" in message and "1000" in message
    tasks[1]["replicas"] = 900
    assert create(make_job(tasks=tasks, plugins={"tensorflow": []})).allowed


def _update(old: dict[str, Any], new: dict[str, Any], limits: AdmissionLimits) -> AdmissionResult:
    return admit(kind="Job", operation="UPDATE", obj=new, old=old, lookup=None, limits=limits)


def test_scale_up_is_bounded_but_an_over_limit_job_may_shrink() -> None:
    old = create(make_job(tasks=[make_task(replicas=4, minAvailable=1)], minAvailable=1)).object
    grown = copy.deepcopy(old)
    grown["spec"]["tasks"][0]["replicas"] = 100_000_000
    found = errors(_update(old, grown, DEFAULT_LIMITS))
    assert found["spec.tasks[0].replicas"][0] == "maxTaskReplicas"
    assert found["spec.tasks"][0] == "maxPodsPerJob"
    # a limit lowered below a stored job refuses growth only
    shrunk = copy.deepcopy(old)
    shrunk["spec"]["tasks"][0]["replicas"] = 3
    assert _update(old, shrunk, AdmissionLimits(pods_per_job=2, replicas_per_task=2)).allowed


def test_cronjob_templates_are_bounded() -> None:
    cron = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": "default"},
        "spec": {
            "schedule": "0 1 * * *",
            "jobTemplate": {"spec": make_job(tasks=[make_task(replicas=10**8)])["spec"]},
        },
    }
    result = admit(kind="CronJob", operation="CREATE", obj=cron, old=None, lookup=None)
    found = errors(result)
    assert found["spec.jobTemplate.spec.tasks[0].replicas"][0] == "maxTaskReplicas"


def _podgroup(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "default"},
        "spec": {"minMember": 1, **spec},
    }


def test_podgroup_roles_are_bounded_by_the_tasks_limit() -> None:
    roles = {f"role{i}": 1 for i in range(4)}
    result = admit(
        kind="PodGroup",
        operation="CREATE",
        obj=_podgroup(minTaskMember=roles),
        old=None,
        lookup=None,
        limits=SMALL,
    )
    assert errors(result)["spec.minTaskMember"][0] == "maxTasks"
    subgroups = [{"name": f"sg{i}", "subGroupSize": 1} for i in range(4)]
    result = admit(
        kind="PodGroup",
        operation="UPDATE",
        obj=_podgroup(subGroupPolicy=subgroups),
        old=_podgroup(),
        lookup=None,
        limits=SMALL,
    )
    assert errors(result)["spec.subGroupPolicy"][0] == "maxTasks"
