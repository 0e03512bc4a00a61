"""RSS of `tephra sandbox up` while a too-big job is refused, and while a big one is created.

Issue 19: a VCJob with `replicas: 100000000` was admitted and the controller grew past 9.6 GB in
90 s. This starts a sandbox (API server, emulator, controllers, scheduler) as its own process,
submits such a job (it must be refused with 422), samples the process's RSS for a while, then
creates a job of `--pods` pods and samples RSS until every pod exists. It prints the figures.

    .venv/bin/python benchmarks/oversized_job.py --pods 2000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

TEPHRA = str(Path(sys.executable).with_name("tephra"))
B = ("batch.volcano.sh", "v1alpha1", "default", "jobs")


def rss_mib(pid: int, key: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def job(name: str, replicas: int) -> dict[str, Any]:
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1m"}}}
    task = {
        "name": "w",
        "replicas": replicas,
        "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"minAvailable": 1, "tasks": [task]},
    }


def sample(pid: int, seconds: float, until: Any = None) -> tuple[float, float]:
    """(max RSS, seconds taken) over `seconds`, or until `until()` is true."""
    peak, began = 0.0, time.monotonic()
    while time.monotonic() - began < seconds:
        peak = max(peak, rss_mib(pid))
        if until is not None and until():
            break
        time.sleep(0.1)
    return peak, time.monotonic() - began


def start(tmp: Path, pods: int) -> tuple[subprocess.Popen[bytes], Path]:
    nodes = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"node-{i}"},
            "status": {"capacity": {"cpu": "64", "memory": "256Gi", "pods": "250"}},
        }
        for i in range(max(1, pods // 200 + 1))
    ]
    (tmp / "nodes.yaml").write_text(yaml.safe_dump_all(nodes))
    kubeconfig = tmp / "kubeconfig"
    args = ["sandbox", "up", "--kubeconfig", str(kubeconfig), "--nodes", str(tmp / "nodes.yaml")]
    proc = subprocess.Popen([TEPHRA, *args, "--no-ledger"], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not kubeconfig.exists():
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit("the sandbox did not start")
        time.sleep(0.2)
    return proc, kubeconfig


def refusal(co: Any, pid: int, watch: float) -> None:
    before = rss_mib(pid)
    try:
        co.create_namespaced_custom_object(*B, job("huge", 100_000_000))
        raise SystemExit("a job of 100,000,000 replicas was admitted")
    except client.ApiException as exc:
        print(f"refused: {exc.status} {json.loads(exc.body or '{}')['message']}")
    peak, _ = sample(pid, watch)
    print(f"RSS before {before:.1f} MiB, max over {watch:g} s after the refusal {peak:.1f} MiB")


def creation(co: Any, core: Any, pid: int, pods: int) -> None:
    co.create_namespaced_custom_object(*B, job("big", pods))

    def created() -> bool:
        found = core.list_namespaced_pod("default", label_selector="volcano.sh/job-name=big")
        return len(found.items) >= pods

    peak, took = sample(pid, 600, until=created)
    hwm = rss_mib(pid, "VmHWM")
    print(f"{pods} pods created in {took:.1f} s; RSS max {peak:.1f} MiB, high-water {hwm:.1f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=2000, help="pods of the big (admitted) job")
    parser.add_argument("--watch", type=float, default=10.0, help="seconds sampled after refusal")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proc, kubeconfig = start(Path(tmp), opts.pods)
        try:
            api = config.new_client_from_config(str(kubeconfig))  # type: ignore[no-untyped-call]
            co, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
            time.sleep(2)
            refusal(co, proc.pid, opts.watch)
            creation(co, core, proc.pid, opts.pods)
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
