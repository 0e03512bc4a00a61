"""The named steps of reconcile_job, each a pure function tested on its own."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from batch.controllers import constants as c
from batch.controllers.actions import (
    CreateObject,
    DeleteObject,
    ObjectRef,
    PatchObject,
    PatchStatus,
)
from batch.controllers.job import (
    LAYOUT_KEY,
    RETAIN_FINISHED,
    RETAIN_NONE,
    TOKEN_RETAIN,
    Killer,
    PodView,
    Request,
    condemned,
    fire_policies,
    initialise,
    level_phase,
    next_state,
    plan_action,
    plan_kills,
    status_patch,
    sync_podgroup,
    take_command,
    ttl_due,
)
from batch.controllers.jobspec import TaskView, tasks_of

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def _task(name: str, replicas: int, min_available: int | None = None) -> TaskView:
    return TaskView(
        name=name,
        index=0,
        replicas=replicas,
        min_available=replicas if min_available is None else min_available,
        max_retry=3,
        template={},
        policies=[],
        depends_on=None,
        partition=None,
        topology_policy=None,
    )


def _counts(**kw: int) -> dict[str, int]:
    base = {"pending": 0, "running": 0, "succeeded": 0, "failed": 0, "terminating": 0}
    return {**base, **kw}


def test_plan_restart_job_counts_a_retry_and_keeps_finished_pods_on_the_last_one() -> None:
    req = Request(event=c.POD_FAILED)
    first = plan_action(c.RUNNING, req, c.RESTART_JOB, retry=0, max_retry=3, version=4)
    assert (first.phase, first.retry, first.full_kill) == (c.RESTARTING, 1, RETAIN_NONE)
    assert first.message == f"{c.RESTART_JOB} on {c.POD_FAILED}"
    last = plan_action(c.RUNNING, req, c.RESTART_JOB, retry=2, max_retry=3, version=4)
    assert last.full_kill == RETAIN_FINISHED


def test_plan_abort_resume_and_sync() -> None:
    req = Request(event=c.COMMAND_ISSUED, action=c.ABORT_JOB)
    abort = plan_action(c.PENDING, req, c.ABORT_JOB, retry=0, max_retry=3, version=0)
    assert (abort.phase, abort.full_kill, abort.reason) == (
        c.ABORTING,
        RETAIN_FINISHED,
        "CommandIssued",
    )
    resume = plan_action(c.ABORTED, req, c.RESUME_JOB, retry=1, max_retry=3, version=2)
    assert (resume.phase, resume.retry) == (c.RESTARTING, 2)
    idle = plan_action(c.RUNNING, None, c.SYNC_JOB, retry=0, max_retry=3, version=0)
    assert (idle.phase, idle.full_kill, idle.target, idle.message) == (c.RUNNING, None, None, "")


def test_level_phase_rows() -> None:
    tasks = [_task("w", 4, 2)]
    kw: dict[str, Any] = {"min_av": 2, "min_success": None, "retry": 0, "max_retry": 3}
    assert level_phase(c.PENDING, tasks, _counts(running=2), {}, restart_min=2, **kw) == c.RUNNING
    assert level_phase(c.PENDING, tasks, _counts(running=1), {}, restart_min=2, **kw) == c.PENDING
    assert level_phase(
        c.RUNNING, tasks, _counts(pending=3, running=1), {}, restart_min=2, **kw
    ) == (
        c.PENDING  # too many pending to keep minAvailable
    )
    done = _counts(succeeded=4)
    tsc = {"w": {"phase": {"Succeeded": 4}}}
    assert level_phase(c.RUNNING, tasks, done, tsc, restart_min=2, **kw) == c.COMPLETED
    failed = {**kw, "retry": 3}
    assert level_phase(c.RESTARTING, tasks, _counts(), {}, restart_min=2, **failed) == c.FAILED
    assert level_phase(c.ABORTING, tasks, _counts(terminating=1), {}, restart_min=2, **kw) == (
        c.ABORTING
    )
    assert level_phase(c.COMPLETING, tasks, _counts(), {}, restart_min=2, **kw) == c.COMPLETED


def test_next_state_moves_a_reentered_phase_condition_to_the_end() -> None:
    status = {
        "state": {"phase": c.RUNNING},
        "conditions": [{"status": c.PENDING}, {"status": c.RUNNING}],
    }
    plan = plan_action(c.RUNNING, None, c.SYNC_JOB, retry=0, max_retry=3, version=0)
    plan.phase, plan.reason = c.PENDING, c.PENDING
    state, conditions = next_state(status, c.RUNNING, plan, no_class="", now=NOW)
    assert state["phase"] == c.PENDING and state["lastTransitionTime"] == "2026-12-01T10:00:00Z"
    assert [x["status"] for x in conditions] == [c.RUNNING, c.PENDING]
    same = plan_action(c.PENDING, None, c.SYNC_JOB, retry=0, max_retry=3, version=0)
    state, _ = next_state({"state": {"phase": c.PENDING}}, c.PENDING, same, no_class="x", now=NOW)
    assert state["message"] == "x"


def test_ttl_due() -> None:
    spec = {"ttlSecondsAfterFinished": 60}
    earlier = {"lastTransitionTime": "2026-12-01T09:59:30Z"}
    assert ttl_due(spec, earlier, c.COMPLETED, c.COMPLETED, now=NOW) == NOW + timedelta(seconds=30)
    assert ttl_due(spec, earlier, c.RUNNING, c.FAILED, now=NOW) == NOW + timedelta(seconds=60)
    assert ttl_due(spec, earlier, c.RUNNING, c.RUNNING, now=NOW) is None
    assert ttl_due({}, earlier, c.COMPLETED, c.COMPLETED, now=NOW) is None


def _job() -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "uid": "u1"},
        "spec": {
            "minAvailable": 2,
            "tasks": [{"name": "w", "replicas": 2, "template": {"spec": {"containers": []}}}],
        },
    }


def test_initialise_makes_the_pending_status_and_the_podgroup() -> None:
    job = _job()
    ref = ObjectRef(c.BATCH_API, "Job", "ns", "j", "u1")
    cres: dict[str, str] = {}
    actions = initialise(job, ref, tasks_of(job), [], cres, min_av=2, now=NOW, priority_values=None)
    [status] = [a for a in actions if isinstance(a, PatchStatus)]
    assert status.status["state"]["phase"] == c.PENDING and status.status["minAvailable"] == 2
    [pg] = [a.body for a in actions if isinstance(a, CreateObject)]
    assert pg["kind"] == "PodGroup" and pg["metadata"]["name"] == "j-u1"
    assert cres == {LAYOUT_KEY: "w=2"}


def _command(name: str, uid: str, created: str, action: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": uid, "creationTimestamp": created},
        "action": action,
    }


def test_take_command_takes_the_oldest_and_deletes_one_already_taken() -> None:
    cres = {c.TOKEN_COMMAND: "done"}
    commands = [
        _command("late", "u3", "2026-12-01T10:00:02Z", c.RESUME_JOB),
        _command("old", "done", "2026-12-01T10:00:00Z", c.ABORT_JOB),
        _command("next", "u2", "2026-12-01T10:00:01Z", c.ABORT_JOB),
    ]
    req, ref, done = take_command(commands, "ns", cres)
    assert req is not None and req.action == c.ABORT_JOB
    assert ref is not None and ref.name == "next" and cres[c.TOKEN_COMMAND] == "u2"
    assert [a.ref.name for a in done] == ["old"]
    assert take_command([], "ns", {}) == (None, None, [])


def test_sync_podgroup_creates_replaces_or_patches() -> None:
    job = _job()
    [create] = sync_podgroup(job, None, 0, priority_values=None)
    assert isinstance(create, CreateObject)
    pg = create.body
    assert sync_podgroup(job, pg, 0, priority_values=None) == []  # up to date
    [delete] = sync_podgroup(job, pg, 1, priority_values=None)  # older version: it goes
    assert isinstance(delete, DeleteObject)
    job["spec"]["minAvailable"] = 1
    [patch] = sync_podgroup(job, pg, 0, priority_values=None)
    assert isinstance(patch, PatchObject) and patch.patch["spec"]["minMember"] == 1


def test_fire_policies_runs_the_first_due_action_and_keeps_pending_timers() -> None:
    job = _job()
    job["spec"]["policies"] = [
        {"event": c.POD_PENDING, "action": c.RESTART_JOB, "timeout": "60s"},
        {"event": c.POD_FAILED, "action": c.ABORT_JOB},
    ]
    tasks = tasks_of(job)
    pending = Request(event=c.POD_PENDING, task="w")  # no own time: timed from first sight
    failed = Request(event=c.POD_FAILED, task="w")
    fired = fire_policies(job, tasks, [pending, failed], {}, version=0, retry=0, now=NOW)
    assert fired.request is failed and fired.action == c.ABORT_JOB
    assert fired.waits == [60.0] and len(fired.timers) == 1
    later = NOW + timedelta(seconds=61)
    due = fire_policies(job, tasks, [pending], fired.timers, version=0, retry=0, now=later)
    assert due.request is pending and due.action == c.RESTART_JOB and due.timers == {}


def _pv(name: str, task: str, index: int, *, version: int = 1, phase: str = "Running") -> PodView:
    return PodView.of(
        {
            "metadata": {
                "name": name,
                "uid": f"uid-{name}",
                "annotations": {
                    c.TASK_SPEC: task,
                    c.TASK_INDEX: str(index),
                    c.JOB_VERSION: str(version),
                },
            },
            "status": {"phase": phase},
        }
    )


def test_condemned_kills_old_versions_scaled_down_pods_and_each_pod_once() -> None:
    tasks = [_task("w", 2)]
    views = [
        _pv("j-w-0", "w", 0),
        _pv("j-w-1", "w", 1, version=0),  # older version, running: goes
        _pv("j-w-2", "w", 2),  # beyond replicas: marked, then deleted
        _pv("j-x-0", "x", 0),  # a task the job no longer has
        _pv("j-w-3", "w", 3, version=0, phase="Succeeded"),  # older but finished: kept
    ]
    killer = Killer("ns")
    out = condemned(
        views, tasks, killer, phase=c.RUNNING, version=1, retain=RETAIN_FINISHED, token=None
    )
    assert killer.deleting == {"j-w-1", "j-w-2", "j-x-0"}
    assert [type(a).__name__ for a in out] == [
        "DeleteObject",
        "PatchObject",
        "DeleteObject",
        "PatchObject",
        "DeleteObject",
    ]
    again: list[Any] = []
    killer.kill(views[1], mark=False, into=again)
    assert again == []  # already condemned this reconcile
    soft = Killer("ns")
    condemned(views, tasks, soft, phase=c.ABORTING, version=1, retain=RETAIN_FINISHED, token=None)
    assert "j-w-0" in soft.deleting and "j-w-3" not in soft.deleting


def test_status_patch_writes_only_what_changed_and_not_a_duration_alone() -> None:
    status = {"version": 1, "retryCount": 0, "runningDuration": "5s"}
    assert status_patch(status, {"version": 1, "retryCount": 0}) is None
    assert status_patch(status, {"version": 2, "retryCount": 0}) == {"version": 2}
    assert status_patch(status, {"version": 1, "runningDuration": "9s"}) is None
    assert status_patch({}, {"taskStatusCount": {}}) is None  # absent reads as empty


def test_plan_kills_full_kill_bumps_the_version_and_drops_the_podgroup() -> None:
    views = [_pv("j-w-0", "w", 0), _pv("j-w-1", "w", 1, phase="Succeeded")]
    pg = {"apiVersion": c.SCHED_API, "metadata": {"name": "j-u1", "namespace": "ns"}}
    plan = plan_action(
        c.RUNNING, Request(event=c.POD_FAILED), c.RESTART_JOB, retry=2, max_retry=3, version=1
    )
    cres: dict[str, str] = {}
    killer = Killer("ns")
    out = plan_kills(plan, views, views, pg, killer, cres, version=1)
    assert plan.version == 2 and killer.deleting == {"j-w-0"}  # last retry keeps finished pods
    assert [a.ref.kind for a in out] == ["Pod", "PodGroup"]
    assert cres == {TOKEN_RETAIN: RETAIN_FINISHED}
