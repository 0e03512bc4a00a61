"""Smoke run of benchmarks/e2e_real.py at tiny size: every scheduler (Tephra in protobuf and in
JSON), and the plain binder that measures the ceiling, binds every pod (Volcano's vc-scheduler
too where it is built: it adds about 7 s, its CRD switch and two short runs); and of
benchmarks/wire_format.py, whose rounds bind every pod in both formats."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.real.conftest import REPO, kube_bin, oracle_bin

pytestmark = [pytest.mark.real, pytest.mark.xdist_group("real")]


def _volcano() -> Path | None:
    """The built Volcano, or None where it cannot be built (the others still run)."""
    try:
        return oracle_bin("volcano")
    except pytest.skip.Exception:
        return None


def test_quick_benchmark_binds_every_pod_with_every_scheduler(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    cmd = [sys.executable, str(REPO / "benchmarks" / "e2e_real.py"), "--quick"]
    cmd += ["--bin-dir", str(kube_bin()), "--json", str(out)]
    schedulers = ["tephra", "tephra-json", "kube", "plain"]
    volcano = _volcano()
    if volcano is not None:
        schedulers.append("volcano")
        cmd += ["--volcano-bin-dir", str(volcano)]
    cmd += ["--schedulers", *schedulers]
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # its logs go with pytest's own temp dirs
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=180, check=False, cwd=REPO, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    results = json.loads(out.read_text())
    runs = {(r["workload"], r["scheduler"]) for r in results}
    assert runs == {(w, s) for w in ("gangs", "pods") for s in schedulers}
    for r in results:
        assert r["bound"] == r["pods"] == 100, r
        assert 0 < r["p50_s"] <= r["p99_s"], r
        # every bind counted (re-sends too), also those made before a scrape after readiness
        assert r["requests"].get("POST pods/binding", 0) >= 100, r["requests"]
    assert "Tephra/kube-scheduler pods/s" in done.stdout
    assert "Tephra/plain-binder (the ceiling) pods/s" in done.stdout
    assert "Tephra/Tephra (JSON) pods/s" in done.stdout
    if volcano is not None:
        assert "Tephra/Volcano pods/s" in done.stdout


def test_wire_format_rounds_bind_every_pod_in_both_formats(tmp_path: Path) -> None:
    cmd = [sys.executable, str(REPO / "benchmarks" / "wire_format.py"), "--pods", "40"]
    cmd += ["--rounds", "1", "--concurrency", "8"]
    env = {**os.environ, "TMPDIR": str(tmp_path), "TEPHRA_KUBE_BIN": str(kube_bin())}
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=120, check=False, cwd=REPO, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    rounds = [line.split() for line in done.stdout.splitlines() if line[:6].strip().isdigit()]
    assert sorted(r[1] for r in rounds) == ["json", "protobuf"], done.stdout
    assert "protobuf/JSON: pods/s" in done.stdout
