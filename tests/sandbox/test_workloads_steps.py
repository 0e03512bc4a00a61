"""Contract: the built-in Job and Deployment controllers' less travelled branches (indexed
completions, suspend, completions unset, manual selectors, rollouts), driven on a bare Core."""

from __future__ import annotations

from typing import Any

from batch.sandbox.core import Core
from batch.sandbox.store import Obj
from batch.sandbox.workloads import WorkloadControllers, template_hash

INDEX = "batch.kubernetes.io/job-completion-index"


def _template(app: str) -> Obj:
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1"}]},
    }


def _job(core: Core, name: str, **spec: Any) -> tuple[WorkloadControllers, Obj]:
    wc = WorkloadControllers(core)
    rt = core.rt("batch", "v1", "jobs")
    job = core.create(
        rt, "default", {"metadata": {"name": name}, "spec": {"template": _template(name), **spec}}
    )
    wc._reconcile(("jobs.batch", "default", name))
    return wc, job


def _read_job(core: Core, name: str) -> Obj:
    return core.get(core.rt("batch", "v1", "jobs"), "default", name)


def _set_phase(core: Core, pod: Obj, phase: str) -> None:
    rt = core.rt("", "v1", "pods")
    pod = core.get(rt, "default", pod["metadata"]["name"])
    core.write(
        rt,
        pod,
        {**pod, "status": {**(pod.get("status") or {}), "phase": phase}},
        subresource="status",
    )


def _pods(wc: WorkloadControllers, owner: Obj) -> list[Obj]:
    return sorted(wc._owned(owner), key=lambda p: p["metadata"]["name"])


def test_indexed_job_fills_the_lowest_free_index() -> None:
    core = Core()
    wc, job = _job(core, "idx", completions=3, parallelism=2, completionMode="Indexed")
    pods = _pods(wc, job)
    indexes = sorted(p["metadata"]["annotations"][INDEX] for p in pods)
    assert indexes == ["0", "1"]
    assert all(p["metadata"]["labels"][INDEX] == p["metadata"]["annotations"][INDEX] for p in pods)
    done = next(p for p in pods if p["metadata"]["annotations"][INDEX] == "0")
    _set_phase(core, done, "Succeeded")
    wc._reconcile(("jobs.batch", "default", "idx"))
    active = [p for p in _pods(wc, job) if (p.get("status") or {}).get("phase") != "Succeeded"]
    assert sorted(p["metadata"]["annotations"][INDEX] for p in active) == ["1", "2"]
    status = _read_job(core, "idx")["status"]
    assert (status["active"], status["succeeded"], status["failed"]) == (2, 1, 0)


def test_suspended_job_creates_no_pods_but_starts() -> None:
    core = Core()
    wc, job = _job(core, "sus", suspend=True)
    assert wc._owned(job) == []
    status = _read_job(core, "sus")["status"]
    assert status["active"] == 0 and status["startTime"] and "conditions" not in status


def test_job_without_completions_completes_when_one_pod_succeeds() -> None:
    core = Core()
    wc, job = _job(core, "one", parallelism=2)
    pods = _pods(wc, job)
    assert len(pods) == 2
    _set_phase(core, pods[0], "Succeeded")
    wc._reconcile(("jobs.batch", "default", "one"))
    assert len(_pods(wc, job)) == 2  # a success stops new pods; the other one still runs
    _set_phase(core, pods[1], "Succeeded")
    wc._reconcile(("jobs.batch", "default", "one"))
    status = _read_job(core, "one")["status"]
    types = [(c["type"], c["reason"]) for c in status["conditions"]]
    assert types == [
        ("SuccessCriteriaMet", "CompletionsReached"),
        ("Complete", "CompletionsReached"),
    ]
    assert status["completionTime"] and status["active"] == 0 and status["succeeded"] == 2
    before = _read_job(core, "one")
    wc._reconcile(("jobs.batch", "default", "one"))  # finished jobs are left alone
    assert _read_job(core, "one") == before


def test_job_failure_keeps_the_backoff_conditions_and_deletes_active_pods() -> None:
    core = Core()
    wc, job = _job(core, "bad", parallelism=2, backoffLimit=0)
    pods = _pods(wc, job)
    _set_phase(core, pods[0], "Failed")
    wc._reconcile(("jobs.batch", "default", "bad"))
    status = _read_job(core, "bad")["status"]
    types = [(c["type"], c["reason"]) for c in status["conditions"]]
    assert types == [("FailureTarget", "BackoffLimitExceeded"), ("Failed", "BackoffLimitExceeded")]
    assert status["active"] == 0 and status["failed"] == 1 and "completionTime" not in status
    live = [p for p in wc._owned(job) if not p["metadata"].get("deletionTimestamp")]
    assert [p["metadata"]["name"] for p in live] == [pods[0]["metadata"]["name"]]


def test_job_selector_defaulting() -> None:
    core = Core()
    _, auto = _job(core, "auto")
    spec = _read_job(core, "auto")["spec"]
    uid = auto["metadata"]["uid"]
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    labels = spec["template"]["metadata"]["labels"]
    assert labels == {
        "app": "auto",
        "batch.kubernetes.io/controller-uid": uid,
        "controller-uid": uid,
        "batch.kubernetes.io/job-name": "auto",
        "job-name": "auto",
    }
    sel = {"matchLabels": {"app": "man"}}
    wc, man = _job(core, "man", manualSelector=True, selector=sel)
    spec = _read_job(core, "man")["spec"]
    assert spec["selector"] == sel and spec["template"]["metadata"]["labels"] == {"app": "man"}
    assert len(wc._owned(man)) == 1


def test_job_keeps_conditions_it_did_not_set() -> None:
    core = Core()
    wc, job = _job(core, "kept")
    rt = core.rt("batch", "v1", "jobs")
    job = _read_job(core, "kept")
    mine = {"type": "Suspended", "status": "False", "reason": "Resumed"}
    core.write(
        rt, job, {**job, "status": {**job["status"], "conditions": [mine]}}, subresource="status"
    )
    wc._reconcile(("jobs.batch", "default", "kept"))
    assert _read_job(core, "kept")["status"]["conditions"] == [mine]


def _deployment(core: Core, replicas: int, image: str) -> Obj:
    rt = core.rt("apps", "v1", "deployments")
    tmpl = _template("web")
    tmpl["spec"]["containers"][0]["image"] = image
    body = {
        "metadata": {"name": "web"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": tmpl,
        },
    }
    old = core.find(rt, "default", "web")
    return (
        core.create(rt, "default", body)
        if old is None
        else core.write(rt, old, {**old, **body, "metadata": old["metadata"]})
    )


def test_deployment_rollout_scales_the_old_replicaset_to_zero() -> None:
    core = Core()
    wc = WorkloadControllers(core)
    key = ("deployments.apps", "default", "web")
    dep = _deployment(core, 2, "busybox:1")
    wc._reconcile(key)
    (first,) = wc._owned(dep, "replicasets.apps")
    thash = template_hash(dep["spec"]["template"])
    assert first["metadata"]["name"] == f"web-{thash}"
    assert first["metadata"]["annotations"] == {"deployment.kubernetes.io/revision": "1"}
    assert first["metadata"]["labels"] == {"app": "web", "pod-template-hash": thash}
    assert first["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": thash}
    assert first["spec"]["replicas"] == 2
    status = core.get(core.rt("apps", "v1", "deployments"), "default", "web")["status"]
    assert (status["replicas"], status["readyReplicas"], status["unavailableReplicas"]) == (0, 0, 2)
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("Available", "False", "MinimumReplicasUnavailable"),
        ("Progressing", "True", "ReplicaSetUpdated"),
    ]
    dep = _deployment(core, 3, "busybox:2")
    wc._reconcile(key)
    by_name = {r["metadata"]["name"]: r for r in wc._owned(dep, "replicasets.apps")}
    new_hash = template_hash(dep["spec"]["template"])
    assert by_name[f"web-{thash}"]["spec"]["replicas"] == 0
    assert by_name[f"web-{new_hash}"]["spec"]["replicas"] == 3
    revision = by_name[f"web-{new_hash}"]["metadata"]["annotations"]
    assert revision == {"deployment.kubernetes.io/revision": "2"}
    dep = _deployment(core, 0, "busybox:2")
    wc._reconcile(key)
    assert by_name[f"web-{thash}"]["metadata"]["uid"] in {
        r["metadata"]["uid"] for r in wc._owned(dep, "replicasets.apps")
    }
    rs = core.get(core.rt("apps", "v1", "replicasets"), "default", f"web-{new_hash}")
    assert rs["spec"]["replicas"] == 0
    status = core.get(core.rt("apps", "v1", "deployments"), "default", "web")["status"]
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("Available", "True", "MinimumReplicasAvailable"),
        ("Progressing", "True", "NewReplicaSetAvailable"),
    ]
