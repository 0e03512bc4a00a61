"""Job reconciler: initialisation, PodGroup, pods, phases
(volcano-semantics.md#job-podgroup-and-pods, #job-state-machine)."""

from __future__ import annotations

from typing import Any

from batch.api.admission.common import is_dns1123_label
from batch.api.jobview import job_view
from batch.controllers import constants as c
from batch.controllers.effects import CreateObject
from batch.controllers.jobspec import (
    build_pod,
    claim_volume_name,
    job_volumes,
    min_resources,
)

from .conftest import Harness, make_job, task


def test_initialisation_creates_podgroup_but_no_pods() -> None:
    h = Harness(make_job(tasks=[task("worker", 3)]))
    h.step()
    assert h.phase == c.PENDING
    assert h.status["minAvailable"] == 3
    assert [x["status"] for x in h.status["conditions"]] == ["Pending"]
    pg = h.podgroup()
    assert pg is not None
    assert pg["metadata"]["name"] == f"job-{h.job['metadata']['uid']}"
    assert pg["spec"]["minMember"] == 3
    assert pg["spec"]["minTaskMember"] == {"worker": 3}
    assert pg["spec"]["queue"] == "default"
    assert pg["metadata"]["ownerReferences"][0]["uid"] == h.job["metadata"]["uid"]
    assert h.pods() == []


def test_pods_created_after_podgroup_leaves_pending_with_volcano_metadata() -> None:
    h = Harness(make_job(tasks=[task("ps", 1), task("worker", 2)]))
    h.step()
    h.admit("Pending")
    assert h.pods() == []
    h.admit("Inqueue")
    assert h.pod_names() == ["job-ps-0", "job-worker-0", "job-worker-1"]
    pod = h.cluster.get("Pod", "ns", "job-worker-1")
    assert pod is not None
    ann, labels = pod["metadata"]["annotations"], pod["metadata"]["labels"]
    uid = h.job["metadata"]["uid"]
    assert ann[c.GROUP_NAME_ANNOTATION] == f"job-{uid}"
    assert ann[c.TASK_INDEX] == "1"
    assert ann[c.TASK_SPEC] == "worker"
    assert ann[c.JOB_NAME] == "job"
    assert ann[c.QUEUE_NAME] == "default"
    assert ann[c.JOB_VERSION] == "0"
    assert ann[c.TEMPLATE_UID] == "job-worker"
    assert ann[c.JOB_RETRY_COUNT] == "0"
    assert labels[c.JOB_NAMESPACE] == "ns"
    assert labels[c.TASK_INDEX] == "1"
    assert pod["spec"]["schedulerName"] == "volcano"


def test_pending_to_running_to_completed() -> None:
    h = Harness(make_job(tasks=[task("worker", 2)]))
    h.start()
    assert h.phase == c.RUNNING
    assert h.status["running"] == 2
    h.cluster.set_job_pods(h.job, "Succeeded")
    h.step(1)
    assert h.phase == c.COMPLETED
    assert h.status["succeeded"] == 2
    assert [x["status"] for x in h.status["conditions"]] == ["Pending", "Running", "Completed"]
    # the PodGroup is removed by the finishing kill; nothing is recreated
    assert h.podgroup() is None
    assert h.step(1).actions == []


def test_all_finished_with_too_few_successes_fails() -> None:
    h = Harness(make_job(tasks=[task("worker", 3)], min_available=2))
    h.start()
    h.pod("job-worker-0", "Succeeded")
    h.pod("job-worker-1", "Failed")
    h.pod("job-worker-2", "Failed")
    h.step(1)
    assert h.phase == c.FAILED


def test_task_min_available_short_fails_even_with_enough_total() -> None:
    # job.minAvailable >= sum(task.minAvailable) and task "a" has fewer successes than its min.
    h = Harness(
        make_job(
            tasks=[task("a", 2, minAvailable=2), task("b", 2, minAvailable=1)], min_available=3
        )
    )
    h.start()
    h.pod("job-a-0", "Succeeded")
    h.pod("job-a-1", "Failed")
    h.pod("job-b-0", "Succeeded")
    h.pod("job-b-1", "Succeeded")
    h.step(1)
    assert h.phase == c.FAILED


def test_min_success_completes_early_and_kills_the_rest() -> None:
    h = Harness(make_job(tasks=[task("worker", 4)], min_available=1, minSuccess=2))
    h.start()
    h.pod("job-worker-0", "Succeeded")
    h.step(1)
    assert h.phase == c.RUNNING
    h.pod("job-worker-1", "Succeeded")
    h.step(1)
    assert h.phase == c.COMPLETED
    assert h.pod_names() == ["job-worker-0", "job-worker-1"]


def test_min_success_not_reached_fails() -> None:
    h = Harness(make_job(tasks=[task("worker", 3)], min_available=1, minSuccess=2))
    h.start()
    h.pod("job-worker-0", "Succeeded")
    h.pod("job-worker-1", "Failed")
    h.pod("job-worker-2", "Failed")
    h.step(1)
    assert h.phase == c.FAILED


def test_running_back_to_pending_when_too_many_pending() -> None:
    h = Harness(make_job(tasks=[task("worker", 3)], min_available=3))
    h.start()
    h.pod("job-worker-0", "Pending")
    h.step(1)
    assert h.phase == c.PENDING


def test_min_resources_e2e_shape() -> None:
    gpu_task = {
        "containers": [
            {
                "name": "c",
                "resources": {
                    "requests": {"cpu": "1", "memory": "1000Mi", "nvidia.com/gpu": "1"},
                    "limits": {"cpu": "1", "memory": "1000Mi", "nvidia.com/gpu": "1"},
                },
            }
        ]
    }
    job = make_job(
        tasks=[
            {"name": "a", "replicas": 1, "template": {"spec": gpu_task}},
            {"name": "b", "replicas": 1, "template": {"spec": gpu_task}},
        ]
    )
    assert min_resources(job_view(job)) == {
        "count/pods": "2",
        "pods": "2",
        "cpu": "2",
        "requests.cpu": "2",
        "limits.cpu": "2",
        "memory": "2000Mi",
        "requests.memory": "2000Mi",
        "limits.memory": "2000Mi",
        "nvidia.com/gpu": "2",
        "requests.nvidia.com/gpu": "2",
    }


def test_min_resources_partial_by_priority() -> None:
    hi = task("hi", 3, cpu="2")
    hi["template"]["spec"]["priorityClassName"] = "high"
    lo = task("lo", 3, cpu="500m")
    # job.minAvailable (4) < sum(task.minAvailable) (6): first 4 pods by priority: 3 hi + 1 lo
    job = make_job(tasks=[lo, hi], min_available=4)
    mr = min_resources(job_view(job), priority_values={"high": 1000})
    assert mr["cpu"] == "6500m"
    assert mr["pods"] == "4"
    # else-branch: task minimums first then spare replicas in priority order
    lo2 = task("lo", 3, cpu="500m", minAvailable=1)
    hi2 = task("hi", 3, cpu="2", minAvailable=1)
    hi2["template"]["spec"]["priorityClassName"] = "high"
    job2 = make_job(tasks=[lo2, hi2], min_available=3)
    mr2 = min_resources(job_view(job2), priority_values={"high": 1000})
    # 1 lo + 1 hi, then 1 spare hi: 0.5 + 2 + 2
    assert mr2["cpu"] == "4500m"


def test_scale_down_and_up_and_to_zero() -> None:
    h = Harness(make_job(tasks=[task("worker", 3)], min_available=1))
    h.start()
    assert len(h.pods()) == 3
    h.cluster.get("Job", "ns", "job")["spec"]["tasks"][0]["replicas"] = 1
    h.step(1)
    assert h.pod_names() == ["job-worker-0"]
    pg = h.podgroup()
    assert pg is not None and pg["spec"]["minTaskMember"] == {"worker": 1}
    h.cluster.get("Job", "ns", "job")["spec"]["tasks"][0]["replicas"] = 0
    h.cluster.get("Job", "ns", "job")["spec"]["minAvailable"] = 0
    h.step(1)
    assert h.pods() == []
    assert h.phase == c.RUNNING  # total replicas 0 keeps the phase
    h.cluster.get("Job", "ns", "job")["spec"]["tasks"][0]["replicas"] = 2
    h.cluster.get("Job", "ns", "job")["spec"]["minAvailable"] = 2
    h.step(1)
    assert h.pod_names() == ["job-worker-0", "job-worker-1"]


def test_depends_on_waits_for_ready_dependency() -> None:
    h = Harness(
        make_job(
            tasks=[task("a", 1), task("b", 2, dependsOn={"name": ["a"]})],
            min_available=1,
        )
    )
    h.step()
    h.admit()
    assert h.pod_names() == ["job-a-0"]
    h.pod("job-a-0", "Running", ready=False)
    h.step(1)
    assert h.pod_names() == ["job-a-0"]
    h.pod("job-a-0", "Running", ready=True)
    h.step(1)
    assert h.pod_names() == ["job-a-0", "job-b-0", "job-b-1"]


def test_reconcile_is_idempotent_once_settled() -> None:
    h = Harness(make_job())
    h.start()
    res = h.step(1)
    assert [a for a in res.actions if isinstance(a, CreateObject)] == []
    assert res.actions == []


def test_volumes_create_pvc_and_mount() -> None:
    job = make_job(
        volumes=[
            {"mountPath": "/data", "volumeClaim": {"accessModes": ["ReadWriteOnce"]}},
            {"mountPath": "/named", "volumeClaimName": "mine"},
        ]
    )
    h = Harness(job)
    h.step()
    pvcs = h.cluster.objects_of("PersistentVolumeClaim")
    assert len(pvcs) == 1
    pvc_name = pvcs[0]["metadata"]["name"]
    assert pvc_name.startswith("job-pvc-") and len(pvc_name) == len("job-pvc-") + 12
    cres = h.status["controlledResources"]
    assert cres[f"volume-pvc-{pvc_name}"] == pvc_name
    assert cres["volume-pvc-mine"] == "mine"
    h.admit()
    pod = h.cluster.get("Pod", "ns", "job-worker-0")
    assert pod is not None
    claims = {
        v["name"]: v["persistentVolumeClaim"]["claimName"]
        for v in pod["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    }
    mounts = {
        m["mountPath"]: claims[m["name"]] for m in pod["spec"]["containers"][0]["volumeMounts"]
    }
    assert mounts == {"/data": pvc_name, "/named": "mine"}


def _claim_mounts(pod: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """mountPath -> (volume name, volume source) of the first container."""
    vols = {v["name"]: v for v in pod["spec"]["volumes"]}
    return {
        m["mountPath"]: (m["name"], {k: v for k, v in vols[m["name"]].items() if k != "name"})
        for m in pod["spec"]["containers"][0].get("volumeMounts") or []
    }


def test_job_volume_names_are_valid_and_never_shadowed() -> None:
    # PVC names are DNS-1123 subdomains, pod volume names DNS-1123 labels.
    shadow = task("worker", 1)
    shadow["template"]["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    shadow["template"]["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "scratch", "mountPath": "/tmp"}
    ]
    job = make_job(
        "a" * 48,
        tasks=[shadow],
        volumes=[
            {"mountPath": "/data", "volumeClaimName": "data.v2"},
            {"mountPath": "/scratch", "volumeClaimName": "scratch"},
            {"mountPath": "/gen", "volumeClaim": {"accessModes": ["ReadWriteOnce"]}},
        ],
    )
    job["metadata"]["uid"] = "uid-1"
    view = job_view(job)
    pod = build_pod(view, view.tasks[0], 0, version=0, retry_count=0)
    generated = job_volumes(job)[2][0]
    assert len(generated) > 63
    mounts = _claim_mounts(pod)
    assert mounts["/tmp"] == ("scratch", {"emptyDir": {}})
    assert mounts["/data"][1] == {"persistentVolumeClaim": {"claimName": "data.v2"}}
    assert mounts["/scratch"][1] == {"persistentVolumeClaim": {"claimName": "scratch"}}
    assert mounts["/gen"][1] == {"persistentVolumeClaim": {"claimName": generated}}
    names = [v["name"] for v in pod["spec"]["volumes"]]
    assert len(names) == len(set(names)) == 4
    assert all(is_dns1123_label(n) for n in names), names
    # deterministic: every pod of the job names them alike
    again = build_pod(view, view.tasks[0], 1, version=0, retry_count=0)
    assert [v["name"] for v in again["spec"]["volumes"]] == names
    # a template volume holding the very name a claim would get is stepped around
    taken = claim_volume_name("data.v2")
    assert claim_volume_name("data.v2", {taken}) != taken
    assert is_dns1123_label(claim_volume_name("data.v2", {taken}))


def test_ttl_after_finished_deletes_job() -> None:
    h = Harness(make_job(ttlSecondsAfterFinished=30))
    h.start()
    h.cluster.set_job_pods(h.job, "Succeeded")
    res = h.step(1)
    assert h.phase == c.COMPLETED
    assert res.requeue_after is not None and 29 <= res.requeue_after <= 30
    h.step(10)
    assert h.cluster.get("Job", "ns", "job") is not None
    h.step(21)
    assert h.cluster.get("Job", "ns", "job") is None


def test_missing_named_claim_keeps_job_pending() -> None:
    h = Harness(make_job(volumes=[{"mountPath": "/d", "volumeClaimName": "absent"}]))
    h.step()
    h.cluster.set_podgroup_phase(h.job, "Inqueue")
    from batch.controllers.job import reconcile_job

    job = h.cluster.get("Job", "ns", "job")
    res = reconcile_job(job, [], h.podgroup(), now=h.clock.now, missing_claims={"absent"})
    assert [a for a in res.actions if isinstance(a, CreateObject)] == []
    assert res.requeue_after == 5.0
    res2 = reconcile_job(job, [], h.podgroup(), now=h.clock.now, missing_claims=set())
    assert len([a for a in res2.actions if isinstance(a, CreateObject)]) == 2
