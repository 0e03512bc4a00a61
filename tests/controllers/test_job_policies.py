"""Lifecycle policies and the state machine (volcano-semantics.md#events-and-actions,
#policy-matching, #job-state-machine)."""

from __future__ import annotations

import pytest

from batch.api.jobview import job_view, policies_view
from batch.controllers import constants as c
from batch.controllers.job import Request, policy_action, select_action
from batch.controllers.memory import command

from .conftest import Harness, make_job, task


def _failed_job(policies: list[dict[str, object]], **kw: object) -> Harness:
    h = Harness(make_job(tasks=[task("worker", 2)], policies=policies, **kw))
    h.start()
    assert h.phase == c.RUNNING
    return h


def test_pod_failed_restart_job_bumps_version_and_retry() -> None:
    h = _failed_job([{"event": "PodFailed", "action": "RestartJob"}])
    h.pod("job-worker-0", "Failed", exit_code=3)
    h.step(1)
    st = h.status
    assert h.phase == c.RESTARTING or h.phase == c.PENDING
    assert st["retryCount"] == 1
    assert st["version"] == 1
    assert "Restarting" in [x["status"] for x in st["conditions"]]
    # the old PodGroup was deleted and a fresh one (Pending) was created for version 1
    pg = h.podgroup()
    assert pg is not None and pg["metadata"]["annotations"][c.PODGROUP_JOB_VERSION] == "1"
    assert h.phase == c.PENDING
    assert h.pods() == []
    h.admit()
    assert h.pod_names() == ["job-worker-0", "job-worker-1"]
    pod = h.cluster.get("Pod", "ns", "job-worker-0")
    assert pod is not None
    assert pod["metadata"]["annotations"][c.JOB_VERSION] == "1"
    assert pod["metadata"]["annotations"][c.JOB_RETRY_COUNT] == "1"


def test_restart_job_bounded_by_max_retry() -> None:
    h = _failed_job([{"event": "PodFailed", "action": "RestartJob"}], maxRetry=2)
    for expected in (1, 2):
        h.pod("job-worker-0", "Failed")
        h.step(1)
        assert h.status["retryCount"] == expected
        if h.phase == c.FAILED:
            break
        h.admit()
        h.run_all()
    assert h.phase == c.FAILED
    assert h.status["retryCount"] == 2


def test_restart_pod_only_kills_that_pod() -> None:
    h = _failed_job([{"event": "PodFailed", "action": "RestartPod"}])
    uid1 = h.cluster.get("Pod", "ns", "job-worker-1")["metadata"]["uid"]
    h.pod("job-worker-0", "Failed")
    h.step(1)
    assert h.status["retryCount"] == 1
    assert h.podgroup() is not None  # targeted kills keep the PodGroup
    names = h.pod_names()
    assert "job-worker-1" in names
    assert h.cluster.get("Pod", "ns", "job-worker-1")["metadata"]["uid"] == uid1
    # the restarted pod was recreated (PodGroup still Inqueue)
    assert "job-worker-0" in names
    assert (
        h.cluster.get("Pod", "ns", "job-worker-0")["metadata"]["annotations"][c.JOB_RETRY_COUNT]
        == "1"
    )
    h.run_all()
    assert h.phase == c.RUNNING
    assert h.status["retryCount"] == 1  # not repeated


def test_restart_task_kills_the_task_only() -> None:
    h = Harness(
        make_job(
            tasks=[
                task("ps", 1),
                task("worker", 2, policies=[{"event": "PodFailed", "action": "RestartTask"}]),
            ]
        )
    )
    h.start()
    ps_uid = h.cluster.get("Pod", "ns", "job-ps-0")["metadata"]["uid"]
    w_uid = h.cluster.get("Pod", "ns", "job-worker-1")["metadata"]["uid"]
    h.pod("job-worker-0", "Failed")
    h.step(1)
    assert h.status["retryCount"] == 1
    assert h.cluster.get("Pod", "ns", "job-ps-0")["metadata"]["uid"] == ps_uid
    assert h.cluster.get("Pod", "ns", "job-worker-1")["metadata"]["uid"] != w_uid


def test_restart_partition() -> None:
    part = {"totalPartitions": 2, "partitionSize": 2}
    h = Harness(
        make_job(
            tasks=[task("w", 4, partitionPolicy=part)],
            policies=[{"event": "PodFailed", "action": "RestartPartition"}],
        )
    )
    h.start()
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in h.pods()}
    assert h.cluster.get("Pod", "ns", "job-w-3")["metadata"]["labels"][c.PARTITION_ID] == "1"
    pg = h.podgroup()
    assert pg is not None and pg["spec"]["subGroupPolicy"][0]["subGroupSize"] == 2
    h.pod("job-w-2", "Failed")
    h.step(1)
    after = {p["metadata"]["name"]: p["metadata"]["uid"] for p in h.pods()}
    assert after["job-w-0"] == uids["job-w-0"] and after["job-w-1"] == uids["job-w-1"]
    assert after["job-w-2"] != uids["job-w-2"] and after["job-w-3"] != uids["job-w-3"]


@pytest.mark.parametrize(
    ("action", "closing", "final"),
    [
        ("AbortJob", c.ABORTING, c.ABORTED),
        ("TerminateJob", c.TERMINATING, c.TERMINATED),
        ("CompleteJob", c.COMPLETING, c.COMPLETED),
    ],
)
def test_soft_kill_actions(action: str, closing: str, final: str) -> None:
    h = Harness(
        make_job(
            tasks=[task("worker", 3)],
            min_available=1,
            policies=[{"event": "PodFailed", "action": action}],
        ),
        graceful=True,
    )
    h.start()
    h.pod("job-worker-0", "Succeeded")
    h.pod("job-worker-1", "Failed")
    h.step(1)
    assert h.phase == closing
    # kill(soft): the running pod is being deleted, finished pods are kept
    assert h.status["terminating"] == 1
    h.cluster.finish_deletions()
    h.step(1)
    assert h.phase == final
    assert h.pod_names() == ["job-worker-0", "job-worker-1"]
    assert h.podgroup() is None


def test_exit_code_policy_and_task_level_first() -> None:
    h = Harness(
        make_job(
            tasks=[task("worker", 2, policies=[{"exitCode": 3, "action": "AbortJob"}])],
            policies=[{"event": "PodFailed", "action": "RestartJob"}],
        )
    )
    h.start()
    h.pod("job-worker-0", "Failed", exit_code=3)
    h.step(1)
    assert h.phase in (c.ABORTING, c.ABORTED)
    # a different exit code falls through to the job-level PodFailed policy
    h2 = Harness(
        make_job(
            tasks=[task("worker", 2, policies=[{"exitCode": 3, "action": "AbortJob"}])],
            policies=[{"event": "PodFailed", "action": "RestartJob"}],
        )
    )
    h2.start()
    h2.pod("job-worker-0", "Failed", exit_code=4)
    h2.step(1)
    assert h2.status["retryCount"] == 1


def test_pod_evicted_from_deletion_not_by_controller() -> None:
    h = Harness(make_job(policies=[{"event": "PodEvicted", "action": "RestartJob"}]), graceful=True)
    h.start()
    pod = h.cluster.get("Pod", "ns", "job-worker-0")
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    h.step(1)
    assert h.status["retryCount"] == 1
    # the same deletion does not restart again
    h.step(1)
    assert h.status["retryCount"] == 1


def test_pod_evicted_from_watch_memory() -> None:
    h = Harness(make_job(policies=[{"event": "PodEvicted", "action": "AbortJob"}]))
    h.start()
    gone = h.cluster.get("Pod", "ns", "job-worker-1")
    del h.cluster.objects[("Pod", "ns", "job-worker-1")]
    h.cluster.reconcile("ns", "job", now=h.clock.tick(1), deleted_pods=[gone])
    assert h.phase == c.ABORTING


def test_controller_deletions_are_not_evictions() -> None:
    h = Harness(
        make_job(
            tasks=[task("worker", 3)],
            min_available=1,
            policies=[{"event": "PodEvicted", "action": "RestartJob"}],
        ),
        graceful=True,
    )
    h.start()
    h.cluster.get("Job", "ns", "job")["spec"]["tasks"][0]["replicas"] = 1
    h.step(1)
    h.step(1)
    assert h.status["retryCount"] == 0
    assert h.status["terminating"] == 2


def _resumed_with_a_kept_pod() -> Harness:
    """worker-0 Succeeded, then suspend/resume: the finished pod (version 0) is kept."""
    h = Harness(
        make_job(
            tasks=[task("worker", 2)],
            min_available=1,
            policies=[{"event": "PodEvicted", "action": "RestartJob"}],
        )
    )
    h.start()
    h.pod("job-worker-0", "Succeeded")
    h.step(1)
    h.cluster.add(command(h.job, "AbortJob"))
    h.step(1)
    h.cluster.add(command(h.job, "ResumeJob", name="job-resume"))
    h.step(1)
    h.admit()
    assert h.status["version"] == 2 and h.status["retryCount"] == 1
    kept = h.cluster.get("Pod", "ns", "job-worker-0")
    assert kept is not None and kept["metadata"]["annotations"][c.JOB_VERSION] == "0"
    return h


@pytest.mark.parametrize("watched", [True, False])
def test_deleting_a_kept_old_version_pod_is_no_eviction(watched: bool) -> None:
    h = _resumed_with_a_kept_pod()
    old = h.cluster.get("Pod", "ns", "job-worker-0")
    del h.cluster.objects[("Pod", "ns", "job-worker-0")]
    h.cluster.reconcile("ns", "job", now=h.clock.tick(1), deleted_pods=[old] if watched else [])
    h.step()
    assert h.status["retryCount"] == 1
    assert h.status["version"] == 2
    pod = h.cluster.get("Pod", "ns", "job-worker-0")  # simply recreated at the current version
    assert pod is not None and pod["metadata"]["annotations"][c.JOB_VERSION] == "2"


def test_a_current_pod_vanishing_next_to_a_kept_one_is_an_eviction() -> None:
    h = _resumed_with_a_kept_pod()
    del h.cluster.objects[("Pod", "ns", "job-worker-1")]  # while the controller was down
    h.step(1)
    assert h.status["retryCount"] == 2


def test_unknown_event() -> None:
    h = _failed_job([{"event": "Unknown", "action": "RestartJob"}])
    h.cluster.set_podgroup_phase(h.job, "Unknown")
    h.step(1)
    assert h.status["retryCount"] == 1


def test_task_completed_complete_job() -> None:
    h = Harness(
        make_job(
            tasks=[
                task("master", 1, policies=[{"event": "TaskCompleted", "action": "CompleteJob"}]),
                task("worker", 2),
            ],
            min_available=3,
        ),
        graceful=True,
    )
    h.start()
    h.pod("job-master-0", "Succeeded")
    h.step(1)
    assert h.phase == c.COMPLETING
    h.cluster.finish_deletions()
    h.step(1)
    assert h.phase == c.COMPLETED


def test_task_failed_from_restart_counts() -> None:
    h = Harness(
        make_job(
            tasks=[task("worker", 2, maxRetry=2)],
            policies=[{"event": "TaskFailed", "action": "TerminateJob"}],
        )
    )
    h.start()
    h.pod("job-worker-0", "Running", restarts=1)
    h.step(1)
    assert h.phase == c.RUNNING
    h.pod("job-worker-1", "Running", restarts=1)
    h.step(1)
    assert h.phase in (c.TERMINATING, c.TERMINATED)


def test_pod_pending_timeout() -> None:
    h = Harness(
        make_job(policies=[{"event": "PodPending", "action": "AbortJob", "timeout": "60s"}])
    )
    h.step()
    h.admit()
    res = h.step(10)
    assert h.phase == c.PENDING
    assert res.requeue_after is not None and 49 <= res.requeue_after <= 50
    h.step(51)
    assert h.phase in (c.ABORTING, c.ABORTED)


def test_pod_pending_without_timeout_never_matches() -> None:
    req = Request(event=c.POD_PENDING, task="worker")
    assert (
        policy_action(policies_view([{"event": "PodPending", "action": "AbortJob"}]), req) is None
    )
    assert policy_action(policies_view([{"events": ["*"], "action": "AbortJob"}]), req) is None
    assert select_action(job_view(make_job()), req) == (c.SYNC_JOB, None)
    assert policy_action(
        policies_view([{"event": "*", "action": "AbortJob", "timeout": "1m"}]), req
    ) == (
        "AbortJob",
        60.0,
    )


def test_pod_failed_timeout_cancelled_when_pod_runs_again() -> None:
    h = _failed_job([{"event": "PodFailed", "action": "RestartJob", "timeout": "30s"}])
    h.pod("job-worker-0", "Failed")
    h.step(10)
    assert h.status["retryCount"] == 0
    h.pod("job-worker-0", "Running")
    h.step(40)
    assert h.status["retryCount"] == 0
    assert h.phase == c.RUNNING


def test_no_policy_means_sync() -> None:
    h = _failed_job([])
    h.pod("job-worker-0", "Failed")
    h.step(1)
    assert h.phase == c.RUNNING
    assert h.status["failed"] == 1


# ---- Commands --------------------------------------------------------------------------------


def test_abort_and_resume_commands_execute_once() -> None:
    h = Harness(make_job(tasks=[task("worker", 2)]), graceful=True)
    h.start()
    h.cluster.add(command(h.job, "AbortJob"))
    h.step(1)
    assert h.phase == c.ABORTING
    assert h.cluster.objects_of("Command") == []
    assert [e.reason for e in h.cluster.events] == ["CommandIssued", "ExecuteAction"]
    h.cluster.finish_deletions()
    h.step(1)
    assert h.phase == c.ABORTED
    retry = h.status["retryCount"]
    h.cluster.add(command(h.job, "ResumeJob"))
    h.step(1)
    assert h.status["retryCount"] == retry + 1
    assert h.phase in (c.RESTARTING, c.PENDING)
    h.step(1)
    assert h.phase == c.PENDING
    h.admit()
    assert h.pod_names() == ["job-worker-0", "job-worker-1"]


def test_command_already_recorded_is_only_deleted() -> None:
    h = Harness(make_job())
    h.start()
    cmd = h.cluster.add(command(h.job, "RestartJob"))
    # the controller crashed after writing the status but before deleting the Command
    res = h.cluster.reconcile("ns", "job", now=h.clock.tick(1))
    assert h.status["retryCount"] == 1
    h.cluster.add(cmd)  # the delete "never happened"
    h.step(1)
    assert h.status["retryCount"] == 1
    assert h.cluster.objects_of("Command") == []
    del res


def test_terminate_and_complete_commands() -> None:
    for action, final in (("TerminateJob", c.TERMINATED), ("CompleteJob", c.COMPLETED)):
        h = Harness(make_job())
        h.start()
        h.cluster.add(command(h.job, action))
        h.step(1)
        assert h.phase == final
        assert h.pods() == []


def test_restart_job_command_from_pending() -> None:
    h = Harness(make_job())
    h.step()
    h.cluster.add(command(h.job, "RestartJob"))
    h.step(1)
    assert h.status["retryCount"] == 1
    assert h.phase == c.PENDING


def test_failed_after_max_retry_leaves_no_podgroup() -> None:
    h = _failed_job([{"event": "PodFailed", "action": "RestartJob"}], maxRetry=1)
    h.pod("job-worker-0", "Failed")
    h.step(1)
    assert h.phase == c.FAILED
    assert h.status["retryCount"] == 1
    assert h.podgroup() is None
    assert h.step(1).actions == []


def test_restarting_job_handles_a_second_pod_event() -> None:
    # RestartPod on worker-0 puts the job in Restarting; worker-1 fails before the job is back
    # in Pending: it is restarted as well, without a second retryCount increment (Volcano's
    # Restarting row: targeted kill, same check).
    h = Harness(
        make_job(
            tasks=[task("worker", 2)], policies=[{"event": "PodFailed", "action": "RestartPod"}]
        ),
        graceful=True,
    )
    h.start()
    h.pod("job-worker-0", "Failed")
    h.cluster.reconcile("ns", "job", now=h.clock.tick(1))
    assert h.phase == c.RESTARTING
    assert h.status["retryCount"] == 1
    h.pod("job-worker-1", "Failed")
    h.cluster.reconcile("ns", "job", now=h.clock.tick(1))
    w1 = h.cluster.get("Pod", "ns", "job-worker-1")
    assert w1 is not None and w1["metadata"].get("deletionTimestamp")
    assert h.status["retryCount"] == 1
    h.cluster.finish_deletions()
    h.step(1)
    assert h.phase == c.PENDING
    assert h.pod_names() == ["job-worker-0", "job-worker-1"]
