"""The real control plane shared by every test that runs against kube-apiserver: the `real` tier
(tests/real) and the `real` parameters of the sandbox contract suite (tests/sandbox).

Session fixtures, imported by tests/conftest.py, so one control plane and one node emulator serve
a worker's whole session (the tests that use them share the xdist group "real").
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from batch.sandbox.control_plane import ControlPlane, control_plane

REPO = Path(__file__).resolve().parents[1]


def kube_bin() -> Path:
    """The built control plane's binaries: `TEPHRA_KUBE_BIN`, else scripts/build-kube.sh's."""
    env = os.environ.get("TEPHRA_KUBE_BIN")
    if env:
        return Path(env)
    built = subprocess.run(
        [str(REPO / "scripts" / "build-kube.sh")], capture_output=True, text=True, check=False
    )
    if built.returncode != 0:
        pytest.fail(f"scripts/build-kube.sh failed: {built.stderr[-2000:]}")
    return Path(built.stdout.strip())


def oracle_bin(name: str) -> Path:
    """An oracle's directory (its binaries and crds/): `TEPHRA_<NAME>_BIN` (`make test` sets it
    from `scripts/build-oracle.sh NAME`), else that script's, which builds it on first use. The
    tests that need it skip, saying so, only where no Go toolchain could build it."""
    env = os.environ.get(f"TEPHRA_{name.upper().replace('-', '_')}_BIN")
    if env:
        return Path(env)
    if shutil.which("go") is None:
        pytest.skip(f"no Go toolchain to build the {name} oracle (scripts/build-oracle.sh {name})")
    built = subprocess.run(
        [str(REPO / "scripts" / "build-oracle.sh"), name],
        capture_output=True,
        text=True,
        check=False,
    )
    if built.returncode != 0:
        pytest.fail(f"scripts/build-oracle.sh {name} failed: {built.stderr[-2000:]}")
    return Path(built.stdout.strip())


@pytest.fixture(scope="session")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with control_plane(kube_bin(), tmp_path_factory.mktemp("real-cluster")) as plane:
        yield plane


@pytest.fixture(scope="session")
def kubelets(real: ControlPlane) -> Iterator[Any]:
    """The real apiserver with Tephra's HTTP node emulator and four Ready, untainted Nodes."""
    from tests.real.kubelets import emulated

    with emulated("real", real.server, real.ssl_context()) as cluster:
        yield cluster
