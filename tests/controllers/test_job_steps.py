"""The named steps of reconcile_job, each a pure function tested on its own."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from batch.api.admission import AdmissionLimits
from batch.api.jobview import JobStatusView, TaskView, job_view
from batch.controllers import constants as c
from batch.controllers.effects import (
    CreateObject,
    DeleteObject,
    EmitEvent,
    ObjectRef,
    PatchObject,
    PatchStatus,
    ReconcileResult,
)
from batch.controllers.job import (
    LAYOUT_KEY,
    RETAIN_FINISHED,
    RETAIN_NONE,
    RETAINED_KEY,
    TIMERS_KEY,
    TOKEN_RETAIN,
    Choice,
    Decision,
    Killer,
    PodView,
    Request,
    announce,
    apply_ttl,
    choose_request,
    condemned,
    decide,
    desired_status,
    evictions_seen,
    evictions_under_way,
    fire_policies,
    initialise,
    job_plugins,
    level_phase,
    live_pods,
    may_create_pods,
    next_state,
    ordered_actions,
    plan_action,
    plan_kills,
    pod_events,
    podgroup_events,
    read_job,
    refuse_oversized,
    relayout,
    release_podgroup,
    settle_phase,
    status_patch,
    sync_children,
    sync_podgroup,
    take_command,
    task_events,
    ttl_due,
    vanished_pods,
    waiting_for_claims,
    write_status,
)
from batch.controllers.plugins import build_plugins

from .conftest import make_job, task

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def _task(name: str, replicas: int, min_available: int | None = None) -> TaskView:
    return TaskView(
        name=name,
        index=0,
        replicas=replicas,
        min_available=replicas if min_available is None else min_available,
        max_retry=3,
        template={},
        policies=(),
        depends_on=None,
        partition=None,
        topology_policy=None,
    )


def _status(status: dict[str, Any]) -> JobStatusView:
    return job_view({"status": status}).status


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
    state, conditions = next_state(_status(status), c.RUNNING, plan, no_class="", now=NOW)
    assert state["phase"] == c.PENDING and state["lastTransitionTime"] == "2026-12-01T10:00:00Z"
    assert [x["status"] for x in conditions] == [c.RUNNING, c.PENDING]
    same = plan_action(c.PENDING, None, c.SYNC_JOB, retry=0, max_retry=3, version=0)
    pending = _status({"state": {"phase": c.PENDING}})
    state, _ = next_state(pending, c.PENDING, same, no_class="x", now=NOW)
    assert state["message"] == "x"


def test_ttl_due() -> None:
    status = {"state": {"lastTransitionTime": "2026-12-01T09:59:30Z"}}
    ttl = job_view({"spec": {"ttlSecondsAfterFinished": 60}, "status": status})
    assert ttl_due(ttl, c.COMPLETED, c.COMPLETED, now=NOW) == NOW + timedelta(seconds=30)
    assert ttl_due(ttl, c.RUNNING, c.FAILED, now=NOW) == NOW + timedelta(seconds=60)
    assert ttl_due(ttl, c.RUNNING, c.RUNNING, now=NOW) is None
    no_ttl = job_view({"status": status})
    assert ttl_due(no_ttl, c.COMPLETED, c.COMPLETED, now=NOW) is None


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
    actions = initialise(job_view(job), ref, [], cres, min_av=2, now=NOW, priority_values=None)
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
    [create] = sync_podgroup(job_view(job), None, 0, priority_values=None)
    assert isinstance(create, CreateObject)
    pg = create.body
    assert sync_podgroup(job_view(job), pg, 0, priority_values=None) == []  # up to date
    [delete] = sync_podgroup(job_view(job), pg, 1, priority_values=None)  # older version: goes
    assert isinstance(delete, DeleteObject)
    job["spec"]["minAvailable"] = 1
    [patch] = sync_podgroup(job_view(job), pg, 0, priority_values=None)
    assert isinstance(patch, PatchObject) and patch.patch["spec"]["minMember"] == 1


def test_fire_policies_runs_the_first_due_action_and_keeps_pending_timers() -> None:
    job = _job()
    job["spec"]["policies"] = [
        {"event": c.POD_PENDING, "action": c.RESTART_JOB, "timeout": "60s"},
        {"event": c.POD_FAILED, "action": c.ABORT_JOB},
    ]
    view = job_view(job)
    pending = Request(event=c.POD_PENDING, task="w")  # no own time: timed from first sight
    failed = Request(event=c.POD_FAILED, task="w")
    fired = fire_policies(view, [pending, failed], {}, version=0, retry=0, now=NOW)
    assert fired.request is failed and fired.action == c.ABORT_JOB
    assert fired.waits == [60.0] and len(fired.timers) == 1
    later = NOW + timedelta(seconds=61)
    due = fire_policies(view, [pending], fired.timers, version=0, retry=0, now=later)
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
    status = _status({"version": 1, "retryCount": 0, "runningDuration": "5s"})
    assert status_patch(status, {"version": 1, "retryCount": 0}) is None
    assert status_patch(status, {"version": 2, "retryCount": 0}) == {"version": 2}
    assert status_patch(status, {"version": 1, "runningDuration": "9s"}) is None
    assert status_patch(_status({}), {"taskStatusCount": {}}) is None  # absent reads as empty


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


def test_read_job_takes_a_foreign_phase_for_pending_and_bad_counters_for_zero() -> None:
    job = _job()
    job["status"] = {"state": {"phase": "Weird"}, "version": -2, "retryCount": True}
    facts = read_job(job)
    assert facts.phase == c.PENDING and facts.notes == ("unknown phase 'Weird' taken as Pending",)
    assert (facts.version, facts.retry, facts.max_retry) == (0, 0, 3)
    assert facts.ref == ObjectRef(c.BATCH_API, "Job", "ns", "j", "u1")
    assert [t.name for t in facts.tasks] == ["w"] and facts.state == {"phase": "Weird"}
    unnamed = read_job({"metadata": {"name": "x"}})
    assert unnamed.phase == "" and unnamed.namespace == "default" and unnamed.notes == ()


def test_read_job_reads_min_available_once_with_the_webhook_default() -> None:
    job = make_job(tasks=[task("a", 2), task("b", 3, minAvailable=1)])
    assert read_job(job).min_available == 3  # the tasks' minAvailable summed
    job["spec"]["minAvailable"] = 4
    assert read_job(job).min_available == 4


def test_refuse_oversized_fails_a_new_job_and_leaves_a_scaled_one_alone() -> None:
    small = AdmissionLimits(replicas_per_task=1)
    job = _job()
    new = refuse_oversized(read_job(job), small, NOW)
    assert new is not None
    [status] = new.of_type(PatchStatus)
    assert status.status["state"]["phase"] == c.FAILED
    assert status.status["state"]["reason"] == "JobTooLarge"
    job["status"] = {"state": {"phase": c.RUNNING}}
    running = refuse_oversized(read_job(job), small, NOW)
    assert running is not None and running.of_type(PatchStatus) == []
    assert [e.reason for e in running.of_type(EmitEvent)] == ["JobTooLarge"]
    job["status"] = {"state": {"phase": c.COMPLETED}}
    assert refuse_oversized(read_job(job), small, NOW) is None  # finished: left as it is
    assert refuse_oversized(read_job(job), AdmissionLimits(), NOW) is None


def test_job_plugins_refuses_a_new_job_and_notes_bad_arguments_of_a_running_one() -> None:
    job = _job()
    job["spec"]["plugins"] = {"ssh": ["--ssh-port=notaport"]}
    notes: list[str] = []
    plugins, refused = job_plugins(read_job(job), notes, NOW)
    assert plugins == [] and refused is not None and notes == []
    assert refused.of_type(PatchStatus)[0].status["state"]["reason"] == "InvalidPluginArguments"
    job["status"] = {"state": {"phase": c.RUNNING}}
    plugins, refused = job_plugins(read_job(job), notes, NOW)
    assert plugins == [] and refused is None and "ssh-port" in notes[0]
    fine = _job()
    fine["spec"]["plugins"] = {"svc": []}
    plugins, refused = job_plugins(read_job(fine), notes, NOW)
    assert [p.name for p in plugins] == ["svc"] and refused is None
    bad = _job()
    bad["spec"]["tasks"][0]["template"]["spec"]["containers"] = [
        {"name": "m", "resources": {"requests": {"cpu": "lots"}}}
    ]
    _, refused = job_plugins(read_job(bad), notes, NOW)
    assert refused is not None
    assert refused.of_type(PatchStatus)[0].status["state"]["reason"] == "InvalidResources"


def test_live_pods_leaves_out_older_marked_and_condemned_pods() -> None:
    marked = _pv("j-w-2", "w", 2)
    marked.marked = True
    views = [_pv("j-w-0", "w", 0), _pv("j-w-1", "w", 1, version=0), marked, _pv("j-w-3", "w", 3)]
    killer = Killer("ns")
    killer.deleting.add("j-w-3")
    assert [v.name for v in live_pods(views, 1, killer)] == ["j-w-0"]


def _running_job(**status: Any) -> dict[str, Any]:
    job = _job()
    job["status"] = {"state": {"phase": c.RUNNING}, "minAvailable": 2, **status}
    return job


def _choose(job: dict[str, Any], cres: dict[str, str], **kw: Any) -> Choice:
    views = kw.pop("views", [])
    args: dict[str, Any] = {
        "commands": (),
        "current": views,
        "views": views,
        "deleted_pods": (),
        "podgroup": None,
        "token": None,
        "now": NOW,
    }
    return choose_request(read_job(job), cres, **{**args, **kw})


def test_choose_request_takes_a_command_first_and_keeps_the_timers_meanwhile() -> None:
    job = _running_job()
    job["spec"]["policies"] = [{"event": c.POD_FAILED, "action": c.ABORT_JOB}]
    failed = _pv("j-w-0", "w", 0, version=0, phase="Failed")
    timers = '{"v0/PodPending/w":{"since":"2026-12-01T09:59:00Z"}}'
    cres = {TIMERS_KEY: timers}
    cmd = _command("c", "u9", "2026-12-01T10:00:00Z", c.RESUME_JOB)
    choice = _choose(job, cres, commands=[cmd], views=[failed])
    assert choice.action == c.RESUME_JOB and choice.command is not None
    assert choice.request is not None and choice.request.event == c.COMMAND_ISSUED
    assert cres[TIMERS_KEY] == timers and cres[c.TOKEN_COMMAND] == "u9"
    cres = {TIMERS_KEY: timers}
    choice = _choose(job, cres, views=[failed])
    assert choice.action == c.ABORT_JOB and choice.request is not None
    assert choice.request.pod is failed and choice.command is None
    assert TIMERS_KEY not in cres  # the pending pod is gone: its timer goes


def test_choose_request_consults_no_policy_outside_the_active_phases() -> None:
    job = _running_job()
    job["status"]["state"]["phase"] = c.ABORTED
    job["spec"]["policies"] = [{"event": c.POD_FAILED, "action": c.RESTART_JOB}]
    cres = {TIMERS_KEY: '{"k":{"since":"2026-12-01T09:59:00Z"}}'}
    choice = _choose(job, cres, views=[_pv("j-w-0", "w", 0, version=0, phase="Failed")])
    assert choice.request is None and choice.action == c.SYNC_JOB and TIMERS_KEY not in cres


def test_choose_request_asks_to_look_again_when_a_timer_is_due() -> None:
    job = _running_job()
    job["spec"]["policies"] = [{"event": c.POD_PENDING, "action": c.RESTART_JOB, "timeout": "60s"}]
    pending = _pv("j-w-0", "w", 0, version=0, phase="Pending")
    cres: dict[str, str] = {}
    choice = _choose(job, cres, views=[pending])
    assert choice.request is None and choice.waits == [60.0] and TIMERS_KEY in cres


def test_announce_names_the_command_and_the_action() -> None:
    ref = ObjectRef(c.BATCH_API, "Job", "ns", "j")
    req = Request(event=c.COMMAND_ISSUED, action=c.ABORT_JOB)
    choice = Choice(request=req, action=c.ABORT_JOB, command=ref)
    plan = plan_action(c.RUNNING, req, c.ABORT_JOB, retry=0, max_retry=3, version=0)
    events = announce(ref, choice, plan)
    assert [e.reason for e in events] == [c.COMMAND_ISSUED, "ExecuteAction"]
    assert events[1].message == f"Start to execute action {c.ABORT_JOB}: {plan.message}"
    quiet = plan_action(c.RUNNING, None, c.SYNC_JOB, retry=0, max_retry=3, version=0)
    assert announce(ref, Choice(), quiet) == []


def test_settle_phase_finishing_a_running_job_orders_a_soft_kill() -> None:
    facts = read_job(_running_job())
    plan = plan_action(c.RUNNING, None, c.SYNC_JOB, retry=0, max_retry=3, version=0)
    tsc = {"w": {"phase": {"Succeeded": 2}}}
    assert settle_phase(plan, facts, _counts(succeeded=2), tsc, min_av=2) is True
    assert (plan.phase, plan.full_kill, plan.reason) == (c.COMPLETED, RETAIN_FINISHED, c.COMPLETED)
    failed = plan_action(c.RUNNING, None, c.SYNC_JOB, retry=0, max_retry=3, version=0)
    assert settle_phase(failed, facts, _counts(failed=2), {}, min_av=2) is True
    assert (failed.phase, failed.full_kill) == (c.FAILED, RETAIN_FINISHED)
    still = plan_action(c.RUNNING, None, c.SYNC_JOB, retry=0, max_retry=3, version=0)
    assert settle_phase(still, facts, _counts(running=2), {}, min_av=2) is False
    assert (still.phase, still.full_kill, still.reason) == (c.RUNNING, None, "")


def test_settle_phase_leaves_a_transition_the_request_ordered() -> None:
    facts = read_job(_running_job())
    req = Request(event=c.POD_FAILED)
    plan = plan_action(c.RUNNING, req, c.ABORT_JOB, retry=0, max_retry=3, version=0)
    assert settle_phase(plan, facts, _counts(succeeded=2), {}, min_av=2) is False
    assert plan.phase == c.ABORTING and plan.reason == c.POD_FAILED


def _pg(phase: str = "Inqueue", version: int = 0, **meta_: Any) -> dict[str, Any]:
    return {
        "apiVersion": c.SCHED_API,
        "kind": "PodGroup",
        "metadata": {
            "name": "j-u1",
            "namespace": "ns",
            "annotations": {c.PODGROUP_JOB_VERSION: str(version)},
            **meta_,
        },
        "status": {"phase": phase},
    }


def test_release_podgroup_in_a_kill_phase_once() -> None:
    pg = _pg()
    [delete] = release_podgroup(c.ABORTED, pg, [])
    assert delete.ref.kind == "PodGroup" and delete.ref.name == "j-u1"
    assert release_podgroup(c.ABORTED, pg, [delete]) == []  # already deleted by a kill
    assert release_podgroup(c.RUNNING, pg, []) == []
    assert release_podgroup(c.ABORTED, None, []) == []
    assert release_podgroup(c.ABORTED, _pg(deletionTimestamp="2026-12-01T10:00:00Z"), []) == []


def test_relayout_rewrites_plugin_objects_once_per_layout() -> None:
    job = _job()
    job["spec"]["plugins"] = {"svc": []}
    view = job_view(job)
    plugins = build_plugins(view)
    cres = {LAYOUT_KEY: "w=1"}
    [patch] = relayout(view, plugins, cres)
    assert patch.ref.kind == "ConfigMap" and "data" in patch.patch
    assert cres[LAYOUT_KEY] == "w=2"
    assert relayout(view, plugins, cres) == []


def test_sync_children_keeps_the_podgroup_in_line_while_no_full_kill_runs() -> None:
    job = job_view(_running_job())
    plan = plan_action(c.RUNNING, None, c.SYNC_JOB, retry=0, max_retry=3, version=1)
    result = ReconcileResult()
    cres = {LAYOUT_KEY: "w=2"}
    [delete], relaid = sync_children(
        job, [], _pg(version=0), plan, cres, result, priority_values=None
    )
    assert isinstance(delete, DeleteObject) and relaid == [] and result.requeue_after == 0.5
    killing = plan_action(
        c.RUNNING, Request(event=c.POD_FAILED), c.ABORT_JOB, retry=0, max_retry=3, version=1
    )
    assert sync_children(job, [], None, killing, cres, result, priority_values=None) == (
        [],
        [],
    )


def test_waiting_for_claims_blocks_pods_on_a_missing_named_claim() -> None:
    job = _job()
    job["spec"]["volumes"] = [{"mountPath": "/d", "volumeClaimName": "data"}]
    result = ReconcileResult()
    assert waiting_for_claims(job_view(job), {"data"}, result) is True
    assert result.notes == ["waiting for PersistentVolumeClaim(s) data"]
    assert result.requeue_after == 5.0
    assert waiting_for_claims(job_view(job), {"other"}, ReconcileResult()) is False


def test_may_create_pods_once_the_podgroup_of_this_version_is_admitted() -> None:
    plan = plan_action(c.RUNNING, None, c.SYNC_JOB, retry=0, max_retry=3, version=1)
    assert may_create_pods(plan, _pg("Inqueue", 1), blocked=False)
    assert not may_create_pods(plan, _pg("Inqueue", 1), blocked=True)
    assert not may_create_pods(plan, _pg("Pending", 1), blocked=False)
    assert not may_create_pods(plan, _pg("Inqueue", 0), blocked=False)  # older version
    assert not may_create_pods(plan, None, blocked=False)
    going = _pg("Inqueue", 1, deletionTimestamp="2026-12-01T10:00:00Z")
    assert not may_create_pods(plan, going, blocked=False)
    plan.phase = c.RESTARTING
    assert not may_create_pods(plan, _pg("Inqueue", 1), blocked=False)


def _decision(plan: Any, counters: dict[str, int] | None = None) -> Decision:
    return Decision(Choice(), plan, Killer("ns"), [], [], counters or _counts(), {})


def test_desired_status_counts_the_running_duration_while_it_runs() -> None:
    job = _running_job()
    job["metadata"]["creationTimestamp"] = "2026-12-01T09:58:00Z"
    facts = read_job(job)
    plan = plan_action(c.RUNNING, None, c.SYNC_JOB, retry=0, max_retry=3, version=0)
    done = _decision(plan, _counts(running=2))
    desired = desired_status(facts, done, {}, min_av=2, no_class="", now=NOW)
    assert desired["running"] == 2 and desired["runningDuration"] == "120s"
    assert desired["state"] == {"phase": c.RUNNING} and desired["minAvailable"] == 2
    job["status"]["state"]["phase"] = c.PENDING
    pending = plan_action(c.PENDING, None, c.SYNC_JOB, retry=0, max_retry=3, version=0)
    desired = desired_status(read_job(job), _decision(pending), {}, min_av=2, no_class="", now=NOW)
    assert "runningDuration" not in desired
    leaving = plan_action(c.RUNNING, None, c.SYNC_JOB, retry=0, max_retry=3, version=0)
    leaving.phase = c.COMPLETED
    job["status"]["state"]["phase"] = c.RUNNING
    desired = desired_status(read_job(job), _decision(leaving), {}, min_av=2, no_class="", now=NOW)
    assert desired["runningDuration"] == "120s"  # the last write of a job leaving Running


def test_write_status_only_when_something_changed() -> None:
    facts = read_job(_running_job(version=1))
    notes: list[str] = []
    assert write_status(facts, {"version": 1}, notes) == [] and notes == []
    [write] = write_status(facts, {"version": 2}, notes)
    assert isinstance(write, PatchStatus) and write.status == {"version": 2}
    assert notes == ["status: ['version']"]


def test_ordered_actions_marks_before_the_status_and_deletes_after_it() -> None:
    pod = ObjectRef("v1", "Pod", "ns", "p")
    cmd = ObjectRef(c.BUS_API, "Command", "ns", "now")
    old_cmd = DeleteObject(ObjectRef(c.BUS_API, "Command", "ns", "old"))
    mark, delete = PatchObject(pod, {}), DeleteObject(pod)
    event = EmitEvent(pod, "r", "m")
    relaid = PatchObject(ObjectRef("v1", "ConfigMap", "ns", "svc"), {})
    status = PatchStatus(ObjectRef(c.BATCH_API, "Job", "ns", "j"), {})
    kill = DeleteObject(ObjectRef("v1", "Pod", "ns", "q"))
    create = CreateObject({"kind": "Pod", "metadata": {"name": "r"}})
    choice = Choice(command=cmd, taken=[old_cmd])
    out = ordered_actions(choice, [mark, delete], [event], [relaid], [status], [kill], [create])
    assert out == [old_cmd, mark, event, relaid, status, delete, DeleteObject(cmd), kill, create]


def test_apply_ttl_deletes_a_finished_job_once_due() -> None:
    job = _job()
    job["spec"]["ttlSecondsAfterFinished"] = 60
    job["status"] = {"state": {"phase": c.COMPLETED, "lastTransitionTime": "2026-12-01T09:58:00Z"}}
    due = ReconcileResult()
    apply_ttl(due, read_job(job), c.COMPLETED, NOW)
    assert due.actions == [DeleteObject(ObjectRef(c.BATCH_API, "Job", "ns", "j", "u1"))]
    exactly = ReconcileResult()
    apply_ttl(exactly, read_job(job), c.COMPLETED, NOW - timedelta(seconds=60))
    assert len(exactly.actions) == 1
    later = ReconcileResult()
    apply_ttl(later, read_job(job), c.COMPLETED, NOW - timedelta(seconds=90))
    assert later.actions == [] and later.requeue_after == 30.0
    running = ReconcileResult()
    apply_ttl(running, read_job(_running_job()), c.RUNNING, NOW)
    assert running.actions == [] and running.requeue_after is None


def test_decide_restarts_the_job_on_a_failed_pod_and_kills_its_pods() -> None:
    job = _running_job()
    job["spec"]["policies"] = [{"event": c.POD_FAILED, "action": c.RESTART_JOB}]
    views = [_pv("j-w-0", "w", 0, version=0), _pv("j-w-1", "w", 1, version=0, phase="Failed")]
    result = ReconcileResult()
    cres: dict[str, str] = {}
    done = decide(
        read_job(job),
        views,
        _pg(),
        cres,
        result,
        commands=(),
        deleted_pods=(),
        min_av=2,
        now=NOW,
    )
    assert (done.plan.phase, done.plan.version, done.plan.retry) == (c.RESTARTING, 1, 1)
    assert done.killer.deleting == {"j-w-0", "j-w-1"} and done.condemned == []
    assert [a.ref.kind for a in done.kills] == ["Pod", "Pod", "PodGroup"]
    assert done.counters["terminating"] == 2 and cres[TOKEN_RETAIN] == RETAIN_NONE
    assert [e.reason for e in result.of_type(EmitEvent)] == ["ExecuteAction"]


def test_decide_finishing_the_job_kills_what_still_runs() -> None:
    job = _running_job()
    job["spec"]["minSuccess"] = 1
    views = [_pv("j-w-0", "w", 0, version=0, phase="Succeeded"), _pv("j-w-1", "w", 1, version=0)]
    cres: dict[str, str] = {}
    done = decide(
        read_job(job),
        views,
        _pg(),
        cres,
        ReconcileResult(),
        commands=(),
        deleted_pods=(),
        min_av=2,
        now=NOW,
    )
    assert (done.plan.phase, done.plan.version) == (c.COMPLETED, 1)
    assert done.killer.deleting == {"j-w-1"}  # the finished pod is kept
    assert [a.ref.kind for a in done.kills] == ["Pod", "PodGroup"]
    assert done.counters["terminating"] == 1 and done.counters["succeeded"] == 1


def _pod(name: str, task: str, index: int, *, version: int = 1, **extra: Any) -> dict[str, Any]:
    more = dict(extra.pop("metadata", {}))
    annotations = {c.TASK_SPEC: task, c.TASK_INDEX: str(index), c.JOB_VERSION: str(version)}
    annotations.update(more.pop("annotations", {}))
    meta_ = {"name": name, "uid": f"uid-{name}", "annotations": annotations, **more}
    return {"metadata": meta_, **extra}


def test_evictions_seen_are_of_current_pods_the_controller_did_not_delete() -> None:
    gone = "2026-12-01T09:59:00Z"
    deleted = [
        _pod("j-w-0", "w", 0, metadata={"deletionTimestamp": gone}),
        _pod("j-w-1", "w", 1, version=0),  # an older version
        _pod("j-w-2", "w", 2),  # back under its name
        _pod("j-w-3", "w", 3, metadata={"annotations": {c.OUT_OF_SYNC_ANNOTATION: "true"}}),
        _pod("j-x-0", "x", 0),  # aimed at by the kill token
    ]
    views = [_pv("j-w-2", "w", 2)]
    [r] = evictions_seen(deleted, views, 1, "task:x:5")
    assert (r.event, r.task, r.since) == (c.POD_EVICTED, "w", NOW - timedelta(minutes=1))
    assert r.pod is not None and r.pod.name == "j-w-0"


def test_vanished_pods_compare_the_live_pods_with_the_last_counts() -> None:
    job = _job()
    job["spec"]["tasks"] = [task("w", 2), task("x", 2), task("y", 1)]
    job["status"] = {
        "taskStatusCount": {"w": {"phase": {"Running": 1}}, "x": {"phase": {"Running": 2}}},
        "controlledResources": {RETAINED_KEY: '{"x":1}'},  # one counted pod of x was kept
    }
    view = job_view(job)
    views = [_pv("j-x-0", "x", 0), _pv("j-w-0", "w", 0, version=0)]  # w's pod is older
    assert [r.task for r in vanished_pods(view, views, 1, explicit=set())] == ["w"]
    assert vanished_pods(view, views, 1, explicit={"w"}) == []
    assert vanished_pods(view, views, 0, explicit=set()) == []  # w's pod counts


def test_evictions_under_way_are_deletions_by_someone_else() -> None:
    stamp = {"deletionTimestamp": "2026-12-01T09:59:30Z"}
    ours = {**stamp, "annotations": {c.OUT_OF_SYNC_ANNOTATION: "true"}}
    views = [
        PodView.of(_pod("a", "w", 0, metadata=stamp)),
        PodView.of(_pod("b", "w", 1, metadata=ours)),  # the controller's own kill
        PodView.of(_pod("c", "w", 2, version=0, metadata=stamp)),  # an older version
        PodView.of(_pod("d", "x", 0, metadata=stamp)),  # aimed at by the kill token
        _pv("e", "w", 3),
    ]
    [r] = evictions_under_way(views, 1, "task:x:5")
    assert r.pod is not None and r.pod.name == "a" and r.since == NOW - timedelta(seconds=30)


def test_pod_events_are_failed_and_pending_pods() -> None:
    failed = _pod(
        "f",
        "w",
        0,
        status={
            "phase": "Failed",
            "containerStatuses": [
                {"state": {"terminated": {"exitCode": 3, "finishedAt": "2026-12-01T09:58:00Z"}}}
            ],
        },
    )
    pending = _pod("p", "w", 1, metadata={"creationTimestamp": "2026-12-01T09:57:00Z"}, status={})
    views = [PodView.of(failed), PodView.of(pending), _pv("r", "w", 2)]
    first, second = pod_events(views)
    assert (first.event, first.exit_code, first.since) == (
        c.POD_FAILED,
        3,
        NOW - timedelta(minutes=2),
    )
    assert (second.event, second.since) == (c.POD_PENDING, NOW - timedelta(minutes=3))


def _restarted(name: str, task: str, index: int, restarts: int) -> PodView:
    status = {"phase": "Running", "containerStatuses": [{"restartCount": restarts}]}
    return PodView.of(_pod(name, task, index, status=status))


def test_task_events_complete_a_done_task_and_fail_one_restarting_too_often() -> None:
    done_at = "2026-12-01T09:59:00Z"
    finished = {
        "phase": "Succeeded",
        "containerStatuses": [{"state": {"terminated": {"finishedAt": done_at}}}],
    }
    current = [
        PodView.of(_pod("w0", "w", 0, status=finished)),
        PodView.of(_pod("w1", "w", 1, status=finished)),
        _restarted("x0", "x", 0, 2),
        _restarted("x1", "x", 1, 1),
        _restarted("y0", "y", 0, 1),
    ]
    tasks = [_task("w", 2), _task("x", 2), _task("y", 1), _task("z", 0)]  # max_retry 3
    events = task_events(tasks, current)
    assert [(r.event, r.task) for r in events] == [(c.TASK_COMPLETED, "w"), (c.TASK_FAILED, "x")]
    assert events[0].since == NOW - timedelta(minutes=1)
    never = replace(_task("x", 2), max_retry=0)  # no retries allowed, none made: not failed
    assert task_events([never], [_pv("x0", "x", 0)]) == []
    partly = task_events([_task("w", 2)], [*current[:1], _pv("w1", "w", 1, phase="Succeeded")])
    assert partly[0].since is None  # one pod's finish is unknown


def test_podgroup_events_raise_unknown_from_the_unschedulable_condition() -> None:
    pg = _pg(c.PG_UNKNOWN)
    pg["status"]["conditions"] = [
        {"type": "Unschedulable", "status": "True", "lastTransitionTime": "2026-12-01T09:59:00Z"},
        {"type": "Scheduled", "status": "True", "lastTransitionTime": "2026-12-01T09:59:50Z"},
    ]
    [r] = podgroup_events(pg)
    assert r.event == c.UNKNOWN_EVENT and r.since == NOW - timedelta(minutes=1)
    assert podgroup_events(_pg("Running")) == [] and podgroup_events(None) == []
