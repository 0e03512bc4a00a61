"""Issue 30.5: a job's plugins never adopt or change an object the job does not own.

The svc plugin's create of `<job>-svc` or `<job>` counted AlreadyExists as success, so a job
took over a Service of its name, and a rescale merge-patched the keys of a ConfigMap it had not
made. Now an existing plugin object without the job's controller ownerReference fails a new job
(reason PluginObjectNotOwned) and is never written.
"""

from __future__ import annotations

import copy
from typing import Any

from batch.controllers import constants as c
from batch.controllers.job import owned_by_job

from .conftest import Harness, make_job, task

FOREIGN_DATA = {"secret.key": "someone else's", "worker.host": "not-a-job-host"}


def _foreign(kind: str, name: str, **body: Any) -> dict[str, Any]:
    api = "networking.k8s.io/v1" if kind == "NetworkPolicy" else "v1"
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": "ns"}, **body}


def test_ownership_needs_the_jobs_uid_as_controller() -> None:
    job = {"metadata": {"name": "j", "uid": "u1"}}

    def obj(*refs: dict[str, Any]) -> dict[str, Any]:
        return {"metadata": {"ownerReferences": list(refs)}}

    assert owned_by_job(obj({"uid": "u1", "controller": True}), job)
    assert not owned_by_job({"metadata": {}}, job)
    assert not owned_by_job(obj({"uid": "u1"}), job)  # an owner, not the controller
    assert not owned_by_job(obj({"uid": "u1", "controller": False}), job)
    assert not owned_by_job(obj({"uid": "other", "controller": True, "name": "j"}), job)
    assert not owned_by_job(obj({"uid": "u1", "controller": True}), {"metadata": {"name": "j"}})


def test_a_foreign_configmap_fails_the_job_and_stays_unchanged() -> None:
    h = Harness(make_job(tasks=[task("worker", 2)], plugins={"svc": []}))
    cm = h.cluster.add(_foreign("ConfigMap", "job-svc", data=dict(FOREIGN_DATA)))
    before = copy.deepcopy(cm)
    h.step()
    state = h.status["state"]
    assert h.phase == c.FAILED
    assert state["reason"] == "PluginObjectNotOwned"
    assert "ConfigMap ns/job-svc exists and is not owned by job job" in state["message"]
    assert h.cluster.get("ConfigMap", "ns", "job-svc") == before
    assert not h.pods() and h.podgroup() is None
    assert h.cluster.get("Service", "ns", "job") is None  # nothing of the job's was made
    assert any(e.type == "Warning" and e.reason == "PluginObjectNotOwned" for e in h.cluster.events)


def test_a_foreign_service_is_not_taken_over() -> None:
    h = Harness(make_job(tasks=[task("worker", 2)], plugins={"svc": []}))
    spec = {"selector": {"app": "theirs"}, "ports": [{"port": 80}]}
    svc = h.cluster.add(_foreign("Service", "job", spec=spec))
    before = copy.deepcopy(svc)
    h.step()
    assert h.phase == c.FAILED
    assert "Service ns/job exists and is not owned by job job" in h.status["state"]["message"]
    assert h.cluster.get("Service", "ns", "job") == before


def test_objects_the_job_owns_are_updated_as_before() -> None:
    h = Harness(make_job(tasks=[task("worker", 2)], plugins={"svc": ["--disable-network-policy"]}))
    h.start()
    assert h.phase == c.RUNNING
    job = h.cluster.get("Job", "ns", "job")
    assert job is not None
    job["spec"]["tasks"][0]["replicas"] = 3
    h.step(1)
    cm = h.cluster.get("ConfigMap", "ns", "job-svc")
    assert cm is not None and cm["data"]["VC_WORKER_NUM"] == "3"


def test_a_running_job_does_not_rewrite_a_configmap_replaced_by_someone_else() -> None:
    h = Harness(make_job(tasks=[task("worker", 2)], plugins={"svc": []}))
    h.start()
    h.cluster.objects.pop(h.cluster.key("ConfigMap", "ns", "job-svc"))
    cm = h.cluster.add(_foreign("ConfigMap", "job-svc", data=dict(FOREIGN_DATA)))
    before = copy.deepcopy(cm)
    job = h.cluster.get("Job", "ns", "job")
    assert job is not None
    job["spec"]["tasks"][0]["replicas"] = 3
    h.step(1)
    assert h.cluster.get("ConfigMap", "ns", "job-svc") == before


def test_objects_of_a_deleted_job_of_the_same_name_are_waited_for() -> None:
    """A job submitted again right after its deletion finds its predecessor's ConfigMap until
    the garbage collector removes it: it waits for that instead of failing."""
    h = Harness(make_job(tasks=[task("worker", 2)], plugins={"svc": []}))
    old = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "job",
           "uid": "gone", "controller": True}  # fmt: skip
    h.cluster.add(_foreign("ConfigMap", "job-svc", metadata={
        "name": "job-svc", "namespace": "ns", "ownerReferences": [old]}))  # fmt: skip
    result = h.step()
    assert h.phase == "" and result.requeue_after == 1.0
    assert "waiting for a deleted job's objects" in result.notes[0]
    h.cluster.objects.pop(h.cluster.key("ConfigMap", "ns", "job-svc"))
    h.step(1)
    assert h.phase == c.PENDING
    cm = h.cluster.get("ConfigMap", "ns", "job-svc")
    assert cm is not None and "VC_WORKER_NUM" in cm["data"]


def test_a_kubernetes_job_of_the_same_name_is_not_a_predecessor() -> None:
    h = Harness(make_job(tasks=[task("worker", 2)], plugins={"svc": []}))
    other = {"apiVersion": "batch/v1", "kind": "Job", "name": "job", "uid": "k8s-job",
             "controller": True}  # fmt: skip
    h.cluster.add(_foreign("ConfigMap", "job-svc", metadata={
        "name": "job-svc", "namespace": "ns", "ownerReferences": [other]}))  # fmt: skip
    h.step()
    assert h.phase == c.FAILED and h.status["state"]["reason"] == "PluginObjectNotOwned"


def test_no_new_pod_mounts_an_ssh_secret_replaced_by_someone_else() -> None:
    """A running job whose `<job>-ssh` Secret was replaced by another user's (their key) makes
    no new pod that would mount it: the job's pods would let that user in. It says why."""
    h = Harness(make_job(tasks=[task("worker", 2)], plugins={"ssh": []}))
    h.start()
    assert len(h.pods()) == 2
    h.cluster.objects.pop(h.cluster.key("Secret", "ns", "job-ssh"))
    planted = {"authorized_keys": "c3NoLXJzYSBBQUFBIGF0dGFja2Vy"}
    h.cluster.add(_foreign("Secret", "job-ssh", data=planted))
    job = h.cluster.get("Job", "ns", "job")
    assert job is not None
    job["spec"]["tasks"][0]["replicas"] = 3
    h.step(1)
    assert len(h.pods()) == 2
    warned = [e for e in h.cluster.events if e.reason == "PluginObjectNotOwned"]
    assert warned and "Secret ns/job-ssh exists and is not owned by job job" in warned[-1].message
