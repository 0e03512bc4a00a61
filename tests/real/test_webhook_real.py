"""`tephra webhook` called by a real kube-apiserver through the chart's webhook configurations.

The webhook runs as its own process on 127.0.0.1 with its self-signed certificate; the chart's
MutatingWebhookConfiguration and ValidatingWebhookConfiguration (rendered by `helm template`,
pod webhooks left out so the rest of the session's pods are untouched) are registered with a URL
clientConfig and that certificate as caBundle. The apiserver then sends its own AdmissionReview
v1 requests: Volcano's invalid examples must come back refused with the webhook's field message,
the valid ones stored with the webhook's defaults.
"""

from __future__ import annotations

import base64
import copy
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from batch.api.admission import AssumeAllQueues, admit
from batch.sandbox.control_plane import ControlPlane
from tests.api.conftest import corpus_documents, make_job, make_queue, make_task
from tests.charts.helmtools import render
from tests.real.conftest import Api, TephraProcess, tephra_process

pytestmark = [pytest.mark.real, pytest.mark.xdist_group("real")]

NS = "webhook-real"
JOBS = f"/apis/batch.volcano.sh/v1alpha1/namespaces/{NS}/jobs"
PODGROUPS = f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{NS}/podgroups"
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
CONFIG_KINDS = {
    "MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
    "ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
}
#: The corpus's intentionally invalid jobs and the field message the webhook gives each.
INVALID = {
    "duplicatedPolicyEvent-webhook-deny.yaml": "spec.policies[1].event: unique",
    "duplicatedTaskName-webhook-deny.yaml": "spec.tasks[1].name: unique",
    "minAvailable-webhook-deny.yaml": "spec.minAvailable: minAvailableLessEqualReplicas",
}


def chart_configurations(helm: Path, tmp: Path, base_url: str, ca: str) -> list[dict[str, Any]]:
    """The chart's two webhook configurations, pointed at `base_url` instead of the Service."""
    values = {"webhook": {"pods": {"validate": False, "mutate": {"enabled": False}}}}
    docs = render(helm, tmp, values, include_crds=False)
    configs = [copy.deepcopy(d) for d in docs if d["kind"] in CONFIG_KINDS]
    assert len(configs) == 2, [d["kind"] for d in docs]
    for config in configs:
        config["metadata"] = {"name": "tephra-webhook-real-test"}
        for hook in config["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": base_url + path, "caBundle": ca}
    return configs


def wait_until_called(api: Api, proc: TephraProcess) -> None:
    """Registration takes effect asynchronously: wait until an invalid job is refused."""
    body = {"metadata": {"name": "probe"}, "spec": {"minAvailable": 3, "tasks": []}}
    body.update(apiVersion="batch.volcano.sh/v1alpha1", kind="Job")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        code, answer = api.request("POST", JOBS + "?dryRun=All", body)
        if code != 201 and "denied the request" in str(answer.get("message")):
            return
        time.sleep(0.3)
    pytest.fail(f"the apiserver never called the webhook: {code} {answer}\n{proc.log()}")


@pytest.fixture(scope="module")
def webhook(
    real: ControlPlane,
    api: Api,
    crds: list[str],
    helm_bin: Path,
    tmp_path_factory: pytest.TempPathFactory,
    corpus_queues: list[str],
) -> Iterator[TephraProcess]:
    tmp = tmp_path_factory.mktemp("webhook-real")
    args = ["--host", "127.0.0.1", "--port", "0", "--self-signed", "--cert-dir", str(tmp)]
    args += ["--san", "127.0.0.1", "--kubeconfig", str(real.kubeconfig)]
    api.request("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
    with tephra_process(tmp / "webhook.log", "webhook", *args) as proc:
        port = int(proc.wait_for(r"listening on https://127\.0\.0\.1:(\d+)").group(1))
        ca = base64.b64encode((tmp / "tls.crt").read_bytes()).decode()
        configs = chart_configurations(helm_bin, tmp, f"https://127.0.0.1:{port}", ca)
        for config in configs:
            plural = CONFIG_KINDS[config["kind"]]
            code, answer = api.request("POST", f"{ADMISSION}/{plural}", config)
            assert code == 201, answer
        try:
            wait_until_called(api, proc)
            yield proc
        finally:
            for config in configs:
                plural = CONFIG_KINDS[config["kind"]]
                api.request("DELETE", f"{ADMISSION}/{plural}/{config['metadata']['name']}")
        assert "Traceback" not in proc.log(), proc.log()


def corpus_of(kind: str, *, invalid: bool) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{rel}#{index}", doc)
        for rel, index, doc in corpus_documents()
        if isinstance(doc, dict)
        and doc.get("kind") == kind
        and "volcano.sh" in str(doc.get("apiVersion"))
        and ("invalid_jobs" in rel) == invalid
    ]


def test_invalid_examples_are_refused_with_the_field_message(
    api: Api, webhook: TephraProcess
) -> None:
    invalid = corpus_of("Job", invalid=True)
    assert {where.split("/")[-1].split("#")[0] for where, _ in invalid} == set(INVALID)
    for where, doc in invalid:
        code, answer = api.request("POST", JOBS, doc)
        expected = INVALID[where.split("/")[-1].split("#")[0]]
        message = str(answer.get("message"))
        assert code == 422, (where, code, answer)
        assert 'admission webhook "validate.jobs.batch.tephra.io" denied' in message, message
        assert expected in message, (where, message)
        assert answer["reason"] == "Invalid", answer
        code, _ = api.request("GET", f"{JOBS}/{doc['metadata']['name']}")
        assert code == 404, f"{where} was stored although refused"


@pytest.fixture(scope="module")
def corpus_queues(api: Api, crds: list[str]) -> Iterator[list[str]]:
    """The corpus's Queues (the jobs name them), made before the webhooks are registered and
    removed after they are gone (a Queue that is not Closed may not be deleted through them)."""
    made = []
    for where, doc in corpus_of("Queue", invalid=False):
        code, answer = api.request("POST", QUEUES, doc)
        assert code in (201, 409), (where, answer)
        if code == 201:
            made.append(doc["metadata"]["name"])
    yield made
    api.request("DELETE", f"/api/v1/namespaces/{NS}")  # and every job and PodGroup in it
    for name in made:
        api.request("DELETE", f"{QUEUES}/{name}")


def expected_spec(doc: dict[str, Any]) -> dict[str, Any]:
    """What Tephra's own defaulting makes of the job (the webhook must have applied it)."""
    result = admit(kind="Job", operation="CREATE", obj=doc, old=None, lookup=AssumeAllQueues())
    assert result.allowed, result.messages()
    spec: dict[str, Any] = result.object["spec"]
    return spec


def test_valid_examples_are_stored_with_the_webhook_defaults(
    api: Api, webhook: TephraProcess
) -> None:
    jobs = corpus_of("Job", invalid=False)
    assert len(jobs) >= 15
    for i, (where, original) in enumerate(jobs):
        doc = copy.deepcopy(original)
        doc["metadata"] = {"name": f"w{i}-{doc['metadata']['name']}"[:40].rstrip("-")}
        doc["metadata"]["namespace"] = NS
        code, stored = api.request("POST", JOBS, doc)
        assert code == 201, (where, stored)
        want = expected_spec(doc)
        spec = stored["spec"]
        assert "minAvailable" in spec, where
        assert spec["minAvailable"] == want["minAvailable"], where
        assert spec["schedulerName"] == want["schedulerName"], where
        assert spec["queue"] == want["queue"] and spec["maxRetry"] == want["maxRetry"], where
        for task, task_want in zip(spec["tasks"], want["tasks"], strict=True):
            # No CRD default sets these: only the mutating webhook can have.
            assert task["name"] == task_want["name"], where
            assert task["minAvailable"] == task_want["minAvailable"], (where, task["name"])


def test_a_bare_job_gets_minavailable_queue_and_task_names(
    api: Api, webhook: TephraProcess
) -> None:
    tasks = [make_task(replicas=3), make_task(replicas=3)]
    for task in tasks:
        del task["name"]
    doc = make_job(tasks=tasks)
    doc["metadata"] = {"name": "bare"}
    code, stored = api.request("POST", JOBS, doc)
    assert code == 201, stored
    spec = stored["spec"]
    assert spec["minAvailable"] == 6 and spec["queue"] == "default" and spec["maxRetry"] == 3
    assert spec["schedulerName"] == "volcano"
    assert [t["name"] for t in spec["tasks"]] == ["default0", "default1"]
    assert [t["minAvailable"] for t in spec["tasks"]] == [3, 3]


def test_podgroup_and_queue_examples_pass_admission(api: Api, webhook: TephraProcess) -> None:
    for where, doc in corpus_of("PodGroup", invalid=False):
        body = copy.deepcopy(doc)
        body["metadata"]["namespace"] = NS
        code, answer = api.request("POST", PODGROUPS, body)
        assert code == 201, (where, answer)
    code, answer = api.request("POST", QUEUES, make_queue("selfish", parent="selfish"))
    assert code == 422, answer
    assert 'admission webhook "validate.queues.scheduling.tephra.io" denied' in answer["message"]
    assert "spec.parent: parent" in answer["message"], answer


def test_an_update_is_validated_too(api: Api, webhook: TephraProcess) -> None:
    doc = make_job()
    doc["metadata"] = {"name": "updated"}
    code, stored = api.request("POST", JOBS, doc)
    assert code == 201, stored
    stored["spec"]["minAvailable"] = 99
    code, answer = api.request("PUT", f"{JOBS}/updated", stored)
    assert code == 422, answer
    assert "denied the request" in answer["message"] and "spec.minAvailable" in answer["message"]


def close_queue(api: Api, name: str) -> None:
    """Closed, as the controller marks a queue after `vcctl queue operate -a close`."""
    code, queue = api.request("GET", f"{QUEUES}/{name}")
    assert code == 200, queue
    queue["status"] = {**(queue.get("status") or {}), "state": "Closed"}
    code, answer = api.request("PUT", f"{QUEUES}/{name}/status", queue)
    assert code == 200, answer


def test_queue_updates_and_deletes_are_validated(api: Api, webhook: TephraProcess) -> None:
    """UPDATE and DELETE reviews from the apiserver (DELETE has no object, only oldObject)."""
    for queue in (make_queue("wq-parent"), make_queue("wq-child", parent="wq-parent")):
        code, answer = api.request("POST", QUEUES, queue)
        assert code == 201, answer
    _, parent = api.request("GET", f"{QUEUES}/wq-parent")
    parent["spec"]["parent"] = "wq-child"
    code, answer = api.request("PUT", f"{QUEUES}/wq-parent", parent)
    assert code == 422 and "spec.parent: parentCycle" in answer["message"], answer
    code, answer = api.request("DELETE", f"{QUEUES}/wq-child")
    assert code == 422 and "closedOnly" in answer["message"], answer
    for name in ("wq-child", "wq-parent"):
        close_queue(api, name)
        code, answer = api.request("DELETE", f"{QUEUES}/{name}")
        assert code == 200, answer


RBAC = "/apis/rbac.authorization.k8s.io/v1"
COMMANDS = f"/apis/bus.volcano.sh/v1alpha1/namespaces/{NS}/commands"


def queue_command(name: str, queue: str, kind: str = "Queue") -> dict[str, Any]:
    api_version = (
        "scheduling.volcano.sh/v1beta1" if kind == "Queue" else "batch.volcano.sh/v1alpha1"
    )
    return {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"name": name},
        "action": "CloseQueue" if kind == "Queue" else "AbortJob",
        "target": {"apiVersion": api_version, "kind": kind, "name": queue},
    }


def grant(api: Api, kind: str, name: str, rules: list[dict[str, Any]]) -> None:
    """Role (in NS) or ClusterRole `name` with `rules`, bound to the user alice."""
    scope = f"{RBAC}/namespaces/{NS}" if kind == "Role" else RBAC
    role = {"metadata": {"name": name}, "rules": rules}
    code, answer = api.request("POST", f"{scope}/{kind.lower()}s", role)
    assert code == 201, answer
    subject = {"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}
    binding = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
        "subjects": [subject],
    }
    code, answer = api.request("POST", f"{scope}/{kind.lower()}bindings", binding)
    assert code == 201, answer


@pytest.fixture
def alice(api: Api) -> Iterator[None]:
    """A tenant: may create Commands in NS, and update the one queue `alice-q`."""
    commands = {"apiGroups": ["bus.volcano.sh"], "resources": ["commands"], "verbs": ["create"]}
    grant(api, "Role", "tenant-commands", [commands])
    own_queue = {
        "apiGroups": ["scheduling.volcano.sh"],
        "resources": ["queues"],
        "resourceNames": ["alice-q"],
        "verbs": ["update"],
    }
    grant(api, "ClusterRole", "tenant-alice-q", [own_queue])
    try:
        yield
    finally:
        for path in (f"{RBAC}/namespaces/{NS}/role", f"{RBAC}/clusterrole"):
            name = "tenant-commands" if "namespaces" in path else "tenant-alice-q"
            api.request("DELETE", f"{path}bindings/{name}")
            api.request("DELETE", f"{path}s/{name}")


def test_a_queue_command_needs_the_right_to_update_the_queue(
    api: Api, webhook: TephraProcess, alice: None
) -> None:
    """Issue 30.1 against real RBAC: a tenant who may create Commands cannot close `root`."""
    post = partial(api.request, "POST", COMMANDS)
    deadline = time.monotonic() + 30  # RBAC grants reach the authorizer's cache asynchronously
    while (answer := post(queue_command("own-q", "alice-q"), as_user="alice"))[0] != 201:
        assert time.monotonic() < deadline, answer
        time.sleep(0.3)
    code, answer = post(queue_command("close-root", "root"), as_user="alice")
    assert code == 403, answer
    message = answer["message"]
    assert 'admission webhook "validate.commands.bus.tephra.io" denied the request' in message
    assert "Command webhook-real/close-root: target: queueCommandAccess" in message, message
    assert "alice may not update queues.scheduling.volcano.sh 'root'" in message, message
    assert api.request("GET", f"{COMMANDS}/close-root")[0] == 404, "refused but stored"
    code, answer = post(queue_command("abort", "some-job", kind="Job"), as_user="alice")
    assert code == 201, answer  # Job Commands act in her own namespace: not asked about
    code, answer = post(queue_command("admin-close-root", "root"))
    assert code == 201, answer  # the cluster admin may
    for name in ("own-q", "abort", "admin-close-root"):
        api.request("DELETE", f"{COMMANDS}/{name}")
    assert "Traceback" not in webhook.log()


def test_podgroup_moves_cronjobs_and_oversized_jobs_are_refused(
    api: Api, webhook: TephraProcess
) -> None:
    """Issue 30 items 6 and 9 through the chart's registrations on a real apiserver."""
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "mover"},
        "spec": {"minMember": 1, "queue": "default"},
    }
    code, stored = api.request("POST", PODGROUPS, group)
    assert code == 201, stored
    stored["spec"]["queue"] = "root"
    code, answer = api.request("PUT", f"{PODGROUPS}/mover", stored)
    assert code == 422 and "spec.queue: queueNotRoot" in answer["message"], answer
    cron = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "CronJob",
        "metadata": {"name": "tz"},
        "spec": {"schedule": "TZ=../../etc/passwd 0 1 * * *", "jobTemplate": make_job()},
    }
    cronjobs = f"/apis/batch.volcano.sh/v1alpha1/namespaces/{NS}/cronjobs"
    code, answer = api.request("POST", cronjobs, cron)
    assert code in (400, 422) and "spec.schedule" in answer["message"], answer
    big = make_job(tasks=[make_task(f"t{i}", replicas=1) for i in range(10_000)])
    big["metadata"] = {"name": "big"}
    code, answer = api.request("POST", JOBS, big)
    assert code == 422 and "over the limit of 100 tasks per job" in answer["message"], answer
