"""The `real` tier: tests against a real kube-apiserver built from the Kubernetes Go modules.

One control plane per test session (per xdist worker; the tier's tests share one xdist group so
they land on one worker). The binaries come from `TEPHRA_KUBE_BIN` when set (`make test` sets it
from `scripts/build-kube.sh`), else from that script here, which builds them on first use.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from batch.api.yamlio import iter_documents
from batch.sandbox.control_plane import ControlPlane
from batch.sandbox.real_components import ComponentError, ComponentProcess
from tests.realplane import REPO, kube_bin, oracle_bin

# The session fixtures `real`, `kubelets`: tests/realplane.py
__all__ = ["REPO", "kube_bin", "oracle_bin"]

CRD_DIR = REPO / "crds"


def json_request(
    url: str,
    method: str,
    body: Any = None,
    context: ssl.SSLContext | None = None,
    headers: Mapping[str, str] | None = None,
) -> tuple[int, Any]:
    """One JSON request to an API server: (status code, decoded answer), errors included."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    for key, value in (headers or {}).items():
        req.add_header(key, value)
    try:
        with urllib.request.urlopen(req, context=context, timeout=30) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


class Api:
    """Raw JSON requests to the real apiserver as its admin (what every test here needs)."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.ctx = plane.ssl_context()

    def request(
        self, method: str, path: str, body: Any = None, *, as_user: str | None = None
    ) -> tuple[int, Any]:
        """`as_user`: impersonate that user (the admin may), who then holds only their grants."""
        headers = {"Impersonate-User": as_user} if as_user else None
        return json_request(self.plane.server + path, method, body, self.ctx, headers)

    def kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        # A new discovery cache each call: one filled before the CRDs existed would hide them.
        cache = tempfile.mkdtemp(dir=self.plane.workdir, prefix="kubectl-cache-")
        cmd = ["kubectl", f"--kubeconfig={self.plane.kubeconfig}", f"--cache-dir={cache}", *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if check and done.returncode != 0:
            pytest.fail(f"{' '.join(args)} failed: {done.stderr[-2000:]}")
        return done


@pytest.fixture(scope="session")
def api(real: ControlPlane) -> Api:
    return Api(real)


def crd_names(directory: Path = CRD_DIR) -> list[str]:
    names = []
    for path in sorted(directory.glob("*.yaml")):
        for doc in iter_documents(path.read_text()):
            names.append(doc["metadata"]["name"])
    return names


def conditions(api: Api, name: str) -> dict[str, dict[str, Any]]:
    code, crd = api.request(
        "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
    )
    assert code == 200, crd
    return {c["type"]: c for c in crd.get("status", {}).get("conditions", [])}


@pytest.fixture(scope="module")
def crds(api: Api) -> list[str]:
    return install_crds(api)


def install_crds(api: Api, directory: Path = CRD_DIR, *, force: bool = False) -> list[str]:
    """Apply crds/ (or the CRDs in `directory`) server-side and wait until every CRD is
    Established: their names. `force`: take the fields over from any other manager (a Helm
    install earlier in the same control plane owns them)."""
    api.kubectl(
        "apply", "--server-side", *(["--force-conflicts"] if force else []), "-f", str(directory)
    )
    names = crd_names(directory)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if all(conditions(api, n).get("Established", {}).get("status") == "True" for n in names):
            return names
        time.sleep(0.5)
    pytest.fail(f"CRDs not Established within 60 s: {[conditions(api, n) for n in names]}")


CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


@contextmanager
def volcano_crds(api: Api) -> Iterator[list[str]]:
    """Volcano v1.10's own CRDs in place of Tephra's: the common ones replaced, Tephra's others
    (CronJob, HyperNode) deleted; crds/ as shipped put back afterwards."""
    oracle = oracle_bin("volcano") / "crds"
    for name in sorted(set(crd_names()) - set(crd_names(oracle))):
        api.request("DELETE", f"{CRD_PATH}/{name}")
        deadline = time.monotonic() + 60
        while api.request("GET", f"{CRD_PATH}/{name}")[0] != 404:
            assert time.monotonic() < deadline, f"CRD {name} not deleted within 60 s"
            time.sleep(0.2)
    try:
        yield install_crds(api, oracle, force=True)
    finally:
        install_crds(api, force=True)


# ------------------------------------------------------------- Tephra components as processes
TEPHRA = Path(sys.executable).with_name("tephra")


class TephraProcess(ComponentProcess):
    """`tephra <args>` (or `program <args>`: an oracle's binary) as its own process, stdout and
    stderr in `log_path` (read while it runs); `wait_for` fails the test, showing the log."""

    def __init__(self, log_path: Path, *args: str, program: Path = TEPHRA) -> None:
        super().__init__(log_path, program, *args, cwd=REPO)
        if program == TEPHRA:
            self.label = f"tephra {args[0]}"

    def wait_for(self, pattern: str, timeout: float = 60.0) -> re.Match[str]:
        """The first match of `pattern` in the log; fails when the process exits or time is up."""
        try:
            return super().wait_for(pattern, timeout)
        except ComponentError as exc:
            pytest.fail(f"{exc}:\n{self.log()}")


@contextmanager
def tephra_process(log_path: Path, *args: str, program: Path = TEPHRA) -> Iterator[TephraProcess]:
    process = TephraProcess(log_path, *args, program=program)
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="session")
def helm_bin() -> Path:
    from tests.charts.helmtools import fetch_helm

    try:
        return fetch_helm()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)


def helm_env(plane: ControlPlane, tmp: Path) -> dict[str, str]:
    """An environment for helm against `plane` as its admin, helm's own files inside `tmp`."""
    env = dict(os.environ, KUBECONFIG=str(plane.kubeconfig))
    env.update(HELM_CONFIG_HOME=str(tmp / "config"), HELM_CACHE_HOME=str(tmp / "cache"))
    env["HELM_DATA_HOME"] = str(tmp / "data")
    return env


def helm(helm_bin: Path, env: dict[str, str], *args: str) -> str:
    """`helm ARGS`' output; fails the test with helm's output when it exits non-zero."""
    from tests.charts.helmtools import run_helm

    proc = run_helm(helm_bin, list(args), env=env, timeout=300)
    if proc.returncode != 0:
        pytest.fail(f"helm {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout
