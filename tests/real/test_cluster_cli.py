"""`tephra cluster up` writes an admin kubeconfig once the control plane serves and its emulated
Nodes are Ready and untainted, and stops every component on SIGINT."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from batch.sandbox.emulator_http import schedulable
from tests.real.conftest import kube_bin

pytestmark = [pytest.mark.real, pytest.mark.xdist_group("real")]


def test_cluster_up_serves_until_sigint(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "admin.kubeconfig"
    cmd = [sys.executable, "-m", "batch.cli.main", "cluster", "up", f"--kubeconfig={kubeconfig}"]
    cmd += [f"--bin-dir={kube_bin()}", f"--workdir={tmp_path / 'work'}"]
    cmd += ["--nodes=2", "--node-gpus=8", "--node-prefix=gpu"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not kubeconfig.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert kubeconfig.exists(), proc.stdout.read() if proc.poll() is not None else "timeout"
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


def test_nodes_without_the_controller_manager_is_a_usage_error(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from batch.cli.main import main

    args = ["cluster", "up", f"--kubeconfig={tmp_path / 'k'}", f"--bin-dir={tmp_path}"]
    res = CliRunner().invoke(main, [*args, "--no-controller-manager"])
    assert res.exit_code == 2, res.output
    assert "--nodes needs the controller manager" in res.output
    assert not (tmp_path / "k").exists()
