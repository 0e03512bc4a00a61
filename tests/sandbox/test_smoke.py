"""The sandbox starts, serves discovery, and runs a bound pod to completion."""

from __future__ import annotations

import time
from typing import Any

from kubernetes import client

from batch.sandbox.testing import SandboxHandle, run_sandbox


def test_startup_writes_a_kubeconfig_and_serves() -> None:
    # how fast: benchmarks/sandbox_startup.py (a time bound here fails on a loaded machine)
    with run_sandbox() as sb:
        assert sb.kubeconfig_path.exists()
        assert sb.url.startswith("http://127.0.0.1:")
        assert client.VersionApi(sb.api_client()).get_code().git_version


def test_pod_runs_to_completion(sb: SandboxHandle, api: Any) -> None:
    v1 = client.CoreV1Api(api)
    pod = v1.create_namespaced_pod(
        "default",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": "smoke-",
                "annotations": {"sandbox.tephra.io/run-seconds": "0.1"},
            },
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
        },
    )
    name = pod.metadata.name
    assert name.startswith("smoke-") and len(name) == len("smoke-") + 5
    assert pod.status.phase == "Pending"
    v1.create_namespaced_pod_binding(
        name,
        "default",
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "node-0"},
        },
        _preload_content=False,
    )
    deadline = time.monotonic() + 5
    phase = ""
    while time.monotonic() < deadline:
        phase = v1.read_namespaced_pod(name, "default").status.phase
        if phase == "Succeeded":
            break
        time.sleep(0.05)
    assert phase == "Succeeded"


def test_handle_apply_creates_in_process(sb: SandboxHandle, api: Any) -> None:
    sb.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "applied"}},
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cfg", "namespace": "applied"},
            "data": {"k": "v"},
        },
    )
    cm = client.CoreV1Api(api).read_namespaced_config_map("cfg", "applied")
    assert cm.data == {"k": "v"} and cm.metadata.uid
