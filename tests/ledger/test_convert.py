"""Converters from Kubernetes objects, and a VCJob's whole life recorded and reported."""

from __future__ import annotations

import copy
import datetime as dt
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

from batch.ledger import events as ev
from batch.ledger.convert import (
    events_from_job,
    events_from_pod,
    events_from_podgroup,
    events_from_queue,
    parse_time,
    pod_requests,
    usage_samples_from_queues,
)
from batch.ledger.recorder import Recorder
from batch.ledger.reports import Filters, outcomes, usage, wait_times

from .helpers import rows, snapshot

T0 = dt.datetime(2026, 11, 20, 9, 0, tzinfo=dt.UTC)


def ts(seconds: float) -> str:
    return (T0 + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def vcjob() -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {
            "name": "mnist",
            "namespace": "ml",
            "uid": "job-uid-1",
            "creationTimestamp": ts(0),
            "annotations": {"tephra.io/submitter": "alice"},
        },
        "spec": {
            "minAvailable": 2,
            "queue": "research",
            "priorityClassName": "high",
            "tasks": [
                {
                    "name": "worker",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "c",
                                    "resources": {
                                        "requests": {"cpu": "500m", "memory": "1Gi"},
                                        "limits": {"nvidia.com/gpu": "1"},
                                    },
                                }
                            ]
                        }
                    },
                }
            ],
        },
    }


def with_phase(job: dict[str, Any], phase: str, at: float, **status: Any) -> dict[str, Any]:
    new = copy.deepcopy(job)
    st = new.setdefault("status", {})
    st["state"] = {"phase": phase, "lastTransitionTime": ts(at), "reason": f"{phase}Reason"}
    conds = [c for c in st.get("conditions", []) if c["status"] != phase]
    st["conditions"] = [*conds, {"status": phase, "lastTransitionTime": ts(at)}]
    st.update(status)
    return new


def podgroup(phase: str, at: float) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": "mnist-job-uid-1",
            "namespace": "ml",
            "uid": "pg-uid-1",
            "creationTimestamp": ts(1),
            "ownerReferences": [
                {"kind": "Job", "name": "mnist", "uid": "job-uid-1", "controller": True}
            ],
        },
        "spec": {"minMember": 2, "queue": "research"},
        "status": {
            "phase": phase,
            "conditions": [{"type": "Scheduled", "status": "True", "lastTransitionTime": ts(at)}],
        },
    }


def pod(i: int) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {
            "name": f"mnist-worker-{i}",
            "namespace": "ml",
            "uid": f"pod-uid-{i}",
            "creationTimestamp": ts(20),
            "annotations": {
                "scheduling.k8s.io/group-name": "mnist-job-uid-1",
                "volcano.sh/task-spec": "worker",
                "volcano.sh/queue-name": "research",
            },
            "ownerReferences": [
                {"kind": "Job", "name": "mnist", "uid": "job-uid-1", "controller": True}
            ],
        },
        "spec": vcjob()["spec"]["tasks"][0]["template"]["spec"] | {"schedulerName": "tephra"},
        "status": {"phase": "Pending"},
    }


def bound(p: dict[str, Any], node: str, at: float) -> dict[str, Any]:
    new = copy.deepcopy(p)
    new["spec"]["nodeName"] = node
    new["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": ts(at)}
    ]
    return new


def running(p: dict[str, Any], at: float) -> dict[str, Any]:
    new = copy.deepcopy(p)
    new["status"].update(
        phase="Running",
        startTime=ts(at - 1),
        containerStatuses=[
            {"name": "c", "restartCount": 0, "state": {"running": {"startedAt": ts(at)}}}
        ],
    )
    return new


def finished(p: dict[str, Any], at: float, code: int) -> dict[str, Any]:
    new = copy.deepcopy(p)
    started = new["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
    new["status"]["phase"] = "Succeeded" if code == 0 else "Failed"
    new["status"]["containerStatuses"][0]["state"] = {
        "terminated": {"exitCode": code, "startedAt": started, "finishedAt": ts(at)}
    }
    return new


def lifecycle() -> list[ev.LedgerEvent]:
    """What the controllers see while a 2-pod VCJob runs for an hour on the sandbox."""
    out: list[ev.LedgerEvent] = []
    j0 = vcjob()
    j1 = with_phase(j0, "Pending", 0, minAvailable=2)
    out += events_from_job(None, j0) + events_from_job(j0, j1)
    pg0, pg1, pg2 = podgroup("Pending", 1), podgroup("Inqueue", 10), podgroup("Running", 45)
    out += events_from_podgroup(None, pg0) + events_from_podgroup(pg0, pg1)
    pods = [pod(0), pod(1)]
    for i, p in enumerate(pods):
        b = bound(p, f"gpu-node-{i}", 40)
        r = running(b, 45)
        f = finished(r, 3645, 0)
        out += events_from_pod(None, p) + events_from_pod(p, b) + events_from_pod(b, r)
        out += events_from_pod(r, r)  # no change, no event
        out += events_from_pod(r, f)
    out += events_from_podgroup(pg1, pg2)
    j2 = with_phase(j1, "Running", 45, running=2)
    j3 = with_phase(j2, "Completing", 3646)
    j4 = with_phase(j3, "Completed", 3647, succeeded=2)
    out += events_from_job(j1, j2) + events_from_job(j2, j3) + events_from_job(j3, j4)
    return out


def test_vcjob_observation_and_requests() -> None:
    job = with_phase(vcjob(), "Pending", 0)
    observed = [e for e in events_from_job(None, job) if isinstance(e, ev.JobObserved)]
    assert len(observed) == 1
    o = observed[0]
    assert (o.uid, o.namespace, o.name, o.kind, o.queue) == (
        "job-uid-1",
        "ml",
        "mnist",
        "VCJob",
        "research",
    )
    assert o.submitter == "alice" and o.priority_class == "high"
    assert o.requested_cpu_milli == 1000 and o.requested_gpu_milli == 2000
    assert o.requested_memory_bytes == 2 * 2**30
    assert o.replicas == {"worker": 2} and o.min_available == 2
    assert o.podgroup == "mnist-job-uid-1"
    assert events_from_job(job, copy.deepcopy(job)) == []  # nothing changed


def test_restart_relist_yields_the_same_identities() -> None:
    job = with_phase(with_phase(vcjob(), "Pending", 0), "Running", 45)
    first = {e.identity for e in events_from_job(None, job)}
    again = {e.identity for e in events_from_job(None, copy.deepcopy(job))}
    assert first == again
    assert (
        "job-phase",
        "job-uid-1",
        "job",
        "Running",
        (T0 + dt.timedelta(seconds=45)).isoformat(),
    ) in first


def test_pod_attempt_fields() -> None:
    p = finished(running(bound(pod(0), "n1", 40), 45), 100, 137)
    (attempt,) = events_from_pod(None, p)
    assert isinstance(attempt, ev.PodAttempt)
    assert (
        attempt.job_uid == "job-uid-1" and attempt.role == "worker" and attempt.queue == "research"
    )
    assert attempt.node == "n1" and attempt.gpu_milli == 1000 and attempt.cpu_milli == 500
    assert attempt.bound_at == parse_time(ts(40)) and attempt.started_at == parse_time(ts(45))
    assert attempt.finished_at == parse_time(ts(100))
    assert (attempt.exit_code, attempt.outcome) == (137, "Failed")
    gone = events_from_pod(
        running(bound(pod(1), "n2", 40), 45), None, now=T0 + dt.timedelta(seconds=50)
    )
    assert isinstance(gone[0], ev.PodAttempt) and gone[0].outcome == "Deleted"
    assert gone[0].finished_at == T0 + dt.timedelta(seconds=50)


def test_evicted_pod_records_the_disruption_reason() -> None:
    p = running(bound(pod(0), "n1", 40), 45)
    p["status"]["conditions"].append(
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
    )
    (attempt,) = events_from_pod(None, p)
    assert isinstance(attempt, ev.PodAttempt) and attempt.eviction_cause == "PreemptionByScheduler"


def test_queue_changes_and_samples() -> None:
    q = {
        "kind": "Queue",
        "metadata": {"name": "research", "uid": "q-uid"},
        "spec": {
            "weight": 2,
            "capability": {"nvidia.com/gpu": "8"},
            "deserved": {"nvidia.com/gpu": "4"},
        },
        "status": {"state": "Open", "allocated": {"nvidia.com/gpu": "3", "cpu": "1500m"}},
    }
    (change,) = events_from_queue(None, q, now=T0)
    assert isinstance(change, ev.QueueConfigChanged)
    assert change.weight == 2 and change.capability == {"nvidia.com/gpu": 8000}
    assert change.parent == "root" and change.state == "Open"
    status_only = copy.deepcopy(q)
    status_only["status"]["allocated"] = {"nvidia.com/gpu": "4"}
    assert events_from_queue(q, status_only, now=T0) == []  # allocation is not configuration
    heavier = copy.deepcopy(q)
    heavier["spec"]["weight"] = 5
    assert [e.weight for e in events_from_queue(q, heavier, now=T0)] == [5]  # type: ignore[union-attr]
    closed = copy.deepcopy(q)
    closed["status"]["state"] = "Closed"
    assert len(events_from_queue(q, closed, now=T0)) == 1
    (sample,) = usage_samples_from_queues(
        [q], at=T0, pending={"research": {"nvidia.com/gpu": 2000}}
    )
    assert isinstance(sample, ev.QueueUsageSample)
    assert sample.allocated == {"nvidia.com/gpu": 3000, "cpu": 1500}
    assert sample.deserved == {"nvidia.com/gpu": 4000} and sample.pending == {
        "nvidia.com/gpu": 2000
    }


def test_framework_workloads() -> None:
    pytorch = {
        "kind": "PyTorchJob",
        "metadata": {"name": "bert", "namespace": "ml", "uid": "pt-1", "creationTimestamp": ts(0)},
        "spec": {
            "runPolicy": {"schedulingPolicy": {"queue": "research", "minAvailable": 3}},
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "template": {
                        "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 1}}}]}
                    },
                },
                "Worker": {
                    "replicas": 2,
                    "template": {
                        "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 2}}}]}
                    },
                },
            },
        },
        "status": {
            "conditions": [
                {"type": "Created", "status": "True", "lastTransitionTime": ts(0)},
                {"type": "Running", "status": "True", "lastTransitionTime": ts(30)},
            ]
        },
    }
    out = events_from_job(None, pytorch)
    observed = out[0]
    assert isinstance(observed, ev.JobObserved)
    assert observed.kind == "PyTorchJob" and observed.queue == "research"
    assert observed.replicas == {"master": 1, "worker": 2} and observed.requested_gpu_milli == 5000
    phases = [e.to_phase for e in out if isinstance(e, ev.JobPhaseChanged)]
    assert phases == ["Pending", "Running"]
    spark = {
        "kind": "SparkApplication",
        "metadata": {"name": "etl", "namespace": "data", "uid": "sp-1", "creationTimestamp": ts(0)},
        "spec": {
            "batchSchedulerOptions": {"queue": "etl"},
            "driver": {"cores": 1, "memory": "2g"},
            "executor": {"instances": 3, "cores": 2, "memory": "4g"},
        },
        "status": {"applicationState": {"state": "RUNNING"}, "lastSubmissionAttemptTime": ts(5)},
    }
    s_obs = events_from_job(None, spark)[0]
    assert isinstance(s_obs, ev.JobObserved)
    assert s_obs.queue == "etl" and s_obs.requested_cpu_milli == 7000 and s_obs.phase == "Running"


def test_a_framework_gang_that_failed_is_recorded_failed() -> None:
    """A PodGroup the scheduler marks Completed once every pod finished: the workload (here a
    PyTorchJob followed through its PodGroup) failed when pods failed and too few succeeded."""

    def pg(phase: str, **counts: int) -> dict[str, Any]:
        return {
            "kind": "PodGroup",
            "metadata": {
                "name": "bert",
                "namespace": "ml",
                "uid": "pg-1",
                "creationTimestamp": ts(0),
                "ownerReferences": [
                    {"kind": "PyTorchJob", "name": "bert", "uid": "pt-1", "controller": True}
                ],
            },
            "spec": {"minMember": 2, "queue": "research"},
            "status": {"phase": phase, **counts},
        }

    running = pg("Running", running=2)

    def job_phase(new: dict[str, Any]) -> list[str]:
        return [
            e.to_phase
            for e in events_from_podgroup(running, new)
            if isinstance(e, ev.JobPhaseChanged) and e.source == "job"
        ]

    assert job_phase(pg("Completed", failed=2)) == ["Failed"]
    assert job_phase(pg("Completed", succeeded=1, failed=1)) == ["Failed"]
    assert job_phase(pg("Completed", succeeded=2)) == ["Completed"]
    assert job_phase(pg("Completed", succeeded=2, failed=1)) == ["Completed"]  # gang succeeded
    assert all(e.job_uid == "pt-1" for e in events_from_podgroup(running, pg("Completed")))
    # a workload the ledger follows itself: its PodGroup's phases no longer stand in for its own
    owned = pg("Completed", succeeded=2)
    owned["metadata"]["ownerReferences"][0]["apiVersion"] = "kubeflow.org/v1"
    followed = events_from_podgroup(
        running, owned, observed_kinds={("kubeflow.org/v1", "PyTorchJob")}
    )
    assert [e.source for e in followed if isinstance(e, ev.JobPhaseChanged)] == ["podgroup"]


def test_relisting_a_waiting_podgroup_adds_no_transition(
    ledger_url: str, engine: Any, tmp_path: Path
) -> None:
    """The gang condition of a waiting PodGroup is rewritten (new reason, new time) while its
    phase stays Pending; a controller restart that re-lists it must not record a second
    "-> Pending", in whichever order the events reach the ledger."""

    def pg(minute: int, message: str) -> dict[str, Any]:
        return {
            "kind": "PodGroup",
            "metadata": {
                "name": "pt",
                "namespace": "ns",
                "uid": "pg-uid",
                "creationTimestamp": ts(0),
                "ownerReferences": [
                    {"kind": "PyTorchJob", "name": "pt", "uid": "job-uid", "controller": True}
                ],
            },
            "spec": {"minMember": 4, "queue": "a"},
            "status": {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "Unschedulable",
                        "lastTransitionTime": ts(60 * minute),
                        "message": message,
                    }
                ],
            },
        }

    first, later = pg(1, "4/4 tasks in gang unschedulable"), pg(5, "2/4 tasks unschedulable")
    batches = [
        events_from_podgroup(None, first),
        events_from_podgroup(first, later),  # same phase: nothing
        events_from_podgroup(None, later),  # re-list after a restart
    ]
    for order in (batches, list(reversed(batches))):
        with engine.begin() as conn:
            conn.execute(text("DELETE FROM job_transitions"))
        with Recorder(ledger_url, background=False, spill_path=tmp_path / "s.jsonl") as rec:
            for batch in order:
                rec.record(batch)
                assert rec.flush()
        transitions = sorted((r["source"], r["to_phase"]) for r in rows(engine, "job_transitions"))
        assert transitions == [("job", "Pending"), ("podgroup", "Pending")], order


def test_bad_quantities_do_not_raise() -> None:
    spec = {"containers": [{"resources": {"requests": {"cpu": "lots"}}}]}
    assert pod_requests(spec) == {}


def test_vcjob_life_is_recorded_and_reported(
    ledger_url: str, engine: Engine, tmp_path: Path
) -> None:
    history = lifecycle()
    with Recorder(ledger_url, spill_path=tmp_path / "spill.jsonl") as rec:
        rec.record(history)
        assert rec.flush()
    (job,) = rows(engine, "jobs")
    assert job["phase"] == job["final_phase"] == "Completed"
    assert job["submitted_at"] == T0 and job["first_started_at"] == T0 + dt.timedelta(seconds=45)
    assert job["finished_at"] == T0 + dt.timedelta(seconds=3647)
    transitions = sorted((r["source"], r["to_phase"]) for r in rows(engine, "job_transitions"))
    assert transitions == [
        ("job", "Completed"),
        ("job", "Completing"),
        ("job", "Pending"),
        ("job", "Running"),
        ("podgroup", "Inqueue"),
        ("podgroup", "Pending"),
        ("podgroup", "Running"),
    ]
    pods = sorted(rows(engine, "pod_attempts"), key=lambda r: r["pod_uid"])
    assert [(p["node"], p["exit_code"], p["outcome"]) for p in pods] == [
        ("gpu-node-0", 0, "Succeeded"),
        ("gpu-node-1", 0, "Succeeded"),
    ]
    window = Filters(since=T0 - dt.timedelta(days=1), until=T0 + dt.timedelta(days=1))
    with engine.connect() as conn:
        waits = wait_times(conn, window).as_dicts()
        used = usage(conn, window, by=["queue"]).as_dicts()
        done = outcomes(conn, window).as_dicts()
    assert waits[0]["queue"] == "research" and waits[0]["mean_wait_s"] == 45.0
    assert used == [{"queue": "research", "pods": 2, "gpu_hours": 2.0, "cpu_core_hours": 1.0}]
    assert done[0]["completed"] == 1 and done[0]["mean_run_s"] == 3602.0
    before = snapshot(engine)
    with Recorder(ledger_url, spill_path=tmp_path / "spill.jsonl") as rec:
        rec.record(lifecycle())  # a restarted controller sees it all again
        assert rec.flush()
    assert snapshot(engine) == before


def test_the_running_estimate_is_recorded() -> None:
    """spec.runningEstimate of a VCJob, the tephra.io/running-estimate annotation of a framework
    workload or its PodGroup: what a what-if replays a job that never started with."""
    job = vcjob()
    job["spec"]["runningEstimate"] = "1h30m"
    observed = [e for e in events_from_job(None, job) if isinstance(e, ev.JobObserved)]
    assert observed[0].running_estimate_s == 5400.0
    job["spec"]["runningEstimate"] = "soon"  # admission refuses it; the ledger ignores it
    observed = [e for e in events_from_job(None, job) if isinstance(e, ev.JobObserved)]
    assert observed[0].running_estimate_s is None
    pg = {
        "kind": "PodGroup",
        "metadata": {
            "name": "pg",
            "namespace": "ml",
            "uid": "pg-1",
            "creationTimestamp": ts(0),
            "annotations": {"tephra.io/running-estimate": "20m"},
        },
        "spec": {"minMember": 1, "queue": "research"},
        "status": {"phase": "Pending"},
    }
    observed = [e for e in events_from_podgroup(None, pg) if isinstance(e, ev.JobObserved)]
    assert observed[0].running_estimate_s == 1200.0
    workload = {
        "kind": "PyTorchJob",
        "metadata": {
            "name": "bert",
            "namespace": "ml",
            "uid": "pt-2",
            "annotations": {"tephra.io/running-estimate": "45m"},
        },
        "spec": {},
    }
    observed = [e for e in events_from_job(None, workload) if isinstance(e, ev.JobObserved)]
    assert observed[0].running_estimate_s == 2700.0
