"""`tephra cluster up` writes an admin kubeconfig once the control plane serves and its emulated
Nodes are Ready and untainted, and stops every component on SIGINT; with `sandbox up`'s flags
(`--nodes FILE --port 0 ...`) and Tephra's or Volcano's components beside it, a VCJob submitted
through that kubeconfig runs, and SIGTERM stops everything cleanly."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from batch.sandbox.emulator_http import schedulable
from batch.sandbox.nodes import make_nodes
from tests.real.conftest import kube_bin, oracle_bin

pytestmark = [pytest.mark.real, pytest.mark.xdist_group("real")]


def _wait_ready(proc: subprocess.Popen[str], kubeconfig: Path) -> None:
    """Until `cluster up` wrote its kubeconfig (it does once ready), or it exited, or 120 s."""
    deadline = time.monotonic() + 120
    while not kubeconfig.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert kubeconfig.exists(), (
        proc.stdout.read() if proc.poll() is not None and proc.stdout else "timeout"
    )


def test_cluster_up_serves_until_sigint(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "admin.kubeconfig"
    cmd = [sys.executable, "-m", "batch.cli.main", "cluster", "up", f"--kubeconfig={kubeconfig}"]
    cmd += [f"--bin-dir={kube_bin()}", f"--workdir={tmp_path / 'work'}"]
    cmd += ["--nodes=2", "--node-gpus=8", "--node-prefix=gpu", "--components=none"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_ready(proc, kubeconfig)
        got = subprocess.run(
            [
                "kubectl",
                f"--kubeconfig={kubeconfig}",
                "get",
                "serviceaccount",
                "default",
                "-o",
                "name",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert got.stdout.strip() == "serviceaccount/default", got.stderr
        nodes = subprocess.run(
            ["kubectl", f"--kubeconfig={kubeconfig}", "get", "nodes", "-o", "json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        items = json.loads(nodes.stdout)["items"]
        assert sorted(n["metadata"]["name"] for n in items) == ["gpu-0", "gpu-1"]
        assert all(schedulable(n) for n in items), items
        assert {n["status"]["allocatable"]["nvidia.com/gpu"] for n in items} == {"8"}
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    for log in ("etcd", "kube-apiserver", "kube-controller-manager"):
        assert (tmp_path / "work" / f"{log}.log").exists()
    left = subprocess.run(["pgrep", "-f", str(tmp_path / "work")], capture_output=True, check=False)
    assert left.returncode == 1, f"components outlived SIGINT: {left.stdout!r}"


def test_cluster_up_without_a_workdir_leaves_nothing_behind(tmp_path: Path) -> None:
    """Its own temporary directory (etcd's data, PKI, logs: hundreds of MB) goes on a clean
    stop; a `--workdir` given is the user's and stays (above)."""
    kubeconfig = tmp_path / "admin.kubeconfig"
    temp = tmp_path / "temp"
    temp.mkdir()
    cmd = [sys.executable, "-m", "batch.cli.main", "cluster", "up", f"--kubeconfig={kubeconfig}"]
    cmd += [f"--bin-dir={kube_bin()}", "--nodes=1", "--components=none"]
    env = {**os.environ, "TMPDIR": str(temp)}
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    try:
        _wait_ready(proc, kubeconfig)
        assert [p.name.startswith("tephra-cluster-") for p in temp.iterdir()] == [True]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    assert list(temp.iterdir()) == []


def test_nodes_without_the_controller_manager_is_a_usage_error(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from batch.cli.main import main

    args = ["cluster", "up", f"--kubeconfig={tmp_path / 'k'}", f"--bin-dir={tmp_path}"]
    res = CliRunner().invoke(main, [*args, "--no-controller-manager"])
    assert res.exit_code == 2, res.output
    assert "--nodes needs the controller manager" in res.output
    assert not (tmp_path / "k").exists()


def _kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> Any:
    done = subprocess.run(
        ["kubectl", f"--kubeconfig={kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if "json" in args else done.stdout


CPU = {"requests": {"cpu": "1"}}
TWO_POD_JOB = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "two", "namespace": "default"},
    "spec": {
        "minAvailable": 2,
        "schedulerName": "volcano",
        "queue": "default",
        "tasks": [
            {
                "name": "w",
                "replicas": 2,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "c",
                                "image": "busybox",
                                "resources": {"requests": {"cpu": "1"}},
                            }
                        ],
                    }
                },
            }
        ],
    },
}


@pytest.mark.parametrize("components", ["tephra", "volcano"])
def test_cluster_up_takes_the_sandbox_flags_and_runs_a_vcjob(
    tmp_path: Path, components: str
) -> None:
    """A harness written for `sandbox up` runs on the real plane: the same flags, the
    kubeconfig once ready, a job run by the components beside it, a clean SIGTERM."""
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(yaml.safe_dump_all(make_nodes(count=2, cpu="8", memory="32Gi")))
    kubeconfig = tmp_path / "kubeconfig"
    work = tmp_path / "work"
    cmd = [sys.executable, "-m", "batch.cli.main", "cluster", "up", f"--kubeconfig={kubeconfig}"]
    cmd += ["--nodes", str(nodes), "--port", "0", "--schedule-period", "0.5", "--no-ledger"]
    cmd += [f"--bin-dir={kube_bin()}", f"--workdir={work}", f"--components={components}"]
    if components == "volcano":
        cmd += [f"--volcano-bin-dir={oracle_bin('volcano')}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_ready(proc, kubeconfig)
        server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        port = int(server.rsplit(":", 1)[1])
        names = [
            n["metadata"]["name"]
            for n in _kubectl(kubeconfig, "get", "nodes", "-o", "json")["items"]
        ]
        assert sorted(names) == ["node-0", "node-1"]
        _kubectl(kubeconfig, "create", "-f", "-", stdin=json.dumps(TWO_POD_JOB))

        def running() -> bool:
            job = _kubectl(kubeconfig, "get", "vcjob", "two", "-o", "json")
            selector = "volcano.sh/job-name=two"
            pods = _kubectl(kubeconfig, "get", "pods", "-l", selector, "-o", "json")["items"]
            phase = (job.get("status") or {}).get("state", {}).get("phase")
            return (
                phase == "Running" and [p["status"].get("phase") for p in pods] == ["Running"] * 2
            )

        deadline = time.monotonic() + 60
        while not running():
            if time.monotonic() > deadline:
                seen = _kubectl(kubeconfig, "get", "vcjob,pods", "-o", "yaml")
                pytest.fail(f"the job is not Running within 60 s:\n{seen}")
            time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert "control plane stopping" in out, out
    assert not kubeconfig.exists(), "the kubeconfig outlived the cluster"
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), 5):
        pass
    left = subprocess.run(["pgrep", "-f", str(work)], capture_output=True, check=False)
    assert left.returncode == 1, f"components outlived SIGTERM: {left.stdout!r}"


OPTED_IN = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "metadata": {"name": "ml", "labels": {"tephra.io/gang-injection": "enabled"}},
}


def _pytorch_pod(namespace: str) -> dict[str, Any]:
    """A pod as training-operator makes it without `--gang-scheduler-name`: no group, the
    default scheduler."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "train-worker-0",
            "namespace": namespace,
            "labels": {
                "training.kubeflow.org/job-name": "train",
                "training.kubeflow.org/operator-name": "pytorchjob-controller",
                "training.kubeflow.org/replica-type": "worker",
                "training.kubeflow.org/replica-index": "0",
            },
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox", "resources": CPU}],
        },
    }


def _line(proc: subprocess.Popen[str], prefix: str) -> str:
    """The rest of the first line of `cluster up`'s output that starts with `prefix`."""
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if line.startswith(prefix):
            return line.removeprefix(prefix).strip()
    raise AssertionError(f"no {prefix!r} line in {seen}; exit {proc.wait()}")


def test_cluster_up_gangs_opted_in_pods_and_serves_the_dashboard(tmp_path: Path) -> None:
    """As `sandbox up` does: Tephra's pod webhook, registered with the real apiserver, gives a
    framework pod in a namespace that opted into gang injection its gang (group annotation,
    schedulerName) and leaves one elsewhere as written; the dashboard's URL is printed and
    answers with the cluster's Nodes."""
    import urllib.request

    kubeconfig = tmp_path / "kubeconfig"
    work = tmp_path / "work"
    cmd = [sys.executable, "-m", "batch.cli.main", "cluster", "up", f"--kubeconfig={kubeconfig}"]
    cmd += ["--nodes", "2", "--port", "0", "--no-ledger", "--components=tephra"]
    cmd += [f"--bin-dir={kube_bin()}", f"--workdir={work}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = _line(proc, "dashboard: ")
        _wait_ready(proc, kubeconfig)
        assert url.startswith("http://127.0.0.1:") and url.endswith("/")
        _kubectl(kubeconfig, "create", "-f", "-", stdin=json.dumps(OPTED_IN))
        ganged = _kubectl(
            kubeconfig, "create", "-o", "json", "-f", "-", stdin=json.dumps(_pytorch_pod("ml"))
        )
        annotations = ganged["metadata"].get("annotations") or {}
        assert ganged["spec"]["schedulerName"] == "volcano", ganged["spec"]
        assert annotations.get("scheduling.k8s.io/group-name") == "train", annotations
        assert annotations.get("volcano.sh/task-spec") == "worker", annotations
        plain = _kubectl(
            kubeconfig, "create", "-o", "json", "-f", "-", stdin=json.dumps(_pytorch_pod("default"))
        )
        assert plain["spec"]["schedulerName"] == "default-scheduler"
        assert "scheduling.k8s.io/group-name" not in (plain["metadata"].get("annotations") or {})
        # the page waits (up to 30 s) for the dashboard's first lists of the cluster
        with urllib.request.urlopen(url + "api/overview", timeout=60) as resp:
            assert json.loads(resp.read())["nodes"] == 2
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    with pytest.raises(OSError), urllib.request.urlopen(url, timeout=5):
        pass  # the dashboard stopped with the cluster
