"""Smoke run of benchmarks/e2e_real.py at tiny size: both schedulers bind every pod."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.real.conftest import REPO, kube_bin

pytestmark = [pytest.mark.real, pytest.mark.xdist_group("real")]


def test_quick_benchmark_binds_every_pod_with_both_schedulers(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    cmd = [sys.executable, str(REPO / "benchmarks" / "e2e_real.py"), "--quick"]
    cmd += ["--bin-dir", str(kube_bin()), "--json", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    results = json.loads(out.read_text())
    runs = {(r["workload"], r["scheduler"]) for r in results}
    assert runs == {(w, s) for w in ("gangs", "pods") for s in ("tephra", "kube")}
    for r in results:
        assert r["bound"] == r["pods"] == 100, r
        assert 0 < r["p50_s"] <= r["p99_s"], r
    assert "Tephra/kube-scheduler pods/s" in done.stdout
