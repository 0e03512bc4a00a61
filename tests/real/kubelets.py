"""Emulated kubelets on an API server, for the real tier: the real kube-apiserver, or for
differential tests the sandbox over HTTP (started without its in-process emulator), both driven
by the same `batch.sandbox.emulator_http.EmulatorThread`."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from batch.kube.config import ClusterAccess
from batch.sandbox.emulator_http import EmulatorThread
from batch.sandbox.options import SandboxOptions
from batch.sandbox.testing import run_sandbox
from tests.real.conftest import json_request

NODE_COUNT = 4
# The emulator is the kubelet of these Nodes only (other modules of the session may run their
# own Nodes), and the pods of sized tests select them.
NODE_LABEL = {"tier.tephra.io/kubelets": "emulated"}
NODE_SHAPE: dict[str, Any] = {"gpus": 8, "cpu": "16", "memory": "64Gi", "labels": NODE_LABEL}
MAX_GRACE_SECONDS = 1.0
HEARTBEAT_SECONDS = 1.0


@dataclass
class Cluster:
    """An API server with emulated Nodes: where it is and how to talk to it as admin."""

    name: str
    server: str
    context: ssl.SSLContext | None
    emulator: EmulatorThread
    nodes: list[str]

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return json_request(self.server + path, method, body, self.context)

    def pod(self, ns: str, name: str) -> dict[str, Any] | None:
        code, pod = self.request("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
        return pod if code == 200 else None

    def bind(self, ns: str, name: str, node: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        code, answer = self.request("POST", f"/api/v1/namespaces/{ns}/pods/{name}/binding", body)
        assert code == 201, answer


@contextmanager
def emulated(name: str, server: str, context: ssl.SSLContext | None) -> Iterator[Cluster]:
    """Attach the HTTP node emulator to `server` and register NODE_COUNT Nodes."""
    emulator = EmulatorThread(
        ClusterAccess(server, context),
        max_grace_seconds=MAX_GRACE_SECONDS,
        heartbeat_seconds=HEARTBEAT_SECONDS,
        node_selector=",".join(f"{k}={v}" for k, v in NODE_LABEL.items()),
    ).start()
    try:
        nodes = emulator.create_nodes(NODE_COUNT, **NODE_SHAPE)
        yield Cluster(name, server, context, emulator, nodes)
    finally:
        emulator.stop()


@contextmanager
def sandbox_cluster() -> Iterator[Cluster]:
    """The sandbox API server with the HTTP emulator in place of its own."""
    with (
        run_sandbox(options=SandboxOptions(emulator=False, default_queues=False)) as sb,
        emulated("sandbox", sb.url, None) as cluster,
    ):
        yield cluster
