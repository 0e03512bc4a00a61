"""`batch.api.jobview`: a VCJob read once per version, the webhook defaults applied."""

from __future__ import annotations

from typing import Any

import pytest

from batch.api.constants import DEFAULT_MAX_RETRY
from batch.api.jobview import PolicyView, is_job_phase, job_view, policies_view


def _job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "uid": "u1", "resourceVersion": "5"},
        "spec": {
            "tasks": [
                {"replicas": 2, "template": {"spec": {"priorityClassName": "hi"}}},
                {
                    "name": "ps",
                    "replicas": 4,
                    "maxRetry": 1,
                    "partitionPolicy": {"minPartitions": 1, "partitionSize": 2},
                    "policies": [{"event": "PodFailed", "action": "RestartTask"}],
                },
            ],
            **spec,
        },
    }


def test_the_tasks_get_the_webhook_defaults() -> None:
    view = job_view(_job())
    a, ps = view.tasks
    assert (a.name, a.replicas, a.min_available, a.max_retry) == (
        "default0",
        2,
        2,
        DEFAULT_MAX_RETRY,
    )
    assert (ps.name, ps.min_available, ps.max_retry) == ("ps", 2, 1)  # one partition of 2
    assert a.pod_spec == {"priorityClassName": "hi"} and ps.pod_spec == {}
    assert ps.policies == (PolicyView(("PodFailed",), None, "RestartTask", None),)
    assert view.task("ps") is ps and view.task("nope") is None
    assert view.min_available == 4  # unset: the tasks' minimums summed
    assert job_view({**_job(minAvailable=0), "metadata": {}}).min_available == 4  # 0 is unset
    assert job_view({**_job(minAvailable=3), "metadata": {}}).min_available == 3


def test_the_spec_fields_the_controllers_read() -> None:
    view = job_view(
        {
            **_job(
                queue="q",
                schedulerName="tephra",
                priorityClassName="hi",
                maxRetry=0,
                minSuccess=1,
                ttlSecondsAfterFinished=30,
                runningEstimate="1h",
                plugins={"svc": []},
                policies=[{"event": "*", "action": "AbortJob"}],
                volumes=[{"mountPath": "/d", "volumeClaimName": "data"}],
            ),
            "metadata": {"name": "j", "deletionTimestamp": "2026-01-01T00:00:00Z"},
        }
    )
    assert (view.queue, view.queue_or_default, view.scheduler_name) == ("q", "q", "tephra")
    assert (view.priority_class_name, view.max_retry, view.min_success) == ("hi", 3, 1)
    assert (view.ttl_seconds_after_finished, view.running_estimate) == (30, "1h")
    assert view.plugins == {"svc": []} and view.policies[0].action == "AbortJob"
    assert view.volumes == ({"mountPath": "/d", "volumeClaimName": "data"},)
    assert view.deleting and view.namespace == "" and view.uid == ""
    bare = job_view({})
    assert (bare.queue, bare.queue_or_default, bare.min_success) == ("", "default", None)
    assert bare.ttl_seconds_after_finished is None and bare.network_topology is None


def test_the_status() -> None:
    status = {
        "state": {"phase": "Running", "reason": "r", "lastTransitionTime": "t"},
        "version": 2,
        "retryCount": True,  # not a count
        "minAvailable": 0,
        "controlledResources": {"k": "v"},
        "conditions": [{"status": "Running"}, "junk"],
    }
    st = job_view({"status": status}).status
    assert (st.written_phase, st.phase, st.reason, st.message) == ("Running", "Running", "r", "")
    assert (st.version, st.retry_count, st.min_available) == (2, 0, None)
    assert st.controlled_resources == {"k": "v"} and st.conditions == ({"status": "Running"},)
    assert st.raw is status and st.last_transition == "t"
    weird = job_view({"status": {"state": {"phase": "Weird"}}}).status
    assert weird.written_phase == "Weird" and weird.phase is None
    assert job_view({}).status.written_phase == "" and job_view({}).status.phase is None
    assert is_job_phase("Completed") and not is_job_phase("")


def test_a_view_is_built_once_per_uid_and_resource_version() -> None:
    job = _job()
    job["metadata"]["uid"] = "u-once"
    first = job_view(job)
    assert job_view(_job() | {"metadata": dict(job["metadata"])}) is first
    newer = {**job, "metadata": {**job["metadata"], "resourceVersion": "6"}}
    assert job_view(newer) is not first
    without_rv = {**job, "metadata": {"uid": "u-once"}}
    assert job_view(without_rv) is not job_view(without_rv)  # never cached


def test_a_view_is_read_only() -> None:
    view = job_view(_job())
    with pytest.raises(AttributeError):
        view.queue = "other"  # type: ignore[misc]


def test_policies_and_depends_on_are_typed() -> None:
    [pol, code, bad] = policies_view(
        [
            {
                "events": ["PodFailed"],
                "event": "PodEvicted",
                "action": "RestartJob",
                "timeout": "1m",
            },
            {"exitCode": 3, "action": "AbortJob"},
            {"event": "PodPending", "timeout": "soon"},
        ]
    )
    assert pol == PolicyView(("PodFailed", "PodEvicted"), None, "RestartJob", 60.0)
    assert (code.exit_code, code.events, code.action) == (3, (), "AbortJob")
    assert (bad.timeout, bad.action) == (None, "")  # not a duration; no action: SyncJob
    tasks = [
        {"name": "a", "replicas": 1},
        {"name": "b", "replicas": 1, "dependsOn": {"name": ["a"], "iteration": "any"}},
        {"name": "c", "replicas": 1, "dependsOn": {"name": []}},
    ]
    a, b, c = job_view({"spec": {"tasks": tasks}}).tasks
    assert a.depends_on is None and c.depends_on is None  # no names: waits for nothing
    assert b.depends_on is not None and (b.depends_on.names, b.depends_on.iteration) == (
        ("a",),
        "any",
    )


def test_the_counts_the_last_status_write_recorded() -> None:
    status = {"taskStatusCount": {"w": {"phase": {"Running": 2, "Pending": 1}}, "x": {}}}
    st = job_view({"status": status}).status
    assert (st.counted("w"), st.counted("x"), st.counted("y")) == (3, 0, 0)
