"""Fixtures of the sandbox tests: one sandbox per module (`sb`, `api`), and the contract suite's
`server`, run against two servers (issue 14.3).

`server` is a Server (URL, TLS context, kubeconfig) parametrized over the sandbox and the real
kube-apiserver of the `real` tier (marker `real`, xdist group "real": the tier's one control
plane, started at most once per worker); `kube_api` is a python client for it. Both servers
start with the same objects: Nodes node-0..node-2 (16 CPUs, 64Gi, 8 GPUs, racks rack-0/rack-1),
the default namespaces, Tephra's CRDs and the queues root and default.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from batch.sandbox.nodes import make_nodes
from batch.sandbox.options import SandboxOptions
from batch.sandbox.testing import SandboxHandle, run_sandbox

from .helpers import Server, real_param
from .servers import SANDBOX_NODES, start_like_sandbox, swept


@pytest.fixture(scope="module")
def sb() -> Iterator[SandboxHandle]:
    nodes = make_nodes(**SANDBOX_NODES)
    with run_sandbox(nodes=nodes, options=SandboxOptions(max_grace_seconds=0.5)) as handle:
        yield handle


@pytest.fixture(scope="module")
def api(sb: SandboxHandle) -> Iterator[Any]:
    client = sb.api_client()
    yield client
    client.close()


@pytest.fixture(scope="module", params=["sandbox", real_param()])
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    if request.param == "sandbox":
        handle: SandboxHandle = request.getfixturevalue("sb")
        yield Server("sandbox", handle.url, handle.kubeconfig_path)
        return
    from tests.real.conftest import Api, install_crds

    plane = request.getfixturevalue("real")
    kubelets = request.getfixturevalue("kubelets")
    install_crds(Api(plane))
    real = Server("real", plane.server, plane.kubeconfig, plane.ssl_context())
    with swept(real):
        start_like_sandbox(real, kubelets.nodes)
        yield real


@pytest.fixture(scope="module")
def kube_api(server: Server) -> Iterator[Any]:
    client = server.api_client()
    yield client
    client.close()
