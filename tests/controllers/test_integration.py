"""The controllers against the sandbox over HTTP, with a stand-in scheduler (minisched)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("batch.sandbox.testing")

from kubernetes import client

from batch.controllers.runner import ControllerComponent
from batch.sandbox.nodes import make_nodes
from batch.sandbox.testing import run_sandbox
from tests.waiting import wait_for

from .minisched import MiniScheduler

pytestmark = pytest.mark.xdist_group("controllers-sandbox")

CORPUS = (
    Path(__file__).resolve().parents[3]
    / "shared"
    / "corpus"
    / "volcano-examples"
    / "volcano"
    / "example"
)
B = ("batch.volcano.sh", "v1alpha1")
S = ("scheduling.volcano.sh", "v1beta1")


class Env:
    def __init__(self, sb: Any, sched: MiniScheduler) -> None:
        self.sb = sb
        self.api = sb.api_client()
        self.core = client.CoreV1Api(self.api)
        self.co = client.CustomObjectsApi(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.sched = sched
        self.comp: ControllerComponent | None = None

    def create_job(self, body: dict[str, Any], ns: str = "default") -> dict[str, Any]:
        return self.co.create_namespaced_custom_object(*B, ns, "jobs", body)

    def job(self, name: str, ns: str = "default") -> dict[str, Any]:
        return self.co.get_namespaced_custom_object(*B, ns, "jobs", name)

    def phase(self, name: str, ns: str = "default") -> str:
        return ((self.job(name, ns).get("status") or {}).get("state") or {}).get("phase", "")

    def wait_phase(
        self, name: str, phase: str, timeout: float = 90.0, ns: str = "default"
    ) -> dict[str, Any]:
        wait_for(
            lambda: self.phase(name, ns) == phase,
            timeout=timeout,
            what=f"job {name} {phase}",
            explain=lambda: self.job(name, ns).get("status") or {},
        )
        return self.job(name, ns)

    def pods(self, job: str, ns: str = "default") -> list[Any]:
        return self.core.list_namespaced_pod(ns, label_selector=f"volcano.sh/job-name={job}").items

    def command(self, job: str, action: str, ns: str = "default") -> None:
        j = self.job(job, ns)
        ref = {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "name": job,
            "uid": j["metadata"]["uid"],
            "controller": True,
        }
        self.co.create_namespaced_custom_object(
            "bus.volcano.sh",
            "v1alpha1",
            ns,
            "commands",
            {
                "apiVersion": "bus.volcano.sh/v1alpha1",
                "kind": "Command",
                "metadata": {
                    "generateName": f"{job}-{action.lower()}-",
                    "namespace": ns,
                    "ownerReferences": [ref],
                },
                "action": action,
                "target": ref,
            },
        )

    def queue_command(self, queue: str, action: str) -> None:
        self.co.create_namespaced_custom_object(
            "bus.volcano.sh",
            "v1alpha1",
            "default",
            "commands",
            {
                "apiVersion": "bus.volcano.sh/v1alpha1",
                "kind": "Command",
                "metadata": {"generateName": f"{queue}-{action.lower()}-", "namespace": "default"},
                "action": action,
                "target": {
                    "apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "Queue",
                    "name": queue,
                },
            },
        )

    def podgroup(self, name: str, ns: str = "default") -> dict[str, Any] | None:
        try:
            return self.co.get_namespaced_custom_object(*S, ns, "podgroups", name)
        except client.ApiException:
            return None

    def queue_state(self, name: str) -> str:
        q = self.co.get_cluster_custom_object(*S, "queues", name)
        return (q.get("status") or {}).get("state", "")


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    nodes = make_nodes(count=2, cpu="64", memory="256Gi")
    comp = ControllerComponent()
    with run_sandbox(
        nodes=nodes, components=[comp], max_grace_seconds=0.5, ready_timeout=120
    ) as sb:
        sched = MiniScheduler(sb.api_client(), nodes=[n["metadata"]["name"] for n in nodes]).start()
        try:
            e = Env(sb, sched)
            e.comp = comp
            yield e
        finally:
            sched.stop()


def vcjob(
    name: str, *, replicas: int = 2, run: float = 0.5, exit_code: int | None = None, **spec: Any
) -> dict[str, Any]:
    ann = {"sandbox.tephra.io/run-seconds": str(run)}
    if exit_code is not None:
        ann["sandbox.tephra.io/exit-code"] = str(exit_code)
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": "volcano",
            "tasks": [
                {
                    "name": "w",
                    "replicas": replicas,
                    "template": {
                        "metadata": {"annotations": ann},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "busybox",
                                    "resources": {"requests": {"cpu": "100m"}},
                                }
                            ],
                        },
                    },
                }
            ],
            **spec,
        },
    }


def test_job_runs_to_completed_with_podgroup(env: Env) -> None:
    created = env.create_job(vcjob("simple", replicas=3))
    uid = created["metadata"]["uid"]
    pg = wait_for(lambda: env.podgroup(f"simple-{uid}"), what="podgroup")
    assert pg["spec"]["minMember"] == 3
    assert pg["spec"]["minResources"]["cpu"] == "300m"
    job = env.wait_phase("simple", "Completed")
    assert job["status"]["succeeded"] == 3
    phases = [x["status"] for x in job["status"]["conditions"]]
    assert phases == ["Pending", "Running", "Completed"]
    names = sorted(p.metadata.name for p in env.pods("simple"))
    assert names == ["simple-w-0", "simple-w-1", "simple-w-2"]
    assert env.comp is not None and env.comp.manager is not None
    reg = env.comp.manager.metrics.registry
    labels = {"job_name": "simple", "queue_name": "default"}
    assert reg.get_sample_value("volcano_job_completed_phase_count", labels) == 1
    assert (
        reg.get_sample_value("volcano_controller_job_to_pod_creation_latency_milliseconds_count")
        >= 3
    )


def test_failed_pod_restart_job_until_max_retry(env: Env) -> None:
    env.create_job(
        vcjob(
            "flaky",
            replicas=1,
            run=0.3,
            exit_code=2,
            maxRetry=2,
            policies=[{"event": "PodFailed", "action": "RestartJob"}],
        )
    )
    job = env.wait_phase("flaky", "Failed")
    assert job["status"]["retryCount"] == 2
    assert "Restarting" in [x["status"] for x in job["status"]["conditions"]]


def test_min_success(env: Env) -> None:
    body = vcjob("minsucc", replicas=3, minAvailable=1, minSuccess=2)
    # one pod runs "forever": the job still completes once two succeed
    slow = copy.deepcopy(body["spec"]["tasks"][0])
    slow["name"] = "slow"
    slow["replicas"] = 1
    slow["template"]["metadata"]["annotations"] = {}
    body["spec"]["tasks"][0]["replicas"] = 2
    body["spec"]["tasks"].append(slow)
    env.create_job(body)
    env.wait_phase("minsucc", "Completed")
    wait_for(
        lambda: (
            all(p.status.phase == "Succeeded" for p in env.pods("minsucc"))
            and len(env.pods("minsucc")) == 2
        ),
        what="slow pod killed",
    )


def test_suspend_resume_with_commands(env: Env) -> None:
    body = vcjob("susp", replicas=2)
    body["spec"]["tasks"][0]["template"]["metadata"]["annotations"] = {}  # run until deleted
    env.create_job(body)
    env.wait_phase("susp", "Running")
    env.command("susp", "AbortJob")
    env.wait_phase("susp", "Aborted")
    wait_for(lambda: env.pods("susp") == [], what="pods gone")
    wait_for(
        lambda: (
            env.co.list_namespaced_custom_object(
                "bus.volcano.sh", "v1alpha1", "default", "commands"
            )["items"]
            == []
        ),
        what="commands deleted",
    )
    env.command("susp", "ResumeJob")
    job = env.wait_phase("susp", "Running")
    assert job["status"]["retryCount"] == 1
    env.command("susp", "TerminateJob")
    env.wait_phase("susp", "Terminated")


def test_queue_close_open_hierarchy(env: Env) -> None:
    for name, parent in (("org", "root"), ("team", "org")):
        env.co.create_cluster_custom_object(
            *S,
            "queues",
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": {"weight": 1, "parent": parent},
            },
        )
    wait_for(lambda: env.queue_state("team") == "Open", what="team open")
    env.queue_command("org", "CloseQueue")
    wait_for(
        lambda: env.queue_state("team") == "Closed" and env.queue_state("org") == "Closed",
        what="closed",
    )
    team = env.co.get_cluster_custom_object(*S, "queues", "team")
    assert team["metadata"]["annotations"]["volcano.sh/closed-by-parent"] == "true"
    env.queue_command("org", "OpenQueue")
    wait_for(
        lambda: env.queue_state("team") == "Open" and env.queue_state("org") == "Open",
        what="reopened",
    )


def test_podgroups_for_deployment_and_batch_job(env: Env) -> None:
    tmpl = {
        "metadata": {"labels": {"app": "web"}},
        "spec": {
            "schedulerName": "volcano",
            "containers": [
                {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "250m"}}}
            ],
        },
    }
    env.apps.create_namespaced_deployment(
        "default",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "annotations": {}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": tmpl},
        },
    )

    def rs_group() -> Any:
        rss = env.apps.list_namespaced_replica_set("default").items
        rs = [r for r in rss if r.metadata.name.startswith("web-")]
        if not rs:
            return None
        return env.podgroup(f"podgroup-{rs[0].metadata.uid}")

    pg = wait_for(rs_group, what="deployment podgroup")
    assert pg["spec"]["minMember"] == 1
    wait_for(
        lambda: [
            p
            for p in env.core.list_namespaced_pod("default", label_selector="app=web").items
            if (p.metadata.annotations or {}).get("scheduling.k8s.io/group-name")
            == pg["metadata"]["name"]
            and p.spec.node_name
        ],
        what="web pods grouped and bound",
    )

    jtmpl = {
        "metadata": {"annotations": {"sandbox.tephra.io/run-seconds": "0.3"}},
        "spec": {
            "schedulerName": "volcano",
            "restartPolicy": "Never",
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}
            ],
        },
    }
    bj = env.batch.create_namespaced_job(
        "default",
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "plain"},
            "spec": {"completions": 1, "parallelism": 1, "template": jtmpl},
        },
    )
    name = f"podgroup-{bj.metadata.uid}"
    wait_for(
        lambda: ((env.podgroup(name) or {}).get("status") or {}).get("phase") == "Completed",
        timeout=90,
        what="batch job podgroup Completed",
    )


def _with_run_seconds(doc: dict[str, Any], seconds: float = 0.5) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    for t in doc["spec"]["tasks"]:
        meta = t["template"].setdefault("metadata", {})
        meta.setdefault("annotations", {})["sandbox.tephra.io/run-seconds"] = str(seconds)
    return doc


@pytest.mark.parametrize("rel", ["job.yaml", "job-plugin.yaml", "task-start-dependency/job.yaml"])
def test_corpus_examples_complete(env: Env, rel: str) -> None:
    path = CORPUS / rel
    if not path.exists():
        pytest.skip(f"corpus not found at {path}")
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "Job"]
    for raw in docs:
        doc = _with_run_seconds(raw)
        doc["metadata"]["name"] = f"cx-{doc['metadata']['name']}"[:40]
        env.create_job(doc)
        job = env.wait_phase(doc["metadata"]["name"], "Completed")
        total = sum(t["replicas"] for t in doc["spec"]["tasks"])
        assert job["status"]["succeeded"] == total


def test_cli_job_and_queue_commands(env: Env) -> None:
    from click.testing import CliRunner

    from batch.cli.main import main

    kc = str(env.sb.kubeconfig_path)
    runner = CliRunner()

    def run(*args: str) -> str:
        res = runner.invoke(main, [*args, "--kubeconfig", kc], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return res.stdout  # vcctl's `queue ... -n NAME` adds a deprecation warning on stderr

    assert "run job clijob successfully" in run(
        "job", "run", "-N", "clijob", "-r", "2", "-m", "2", "-R", "cpu=100m", "-L", "cpu=100m"
    )
    env.wait_phase("clijob", "Running")
    out = run("job", "list")
    header = out.splitlines()[0].split()
    assert header == [
        "Name",
        "Creation",
        "Phase",
        "JobType",
        "Replicas",
        "Min",
        "Pending",
        "Running",
        "Succeeded",
        "Failed",
        "Unknown",
        "RetryCount",
        "Kind",
    ]
    row = next(line.split() for line in out.splitlines() if line.startswith("clijob"))
    assert row[2] == "Running" and row[3] == "Batch" and row[4] == "2" and row[5] == "2"
    assert "Namespace" in run("job", "list", "--all-namespaces").splitlines()[0]
    assert "clijob" in run("job", "view", "-N", "clijob")
    why = run("job", "why", "clijob")
    assert "phase Running" in why and "not pending" in why, why
    run("job", "suspend", "-N", "clijob")
    env.wait_phase("clijob", "Aborted")
    run("job", "resume", "-N", "clijob")
    env.wait_phase("clijob", "Running")
    run("job", "delete", "-N", "clijob")
    wait_for(
        lambda: (
            not any(
                j["metadata"]["name"] == "clijob"
                for j in env.co.list_namespaced_custom_object(*B, "default", "jobs")["items"]
            )
        ),
        what="deleted",
    )

    run("queue", "create", "-n", "cliq", "-w", "3")
    wait_for(lambda: env.queue_state("cliq") == "Open", what="cliq open")
    out = run("queue", "list")
    assert out.splitlines()[0].split() == [
        "Name",
        "Weight",
        "State",
        "Parent",
        "Inqueue",
        "Pending",
        "Running",
        "Unknown",
        "Completed",
        "Deserved",
    ]
    assert any(line.split()[:4] == ["cliq", "3", "Open", "root"] for line in out.splitlines())
    run("queue", "operate", "-n", "cliq", "-a", "close")
    wait_for(lambda: env.queue_state("cliq") == "Closed", what="cliq closed")
    run("queue", "operate", "-n", "cliq", "-a", "update", "-w", "5")
    assert run("queue", "get", "-n", "cliq").splitlines()[1].split()[:3] == ["cliq", "5", "Closed"]
    run("queue", "operate", "-n", "cliq", "-a", "open")
    wait_for(lambda: env.queue_state("cliq") == "Open", what="cliq reopened")
    run("queue", "operate", "-n", "cliq", "-a", "close")
    wait_for(lambda: env.queue_state("cliq") == "Closed", what="cliq closed again")
    run("queue", "delete", "-n", "cliq")


def test_a_just_created_queue_is_deleted_at_once(env: Env) -> None:
    """Issue 34.8: `kubectl create` then `kubectl delete` of a queue, before the controller has
    given it a state (or after it opened it): Volcano v1.10 deletes it, so does Tephra."""
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "qa-delete"},
        "spec": {"weight": 1},
    }
    env.co.create_cluster_custom_object(*S, "queues", queue)
    env.co.delete_cluster_custom_object(*S, "queues", "qa-delete")
    wait_for(lambda: not _exists(env, "qa-delete"), what="new qa-delete gone")
    env.co.create_cluster_custom_object(*S, "queues", queue)
    wait_for(lambda: env.queue_state("qa-delete") == "Open", what="qa-delete open")
    env.co.delete_cluster_custom_object(*S, "queues", "qa-delete")
    wait_for(lambda: not _exists(env, "qa-delete"), what="open qa-delete gone")


def _exists(env: Env, queue: str) -> bool:
    try:
        env.co.get_cluster_custom_object(*S, "queues", queue)
    except client.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def test_cli_rejects_bad_job_with_field_path(env: Env, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from batch.cli.main import main

    bad = CORPUS / "invalid_jobs" / "duplicatedTaskName-webhook-deny.yaml"
    if not bad.exists():
        pytest.skip("corpus missing")
    res = CliRunner().invoke(
        main, ["job", "run", "-f", str(bad), "--kubeconfig", str(env.sb.kubeconfig_path)]
    )
    assert res.exit_code == 1
    assert "spec.tasks" in res.output
    assert "Traceback" not in res.output
    good = tmp_path / "good.yaml"
    doc = yaml.safe_load((CORPUS / "job.yaml").read_text())
    doc["metadata"]["name"] = "from-file"
    good.write_text(yaml.safe_dump(doc))
    ok = CliRunner().invoke(
        main, ["job", "run", "-f", str(good), "--kubeconfig", str(env.sb.kubeconfig_path)]
    )
    assert ok.exit_code == 0, ok.output
    assert "run job from-file successfully" in ok.output
    env.wait_phase("from-file", "Running")
    env.command("from-file", "TerminateJob")
    env.wait_phase("from-file", "Terminated")


def test_statefulset_podgroup_min_member_and_scale_to_zero(env: Env) -> None:
    tmpl = {
        "metadata": {"labels": {"app": "db"}},
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}],
        },
    }
    sts = env.apps.create_namespaced_stateful_set(
        "default",
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {
                "name": "db",
                "annotations": {"scheduling.volcano.sh/group-min-member": "2"},
            },
            "spec": {
                "replicas": 2,
                "serviceName": "db",
                "selector": {"matchLabels": {"app": "db"}},
                "template": tmpl,
            },
        },
    )
    name = f"podgroup-{sts.metadata.uid}"
    pg = wait_for(lambda: env.podgroup(name), what="statefulset podgroup")
    assert pg["spec"]["minMember"] == 2
    assert pg["spec"]["minResources"] == {"cpu": "200m"}
    env.apps.patch_namespaced_stateful_set("db", "default", {"spec": {"replicas": 0}})
    wait_for(lambda: env.podgroup(name) is None, what="podgroup deleted on scale to zero")


def test_svc_ssh_objects_on_the_cluster(env: Env) -> None:
    body = vcjob("plug", replicas=2, run=30)
    body["spec"]["plugins"] = {"svc": [], "ssh": [], "env": []}
    env.create_job(body)
    env.wait_phase("plug", "Running")
    cm = env.core.read_namespaced_config_map("plug-svc", "default")
    assert cm.data["w.host"] == "plug-w-0.plug\nplug-w-1.plug"
    assert env.core.read_namespaced_service("plug", "default").spec.cluster_ip == "None"
    secret = env.core.read_namespaced_secret("plug-ssh", "default")
    assert set(secret.data) == {"id_rsa", "id_rsa.pub", "authorized_keys", "config"}
    pod = env.core.read_namespaced_pod("plug-w-1", "default")
    assert pod.spec.hostname == "plug-w-1" and pod.spec.subdomain == "plug"
    envs = {e.name: e.value for e in pod.spec.containers[0].env}
    assert envs["VC_TASK_INDEX"] == "1"
    env.command("plug", "TerminateJob")
    env.wait_phase("plug", "Terminated")


def test_webhook_reads_queues_from_the_cluster(env: Env, tmp_path: Path) -> None:
    from batch.controllers.webhook import ClusterFacts

    from .test_webhook import Server, review

    env.co.create_cluster_custom_object(
        *S,
        "queues",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "shut"},
            "spec": {"weight": 1},
        },
    )
    wait_for(lambda: env.queue_state("shut") == "Open", what="shut open")
    env.queue_command("shut", "CloseQueue")
    wait_for(lambda: env.queue_state("shut") == "Closed", what="shut closed")
    server = Server(tmp_path, facts=ClusterFacts(env.sb.kubeconfig_path))
    try:

        def verdict(queue: str) -> dict[str, Any]:
            body = vcjob("wh", replicas=1, queue=queue)
            body["metadata"]["namespace"] = "default"
            out = server.post(
                "/jobs/validate",
                review(body, kind="Job", group="batch.volcano.sh", version="v1alpha1"),
            )
            return dict(out["response"])

        assert verdict("default")["allowed"] is True
        for queue in ("missing-queue", "shut"):
            resp = verdict(queue)
            assert resp["allowed"] is False, queue
            assert "spec.queue" in resp["status"]["message"], resp["status"]["message"]
    finally:
        server.stop()
