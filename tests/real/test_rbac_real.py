"""Every component under its chart ServiceAccount's RBAC, against a real kube-apiserver.

The chart is installed with `helm install`; `tephra webhook`, `tephra controller` and
`tephra scheduler` then run as processes, each with a kubeconfig holding a token of its own
ServiceAccount (TokenRequest API), never the admin's certificate. The test plays kubelet as the
admin: it makes Nodes Ready and moves bound pods to Running and Succeeded. A VCJob with the ssh
and svc plugins in a queue must be run to Completed: the controller creates its PodGroup, pods,
Secret, Service, ConfigMap, NetworkPolicy and Events, the scheduler binds the pods and writes
PodGroup and Queue status, both hold their leader Lease. The admin's CloseQueue Command passes the
webhook's SubjectAccessReview and is executed. Any 403/forbidden in a component's log
fails the test: the chart's rules must be enough, and (docs/deploy.md) no more than that.
"""

from __future__ import annotations

import base64
import datetime as dt
import re
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from batch.sandbox.control_plane import ControlPlane
from tests.api.conftest import make_job, make_queue
from tests.charts.helmtools import CHART_DIR
from tests.real.conftest import Api, TephraProcess, helm, helm_env, tephra_process

pytestmark = [pytest.mark.real, pytest.mark.xdist_group("real")]

RELEASE = "rbac-real"
NAMESPACE = "rbac-real"
JOB_NS = "rbac-jobs"
QUEUE = "rbac-q"
CLOSED_QUEUE = "rbac-closed"
JOB = "rbac-job"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
# not the milliseconds of a log timestamp ("19:01:54,403 INFO")
FORBIDDEN = re.compile(r"(?<![,.])\b403\b|forbidden", re.IGNORECASE)
#: Values of the install: the chart's defaults, the job plugins' rights in the job namespace.
VALUES: dict[str, Any] = {"controller": {"jobNamespaces": [JOB_NS]}}


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def wait(what: str, check: Callable[[], Any], timeout: float = 60.0, *logs: TephraProcess) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.3)
    tails = "\n".join(f"--- {p.args[0]}:\n{p.log()[-3000:]}" for p in logs)
    pytest.fail(f"{what} not within {timeout:.0f} s\n{tails}")


# ----------------------------------------------------------------------------- the install
@pytest.fixture(scope="module")
def leftovers(api: Api) -> Iterator[None]:
    """After the release is gone: remove what the test made, so no later test of the session
    finds Ready nodes that nobody runs pods on, or a queue taking a share."""
    yield
    for i in range(2):
        api.request("DELETE", f"/api/v1/nodes/rbac-node-{i}")
    api.request("DELETE", f"/api/v1/namespaces/{JOB_NS}")
    api.request("DELETE", f"{SCHED}/queues/{QUEUE}")
    api.request("DELETE", f"{SCHED}/queues/{CLOSED_QUEUE}")


@pytest.fixture(scope="module")
def chart(
    real: ControlPlane,
    api: Api,
    helm_bin: Path,
    tmp_path_factory: pytest.TempPathFactory,
    leftovers: None,
) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("rbac-real")
    env = helm_env(real, tmp)
    values = tmp / "values.yaml"
    values.write_text(yaml.safe_dump(VALUES))
    api.request("POST", "/api/v1/namespaces", {"metadata": {"name": JOB_NS}})
    install = ["install", RELEASE, str(CHART_DIR), "-n", NAMESPACE, "--create-namespace"]
    helm(helm_bin, env, *install, "-f", str(values), "--no-hooks", "--timeout", "120s")
    try:
        yield tmp
    finally:
        helm(helm_bin, env, "uninstall", RELEASE, "-n", NAMESPACE, "--no-hooks")


def token_kubeconfig(real: ControlPlane, api: Api, component: str, directory: Path) -> Path:
    """A kubeconfig that authenticates as the component's chart ServiceAccount (a bound token)."""
    sa = f"{RELEASE}-tephra-{component}"
    request = {"spec": {"expirationSeconds": 3600}}
    path = f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{sa}/token"
    code, answer = api.request("POST", path, request)
    assert code == 201, answer
    ca = base64.b64encode(real.pki["ca"].read_bytes()).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "real", "cluster": {"server": real.server, "certificate-authority-data": ca}}
        ],
        "users": [{"name": sa, "user": {"token": answer["status"]["token"]}}],
        "contexts": [{"name": sa, "context": {"cluster": "real", "user": sa}}],
        "current-context": sa,
    }
    out = directory / f"{component}.kubeconfig"
    out.write_text(yaml.safe_dump(config))
    out.chmod(0o600)
    return out


def point_webhooks_at(api: Api, url: str, ca_file: Path) -> None:
    """The chart's webhook configurations, called at `url` (the local process) instead."""
    ca = base64.b64encode(ca_file.read_bytes()).decode()
    for plural in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        path = f"{ADMISSION}/{plural}/{RELEASE}-tephra-webhook"
        code, config = api.request("GET", path)
        assert code == 200, config
        for hook in config["webhooks"]:
            hook_path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": url + hook_path, "caBundle": ca}
        code, answer = api.request("PUT", path, config)
        assert code == 200, answer


@pytest.fixture(scope="module")
def components(real: ControlPlane, api: Api, chart: Path) -> Iterator[dict[str, TephraProcess]]:
    tmp = chart
    confs = {c: token_kubeconfig(real, api, c, tmp) for c in ("webhook", "controller", "scheduler")}
    webhook_args = ["--host", "127.0.0.1", "--port", "0", "--self-signed", "--cert-dir", str(tmp)]
    webhook_args += ["--san", "127.0.0.1", "--kubeconfig", str(confs["webhook"])]
    lease = ["--leader-elect", "--lease-namespace", NAMESPACE]
    with (
        tephra_process(tmp / "webhook.log", "webhook", *webhook_args) as webhook,
        tephra_process(
            tmp / "controller.log",
            "controller",
            "-v",
            f"--kubeconfig={confs['controller']}",
            "--metrics-port=0",
            *lease,
        ) as controller,
        tephra_process(
            tmp / "scheduler.log",
            "scheduler",
            "-v",
            f"--kubeconfig={confs['scheduler']}",
            "--metrics-port=0",
            "--healthz-port=0",
            "--schedule-period=0.5s",
            *lease,
        ) as scheduler,
    ):
        port = int(webhook.wait_for(r"listening on https://127\.0\.0\.1:(\d+)").group(1))
        point_webhooks_at(api, f"https://127.0.0.1:{port}", tmp / "tls.crt")
        procs = {"webhook": webhook, "controller": controller, "scheduler": scheduler}
        yield procs
        for name, proc in procs.items():
            assert proc.proc.poll() is None, f"{name} exited:\n{proc.log()}"


# ------------------------------------------------------------------- the test as the kubelet
def update(api: Api, path: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """GET, change and PUT `path`, again on a 409 conflict (another writer came first)."""
    for _ in range(20):
        code, current = api.request("GET", path)
        assert code == 200, current
        change(current)
        code, answer = api.request("PUT", path, current)
        if code == 200:
            return dict(answer)
        assert code == 409, answer
    pytest.fail(f"{path} never written: conflicts")


def make_ready_node(api: Api, name: str) -> None:
    labels = {"kubernetes.io/hostname": name}
    body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
    code, node = api.request("POST", "/api/v1/nodes", body)
    assert code in (201, 409), node
    path = f"/api/v1/nodes/{name}"
    # TaintNodesByCondition taints a new Node not-ready; no node-lifecycle controller runs here.
    update(api, path, lambda node: node["spec"].update(taints=[]))
    capacity = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "test"}
    ready.update(lastHeartbeatTime=now(), lastTransitionTime=now())
    status = {"capacity": capacity, "allocatable": capacity, "conditions": [ready]}
    update(api, f"{path}/status", lambda node: node.update(status=status))


def set_pod_phase(api: Api, pod: dict[str, Any], phase: str) -> None:
    def change(current: dict[str, Any]) -> None:
        status = current.setdefault("status", {})
        status["phase"] = phase
        status.setdefault("startTime", now())
        state: dict[str, Any] = {"running": {"startedAt": now()}}
        if phase == "Succeeded":
            state = {"terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": now()}}
        status["containerStatuses"] = [
            {
                "name": c["name"],
                "image": c["image"],
                "imageID": "",
                "ready": phase == "Running",
                "restartCount": 0,
                "state": state,
            }
            for c in current["spec"]["containers"]
        ]

    update(api, f"/api/v1/namespaces/{JOB_NS}/pods/{pod['metadata']['name']}/status", change)


def job_body() -> dict[str, Any]:
    job = make_job(
        minAvailable=2,
        schedulerName="volcano",
        queue=QUEUE,
        plugins={"ssh": [], "svc": []},
        # A policy action is what makes the controller post an Event (ExecuteAction).
        policies=[{"event": "TaskCompleted", "action": "CompleteJob"}],
    )
    job["metadata"] = {"name": JOB}
    return job


def get(api: Api, path: str) -> dict[str, Any]:
    """The object at `path`, or {} while it does not exist."""
    code, answer = api.request("GET", path)
    return dict(answer) if code == 200 else {}


SCHED = "/apis/scheduling.volcano.sh/v1beta1"
NS_PATH = f"/api/v1/namespaces/{JOB_NS}"


def job_pods(api: Api) -> list[dict[str, Any]]:
    items = get(api, f"{NS_PATH}/pods?labelSelector=volcano.sh/job-name={JOB}").get("items")
    return list(items or [])


def bound_pods(api: Api) -> list[dict[str, Any]]:
    pods = job_pods(api)
    return pods if len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods) else []


def job_phase(api: Api) -> str:
    job = get(api, f"/apis/batch.volcano.sh/v1alpha1/namespaces/{JOB_NS}/jobs/{JOB}")
    return str((job.get("status") or {}).get("state", {}).get("phase", ""))


def queue_status(api: Api) -> dict[str, Any]:
    return dict(get(api, f"{SCHED}/queues/{QUEUE}").get("status") or {})


def podgroup_phase(api: Api) -> str:
    items = get(api, f"{SCHED}/namespaces/{JOB_NS}/podgroups").get("items") or [{}]
    return str((items[0].get("status") or {}).get("phase", ""))


def submit(api: Api, procs: list[TephraProcess]) -> None:
    """Ready nodes, an open queue, then the job (as a user would, through the webhook)."""
    for i in range(2):
        make_ready_node(api, f"rbac-node-{i}")
    code, answer = api.request("POST", f"{SCHED}/queues", make_queue(QUEUE, weight=1))
    assert code == 201, answer
    wait("the queue Open", lambda: queue_status(api).get("state") == "Open", 60, *procs)
    jobs = f"/apis/batch.volcano.sh/v1alpha1/namespaces/{JOB_NS}/jobs"
    code, answer = api.request("POST", jobs, job_body())
    assert code == 201, answer


def check_plugin_objects(api: Api, procs: list[TephraProcess]) -> None:
    netpol = f"/apis/networking.k8s.io/v1/namespaces/{JOB_NS}/networkpolicies/{JOB}"
    for what, path in (
        ("the ssh Secret", f"{NS_PATH}/secrets/{JOB}-ssh"),
        ("the svc Service", f"{NS_PATH}/services/{JOB}"),
        ("the svc ConfigMap", f"{NS_PATH}/configmaps/{JOB}-svc"),
        ("the svc NetworkPolicy", netpol),
    ):
        wait(what, partial(get, api, path), 60, *procs)


def check_scheduler_status(api: Api, procs: list[TephraProcess]) -> None:
    """While the gang runs: PodGroup phase and Queue allocation written by the scheduler."""
    wait("the PodGroup Running", lambda: podgroup_phase(api) == "Running", 60, *procs)
    found = wait("the Queue's allocation", lambda: queue_status(api).get("allocated"), 60, *procs)
    assert found.get("cpu") in ("2", "2000m"), found


def check_events_and_leases(api: Api) -> None:
    events = get(api, f"{NS_PATH}/events").get("items") or []
    seen = {
        (e.get("reportingComponent") or e["source"].get("component"), e["reason"]) for e in events
    }
    assert ("tephra-controllers", "ExecuteAction") in seen, seen
    assert ("tephra-scheduler", "Unschedulable") in seen, seen
    leases = get(api, f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases")
    holders = {x["metadata"]["name"]: x["spec"].get("holderIdentity") for x in leases["items"]}
    assert holders.get("tephra-scheduler") and holders.get("tephra-controllers"), holders


def test_a_job_runs_to_completion_under_the_charts_rbac(
    api: Api, components: dict[str, TephraProcess]
) -> None:
    procs = list(components.values())
    submit(api, procs)
    check_plugin_objects(api, procs)
    pods = wait("both pods bound (scheduler)", lambda: bound_pods(api), 90, *procs)
    for pod in pods:
        set_pod_phase(api, pod, "Running")
    wait("the job Running", lambda: job_phase(api) == "Running", 60, *procs)
    check_scheduler_status(api, procs)
    for pod in pods:
        set_pod_phase(api, pod, "Succeeded")
    wait("the job Completed", lambda: job_phase(api) == "Completed", 60, *procs)
    check_events_and_leases(api)
    for proc in procs:
        refused = [line for line in proc.log().splitlines() if FORBIDDEN.search(line)]
        assert not refused, f"{proc.args[0]} was refused:\n" + "\n".join(refused[:20])


def test_an_admins_queue_command_passes_the_webhook_and_is_executed(
    api: Api, components: dict[str, TephraProcess]
) -> None:
    """The webhook asks about the requester with its own ServiceAccount (create on
    subjectaccessreviews); without that right it would refuse even the admin's Command."""
    procs = list(components.values())
    code, answer = api.request("POST", f"{SCHED}/queues", make_queue(CLOSED_QUEUE, weight=1))
    assert code == 201, answer
    path = f"{SCHED}/queues/{CLOSED_QUEUE}"
    state = lambda: (get(api, path).get("status") or {}).get("state")  # noqa: E731
    wait("the queue Open", lambda: state() == "Open", 60, *procs)
    command = {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"name": "close-it"},
        "action": "CloseQueue",
        "target": {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "name": CLOSED_QUEUE,
        },
    }
    code, answer = api.request(
        "POST", f"/apis/bus.volcano.sh/v1alpha1/namespaces/{JOB_NS}/commands", command
    )
    assert code == 201, answer
    wait("the queue Closed by the controller", lambda: state() == "Closed", 60, *procs)
    for proc in procs:
        refused = [line for line in proc.log().splitlines() if FORBIDDEN.search(line)]
        assert not refused, f"{proc.args[0]} was refused:\n" + "\n".join(refused[:20])
