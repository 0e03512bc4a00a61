"""The command lines the chart renders are accepted by the programs they start.

Each Deployment's container args are passed to the real `tephra` CLI (with `--help` appended, so
the command parses every option and exits without connecting anywhere), and the hook Jobs' args
to the certificate script's parser. A flag the chart passes but the component does not know would
crash-loop the pods of a real install.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.charts.helmtools import CHART_DIR, Doc, find, name_of, one, render
from tests.scripts import load_script

TEPHRA = Path(sys.executable).with_name("tephra")


@pytest.fixture(scope="module")
def docs(helm: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Doc]:
    return render(helm, tmp_path_factory.mktemp("args"))


def _args(doc: Doc) -> list[str]:
    (container,) = doc["spec"]["template"]["spec"]["containers"]
    assert "command" not in container  # the image's ENTRYPOINT ["tephra"] runs them
    return list(container["args"])


@pytest.mark.parametrize("component", ["scheduler", "controller", "webhook"])
def test_deployment_args_parse(docs: list[Doc], component: str) -> None:
    args = _args(one(docs, "Deployment", name_of(component)))
    assert args[0] == component
    proc = subprocess.run(
        [str(TEPHRA), *args, "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, f"tephra {' '.join(args)}:\n{proc.stderr}"


def test_hook_job_args_parse(docs: list[Doc]) -> None:
    module: Any = load_script(CHART_DIR / "files" / "webhook-certs.py", "tephra_webhook_certs_args")
    jobs = find(docs, "Job")
    assert len(jobs) == 2
    for job in jobs:
        (container,) = job["spec"]["template"]["spec"]["containers"]
        parsed = module.build_parser().parse_args(container["args"])
        assert parsed.mode in {"ensure-secret", "patch-ca"}
        assert parsed.kubeconfig is None  # in-cluster


def test_webhook_serves_every_registered_path_with_the_hook_certificate(
    docs: list[Doc], tmp_path: Path
) -> None:
    """`tephra webhook`, started with the chart's args and the hook script's certificate,
    answers an AdmissionReview on every path the webhook configurations register, over TLS
    verified against the CA alone with the Service's DNS name (as the API server does)."""
    import json
    import re
    import select
    import ssl
    import time
    import urllib.request
    import uuid

    certs: Any = load_script(CHART_DIR / "files" / "webhook-certs.py", "tephra_webhook_certs_serve")
    namespace = "tephra-system"
    service = name_of("webhook")
    for name, content in certs.generate(
        dns_names=certs.service_dns_names(service, namespace), validity_days=1
    ).items():
        (tmp_path / name).write_bytes(content)

    args = _args(one(docs, "Deployment", service))
    mount = "/etc/tephra/webhook-tls"
    args = [a.replace(mount, str(tmp_path)) for a in args]
    assert f"--tls-cert-file={tmp_path}/tls.crt" in args
    proc = subprocess.Popen(
        [str(TEPHRA), *args, "--port=0", "--host=127.0.0.1", "--assume-queues"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        port = None
        deadline = time.monotonic() + 60
        seen = ""
        assert proc.stderr is not None
        while port is None and time.monotonic() < deadline and proc.poll() is None:
            ready, _, _ = select.select([proc.stderr], [], [], 1.0)
            if ready:
                seen += proc.stderr.readline()
                m = re.search(r"listening on https://[^:]+:(\d+)", seen)
                port = int(m.group(1)) if m else None
        assert port, f"webhook did not start:\n{seen}"

        ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
        ctx.check_hostname = False  # checked below against the Service name instead of 127.0.0.1

        def post(path: str, review: dict[str, Any]) -> dict[str, Any]:
            verify = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
            with (
                socket_to(port) as raw,
                verify.wrap_socket(raw, server_hostname=f"{service}.{namespace}.svc"),
            ):
                pass  # the certificate verifies for the Service name
            req = urllib.request.Request(
                f"https://127.0.0.1:{port}{path}",
                data=json.dumps(review).encode(),
                headers={"Content-Type": "application/json"},
                method="POST",
            )
            with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
                assert resp.status == 200
                out: dict[str, Any] = json.loads(resp.read())
                return out

        objects = {
            "jobs": (
                {"group": "batch.volcano.sh", "version": "v1alpha1", "kind": "Job"},
                {
                    "apiVersion": "batch.volcano.sh/v1alpha1",
                    "kind": "Job",
                    "metadata": {"name": "j", "namespace": "default"},
                    "spec": {
                        "minAvailable": 1,
                        "tasks": [
                            {
                                "name": "t",
                                "replicas": 1,
                                "template": {
                                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}
                                },
                            }
                        ],
                    },
                },
            ),
            "queues": (
                {"group": "scheduling.volcano.sh", "version": "v1beta1", "kind": "Queue"},
                {
                    "apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "Queue",
                    "metadata": {"name": "q"},
                    "spec": {"weight": 1},
                },
            ),
            "podgroups": (
                {"group": "scheduling.volcano.sh", "version": "v1beta1", "kind": "PodGroup"},
                {
                    "apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "PodGroup",
                    "metadata": {"name": "pg", "namespace": "default"},
                    "spec": {"minMember": 1, "queue": "default"},
                },
            ),
            "commands": (
                {"group": "bus.volcano.sh", "version": "v1alpha1", "kind": "Command"},
                {
                    "apiVersion": "bus.volcano.sh/v1alpha1",
                    "kind": "Command",
                    "metadata": {"name": "c", "namespace": "default"},
                    "action": "CloseQueue",
                    "target": {"kind": "Queue", "name": "default"},
                },
            ),
            "cronjobs": (
                {"group": "batch.volcano.sh", "version": "v1alpha1", "kind": "CronJob"},
                {
                    "apiVersion": "batch.volcano.sh/v1alpha1",
                    "kind": "CronJob",
                    "metadata": {"name": "cj", "namespace": "default"},
                    "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"tasks": []}}},
                },
            ),
            "pods": (
                {"group": "", "version": "v1", "kind": "Pod"},
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "p", "namespace": "default"},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                },
            ),
        }
        paths = set()
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            for hook in one(docs, kind, service)["webhooks"]:
                paths.add(hook["clientConfig"]["service"]["path"])
        assert len(paths) == 10
        for path in sorted(paths):
            gvk, obj = objects[path.split("/")[1]]
            uid = str(uuid.uuid4())
            review = {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {
                    "uid": uid,
                    "kind": gvk,
                    "resource": {
                        "group": gvk["group"],
                        "version": gvk["version"],
                        "resource": path.split("/")[1],
                    },
                    "operation": "CREATE",
                    "name": obj["metadata"]["name"],
                    "namespace": obj["metadata"].get("namespace", ""),
                    "object": obj,
                    "userInfo": {"username": "test"},
                },
            }
            answer = post(path, review)
            assert answer["kind"] == "AdmissionReview", (path, answer)
            assert answer["response"]["uid"] == uid, (path, answer)
            assert isinstance(answer["response"]["allowed"], bool), (path, answer)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def socket_to(port: int) -> Any:
    import socket

    return socket.create_connection(("127.0.0.1", port), timeout=10)
