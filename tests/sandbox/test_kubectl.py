"""Contract: kubectl works against the sandbox (apply, get by short names, get -w, wait, delete).

The Volcano example queue and job in fixtures/ are copied unchanged from Volcano's examples.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from batch.sandbox.testing import SandboxHandle

from .helpers import Server, bind, http

FIXTURES = Path(__file__).parent / "fixtures"
KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


def kubectl(
    server: Server, *args: str, check: bool = True, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    proc = subprocess.run(
        [KUBECTL, "--kubeconfig", str(server.kubeconfig_path), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {proc.stderr}")
    return proc


def test_apply_volcano_examples_and_short_names(server: Server) -> None:
    out = kubectl(
        server,
        "apply",
        "-f",
        str(FIXTURES / "volcano-queue.yaml"),
        "-f",
        str(FIXTURES / "volcano-job.yaml"),
    )
    assert "queue.scheduling.volcano.sh/test created" in out.stdout
    assert "job.batch.volcano.sh/test-job created" in out.stdout
    http(
        server,
        "POST",
        "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "kubectl-pg"},
            "spec": {"minMember": 1, "queue": "test"},
        },
    )
    got = kubectl(server, "get", "vcjob,pg,q").stdout
    assert "job.batch.volcano.sh/test-job" in got
    assert "podgroup.scheduling.volcano.sh/kubectl-pg" in got
    assert "queue.scheduling.volcano.sh/test" in got
    assert "queue.scheduling.volcano.sh/root" in got
    assert "queue.scheduling.volcano.sh/default" in got
    # a second apply is a client-side three-way JSON merge patch (CRDs have no strategic merge)
    again = kubectl(server, "apply", "-f", str(FIXTURES / "volcano-queue.yaml"))
    assert "queue.scheduling.volcano.sh/test" in again.stdout
    out = kubectl(server, "get", "vcjob", "test-job", "-o", "jsonpath={.spec.queue}").stdout
    assert out == "default"
    kubectl(server, "delete", "-f", str(FIXTURES / "volcano-job.yaml"))
    assert (
        http(server, "GET", "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs/test-job")[0]
        == 404
    )


def test_apply_configure_and_server_side(server: Server, tmp_path: Path) -> None:
    f = tmp_path / "cm.yaml"
    f.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kc\ndata:\n  a: '1'\n")
    kubectl(server, "apply", "-f", str(f))
    f.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kc\ndata:\n  b: '2'\n")
    assert "configured" in kubectl(server, "apply", "-f", str(f)).stdout
    data = http(server, "GET", "/api/v1/namespaces/default/configmaps/kc")[1]["data"]
    assert data == {"b": "2"}  # three-way merge removed a
    out = kubectl(server, "apply", "--server-side", "-f", str(f))
    assert "serverside-applied" in out.stdout


def test_server_side_apply_conflicts_and_force_conflicts(server: Server, tmp_path: Path) -> None:
    f = tmp_path / "cm.yaml"
    f.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kssa\ndata:\n  a: '1'\n")
    kubectl(server, "apply", "--server-side", "-f", str(f))
    f.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kssa\ndata:\n  a: '2'\n")
    out = kubectl(
        server, "apply", "--server-side", "--field-manager=other", "-f", str(f), check=False
    )
    assert out.returncode != 0 and 'conflict with "kubectl"' in out.stderr
    assert ".data.a" in out.stderr
    args = ("apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", str(f))
    assert "serverside-applied" in kubectl(server, *args).stdout
    cm = http(server, "GET", "/api/v1/namespaces/default/configmaps/kssa")[1]
    assert cm["data"] == {"a": "2"}
    assert [e["manager"] for e in cm["metadata"]["managedFields"]] == ["other"]
    kubectl(server, "delete", "configmap", "kssa")


def test_get_watch_sees_changes(server: Server) -> None:
    assert KUBECTL is not None
    proc = subprocess.Popen(
        [
            KUBECTL,
            "--kubeconfig",
            str(server.kubeconfig_path),
            "get",
            "configmaps",
            "-w",
            "--no-headers",
            "-o",
            "name",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1.0)
        http(
            server,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            {"metadata": {"name": "watched-cm"}},
        )
        time.sleep(1.0)
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=10)
    assert "configmap/watched-cm" in out, err


def test_wait_for_jsonpath_and_delete(server: Server) -> None:
    http(
        server,
        "POST",
        "/api/v1/namespaces/default/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "kwait"},
            "spec": {"containers": [{"name": "c", "image": "busybox:1"}]},
        },
    )
    assert bind(server, "default", "kwait", "node-0")[0] == 201
    kubectl(server, "wait", "--for=jsonpath={.status.phase}=Running", "pod/kwait", "--timeout=20s")
    kubectl(server, "wait", "--for=condition=Ready", "pod/kwait", "--timeout=20s")
    out = kubectl(server, "get", "pods", "kwait").stdout
    assert "Running" in out and "1/1" in out
    kubectl(server, "delete", "pod", "kwait", "--timeout=20s")  # fails if not gone by then
    assert http(server, "GET", "/api/v1/namespaces/default/pods/kwait")[0] == 404


def test_scale_and_get_nodes(server: Server) -> None:
    body: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "kscale"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "kscale"}},
            "template": {
                "metadata": {"labels": {"app": "kscale"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1"}]},
            },
        },
    }
    assert http(server, "POST", "/apis/apps/v1/namespaces/default/deployments", body)[0] == 201
    kubectl(server, "scale", "deployment/kscale", "--replicas=3")
    dep = http(server, "GET", "/apis/apps/v1/namespaces/default/deployments/kscale")[1]
    assert dep["spec"]["replicas"] == 3
    nodes = kubectl(server, "get", "nodes", "-l", "topology.tephra.io/rack=rack-1").stdout
    assert "node-1" in nodes and "Ready" in nodes and "node-0" not in nodes


def test_subject_access_reviews_about_other_users(server: Server) -> None:
    """What the webhook asks about a queue Command's requester: system:masters may update a
    queue; a user with no grant may not (the sandbox has no user but its admin)."""

    def review(user: str, groups: list[str]) -> Any:
        attributes = {"group": "scheduling.volcano.sh", "resource": "queues", "verb": "update"}
        spec = {"user": user, "groups": groups, "resourceAttributes": {**attributes, "name": "q"}}
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview"}
        code, answer = http(
            server,
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            {**body, "spec": spec},
        )
        assert code == 201, answer
        return answer["status"]

    assert review("root-admin", ["system:masters", "system:authenticated"])["allowed"] is True
    denied = review("alice", ["system:authenticated"])
    assert not denied.get("allowed"), denied


def test_auth_can_i_and_describe(server: Server) -> None:
    assert kubectl(server, "auth", "can-i", "create", "pods").stdout.strip() == "yes"
    out = kubectl(server, "describe", "node", "node-0").stdout
    assert "topology.tephra.io/rack=rack-0" in out and "nvidia.com/gpu" in out


def test_taint_and_untaint(server: Server) -> None:
    """NodeSpec.taints has no patch merge key: kubectl's strategic patch of the whole list
    replaces it, so removing a taint (`key:Effect-`) works."""
    kubectl(server, "taint", "nodes", "node-1", "a=1:NoSchedule")
    kubectl(server, "taint", "nodes", "node-1", "b=1:NoSchedule")
    kubectl(server, "taint", "nodes", "node-1", "a:NoSchedule-")
    out = kubectl(server, "get", "node", "node-1", "-o", "jsonpath={.spec.taints[*].key}")
    assert out.stdout.split() == ["b"]
    kubectl(server, "taint", "nodes", "node-1", "b-")
    out = kubectl(server, "get", "node", "node-1", "-o", "jsonpath={.spec.taints}")
    assert out.stdout.strip() in ("", "[]")


def _vcjob_yaml(name: str, extra: str) -> str:
    return (
        "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata:\n"
        f"  name: {name}\nspec:\n  {extra}\n  schedulerName: volcano\n  tasks:\n"
        "  - name: t\n    replicas: 1\n    template:\n      spec:\n        containers:\n"
        "        - name: c\n          image: busybox\n"
    )


def test_apply_validates_fields_without_being_told_not_to(server: Server, tmp_path: Path) -> None:
    """kubectl's default validation works: a misspelt field is refused (or, with
    --validate=warn, warned about and dropped), for a custom resource and a built-in kind."""
    f = tmp_path / "typo.yaml"
    f.write_text(_vcjob_yaml("typo-job", "minAvaliable: 1"))
    refused = kubectl(server, "apply", "-f", str(f), check=False)
    assert refused.returncode != 0
    assert 'strict decoding error: unknown field "spec.minAvaliable"' in refused.stderr
    warned = kubectl(server, "apply", "--validate=warn", "-f", str(f))
    assert 'unknown field "spec.minAvaliable"' in warned.stderr
    spec = kubectl(server, "get", "vcjob", "typo-job", "-o", "jsonpath={.spec}").stdout
    assert "minAvaliable" not in spec
    f.write_text(_vcjob_yaml("typo-job", "minAvailable: 1"))
    assert "configured" in kubectl(server, "apply", "-f", str(f)).stdout
    f.write_text(_vcjob_yaml("typo-job", "minAvailable: 1\n  bogus: 2"))
    patched = kubectl(server, "apply", "-f", str(f), check=False)
    assert 'unknown field "spec.bogus"' in patched.stderr
    kubectl(server, "delete", "vcjob", "typo-job")
    pod = tmp_path / "pod.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: typo-pod\nspec:\n"
        "  restartPolicyy: Never\n  containers:\n  - name: c\n    image: busybox\n"
    )
    refused = kubectl(server, "apply", "-f", str(pod), check=False)
    assert 'unknown field "spec.restartPolicyy"' in refused.stderr


def test_explain_reads_the_served_schemas(server: Server) -> None:
    out = kubectl(server, "explain", "vcjob.spec.minAvailable").stdout
    assert "minAvailable" in out and "<integer>" in out
    out = kubectl(server, "explain", "pods.spec.restartPolicy").stdout
    assert "restartPolicy" in out and "<string>" in out and "Always" in out


def test_typed_generators_send_protobuf_that_is_understood(server: Server) -> None:
    """`kubectl create <kind>` sends protobuf bodies: each object reads back as written."""

    def get(*args: str) -> str:
        return kubectl(server, "get", *args).stdout

    kubectl(server, "create", "namespace", "proto-ns")
    assert get("namespace", "proto-ns", "-o", "jsonpath={.status.phase}") == "Active"
    kubectl(server, "create", "priorityclass", "proto-pc", "--value=100", "--description=hi")
    pc = get("priorityclass", "proto-pc", "-o", "jsonpath={.value} {.description}")
    assert pc == "100 hi"
    kubectl(server, "-n", "proto-ns", "create", "deployment", "d", "--image=x", "--replicas=2")
    deploy = "{.spec.replicas} {.spec.template.spec.containers[0].image}"
    assert get("-n", "proto-ns", "deployment", "d", "-o", f"jsonpath={deploy}") == "2 x"
    kubectl(server, "-n", "proto-ns", "create", "configmap", "cm", "--from-literal=a=1")
    assert get("-n", "proto-ns", "configmap", "cm", "-o", "jsonpath={.data.a}") == "1"
    kubectl(server, "-n", "proto-ns", "create", "secret", "generic", "s", "--from-literal=pw=x2")
    assert get("-n", "proto-ns", "secret", "s", "-o", "jsonpath={.data.pw}") == "eDI="
    cron = ("create", "cronjob", "cj", "--image=x", "--schedule=*/5 * * * *", "--", "date")
    kubectl(server, "-n", "proto-ns", *cron)
    assert (
        get("-n", "proto-ns", "cronjob", "cj", "-o", "jsonpath={.spec.schedule}") == "*/5 * * * *"
    )
    kubectl(server, "-n", "proto-ns", "create", "service", "clusterip", "svc", "--tcp=80:8080")
    port = get("-n", "proto-ns", "service", "svc", "-o", "jsonpath={.spec.ports[0].targetPort}")
    assert port == "8080"
    kubectl(server, "-n", "proto-ns", "create", "quota", "q", "--hard=pods=10,cpu=4")
    assert get("-n", "proto-ns", "quota", "q", "-o", "jsonpath={.spec.hard.cpu}") == "4"
    kubectl(server, "-n", "proto-ns", "create", "serviceaccount", "sa")
    kubectl(server, "-n", "proto-ns", "create", "role", "r", "--verb=get", "--resource=pods")
    binding = ("create", "rolebinding", "rb", "--role=r", "--serviceaccount=proto-ns:sa")
    kubectl(server, "-n", "proto-ns", *binding)
    subject = get("-n", "proto-ns", "rolebinding", "rb", "-o", "jsonpath={.subjects[0].name}")
    assert subject == "sa"
    kubectl(server, "delete", "namespace", "proto-ns", "--wait=false")
    kubectl(server, "delete", "priorityclass", "proto-pc")


def test_events_print_as_kubectl_prints_them(server: Server, tmp_path: Path) -> None:
    f = tmp_path / "event.yaml"
    f.write_text(
        "apiVersion: v1\nkind: Event\nmetadata:\n  name: table-pod.1\ninvolvedObject:\n"
        "  kind: Pod\n  name: table-pod\n  namespace: default\nreason: Scheduled\n"
        "message: Successfully assigned default/table-pod to node-0\ntype: Normal\ncount: 2\n"
    )
    kubectl(server, "apply", "-f", str(f))
    lines = kubectl(server, "get", "events", "--field-selector", "reason=Scheduled").stdout
    header, *rows = lines.splitlines()
    assert header.split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    row = next(r for r in rows if "table-pod" in r)
    assert "Normal" in row and "pod/table-pod" in row and "Successfully assigned" in row
    kubectl(server, "delete", "-f", str(f))


def test_a_pod_for_the_default_scheduler_is_told_it_will_wait(sb: SandboxHandle) -> None:
    """The sandbox runs no kube-scheduler: `kubectl run` says so instead of a silent Pending."""
    server = Server("sandbox", sb.url, sb.kubeconfig_path)
    out = kubectl(server, "run", "no-sched", "--image=x")
    assert "default-scheduler" in out.stderr and "schedulerName: volcano" in out.stderr
    overrides = '{"spec": {"schedulerName": "volcano"}}'
    ours = kubectl(server, "run", "ours", "--image=x", f"--overrides={overrides}")
    assert "default-scheduler" not in ours.stderr
    kubectl(server, "delete", "pod", "no-sched", "ours", "--wait=false")
