"""The node emulator over HTTP: Tephra's kubelets for any API server, the sandbox's or a real
kube-apiserver (`tephra cluster up`, the `real` test tier, the real-cluster benchmarks).

`ApiEmulator` watches Nodes and bound Pods through `batch.kube`'s client and reflectors and runs
the same kubelet logic as the sandbox's in-process emulator (`batch.sandbox.emulator.Kubelets`):
it writes `nodes/status`, Leases in `kube-node-lease`, `pods/status` (strategic merge patches,
so conditions other components own are kept), kubelet Events and the final deletion of a pod
after its grace period. `create_nodes` registers emulated Nodes as kubelets do (a create with
`status.capacity`). `EmulatorThread` runs one on its own event loop for synchronous callers.

On a real apiserver the TaintNodesByCondition admission plugin taints every new Node
`node.kubernetes.io/not-ready:NoSchedule`; kube-controller-manager's node lifecycle controller
lifts it once the Node is Ready, so a schedulable Node needs that controller running.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, Self, TypeVar

import aiohttp

from batch.kube.client import RESOURCES, ApiError, KubeClient
from batch.kube.config import ClusterAccess, load_access
from batch.kube.informer import Reflector, ReflectorSet
from batch.sandbox.emulator import LEASE_NAMESPACE, Kubelets, lease_body
from batch.sandbox.loopthread import LoopThread
from batch.sandbox.nodes import make_nodes
from batch.sandbox.store import Obj

__all__ = ["NOT_READY_TAINT", "ApiEmulator", "EmulatorThread", "HttpTransport", "schedulable"]

T = TypeVar("T")
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
_NODE = RESOURCES["Node"]
_POD = RESOURCES["Pod"]
_LEASE = RESOURCES["Lease"]
_EVENT = RESOURCES["Event"]


RETRIES = 6


async def _quiet(call: Callable[[], Awaitable[T]]) -> T | None:
    """The answer of `call()`, or None when the object is gone (404) or another one now: a
    precondition failed (409) or a patch's uid is not the object's (422 on metadata.uid).
    Throttling (429), server errors and broken connections are retried with a backoff, as a
    kubelet's client does; the last failure is raised."""
    for attempt in range(RETRIES):
        try:
            return await call()
        except ApiError as err:
            if err.status in (404, 409) or (err.status == 422 and _on_uid(err)):
                return None
            if (err.status != 429 and err.status < 500) or attempt == RETRIES - 1:
                raise
        except (aiohttp.ClientError, OSError, TimeoutError):
            if attempt == RETRIES - 1:
                raise
        await asyncio.sleep(0.1 * 2**attempt * (1 + random.random()))
    raise AssertionError("unreachable")


def _on_uid(err: ApiError) -> bool:
    causes = (err.body.get("details") or {}).get("causes") or []
    return any(c.get("field") == "metadata.uid" for c in causes)


class HttpTransport:
    """Kubelet writes as HTTP requests of `KubeClient` (see `batch.sandbox.emulator.Transport`).

    `node_client` carries the Node heartbeats (Leases and `nodes/status`), `client` the rest:
    with a pool of their own, a flood of pod status writes cannot hold the renewals back until
    the Leases lapse (a real kubelet has its own connection). Default: `client` for both."""

    def __init__(self, client: KubeClient, node_client: KubeClient | None = None) -> None:
        self.client = client
        self.node_client = node_client or client
        self._leased: set[str] = set()  # Nodes whose Lease this transport created or found

    async def node_status(self, name: str, uid: str, patch: Obj) -> Obj | None:
        body = {"metadata": {"uid": uid}, "status": patch}
        return await _quiet(
            lambda: self.node_client.patch(_NODE, name, body, sub="status", patch_type="strategic")
        )

    async def pod_status(self, ns: str, name: str, uid: str, patch: Obj) -> Obj | None:
        body = {"metadata": {"uid": uid}, "status": patch}
        return await _quiet(
            lambda: self.client.patch(
                _POD, name, body, namespace=ns, sub="status", patch_type="strategic"
            )
        )

    async def renew_lease(self, name: str, node_uid: str, spec: Obj) -> None:
        """Create the Lease the first time (one request per Node at start), patch it after."""
        if name not in self._leased:
            body = lease_body(name, node_uid, spec)
            created = await _quiet(
                lambda: self.node_client.create(_LEASE, body, namespace=LEASE_NAMESPACE)
            )
            self._leased.add(name)
            if created is not None:
                return
        patched = await _quiet(
            lambda: self.node_client.patch(_LEASE, name, {"spec": spec}, namespace=LEASE_NAMESPACE)
        )
        if patched is None:
            self._leased.discard(name)  # gone meanwhile: created again at the next renewal

    async def delete_lease(self, name: str) -> None:
        self._leased.discard(name)
        await _quiet(lambda: self.node_client.delete(_LEASE, name, LEASE_NAMESPACE))

    async def create_event(self, body: Obj) -> None:
        ns = body["metadata"]["namespace"]
        await _quiet(lambda: self.client.create(_EVENT, body, namespace=ns))

    async def delete_pod(self, ns: str, name: str, uid: str) -> None:
        await _quiet(lambda: self.client.delete(_POD, name, ns, grace_seconds=0, uid=uid))


def schedulable(node: Obj) -> bool:
    """Ready and without the not-ready taint: what a scheduler needs of a Node."""
    status = node.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    taints = (node.get("spec") or {}).get("taints") or []
    return ready and not any(t.get("key") == NOT_READY_TAINT for t in taints)


class ApiEmulator:
    """Emulated kubelets for the API server of `access`. `await start()`, `await stop()`."""

    def __init__(
        self,
        access: ClusterAccess,
        *,
        max_grace_seconds: float = 2.0,
        heartbeat_seconds: float = 10.0,
        max_connections: int = 64,
        node_connections: int = 8,
        node_selector: str | None = None,
    ) -> None:
        """`node_selector` (a label selector): be the kubelet of the matching Nodes only, and
        of the pods bound to them, leaving other Nodes to other kubelets. `max_connections`
        carry the pods' writes and the watches, `node_connections` more the Nodes' heartbeats
        (Lease renewals and `nodes/status`), so pod writes cannot crowd them out."""
        self.client = KubeClient(access, max_connections=max_connections)
        self.node_client = KubeClient(access, max_connections=node_connections)
        self.kubelets = Kubelets(
            HttpTransport(self.client, self.node_client),
            max_grace_seconds=max_grace_seconds,
            heartbeat_seconds=heartbeat_seconds,
            every_node=node_selector is None,
        )
        self.node_selector = node_selector
        self._reflectors: ReflectorSet | None = None

    @classmethod
    def from_kubeconfig(cls, path: str | Path, **kwargs: Any) -> ApiEmulator:
        return cls(load_access(path), **kwargs)

    def _sink(self, kind: str, etype: str, obj: Obj) -> None:
        if kind == "Node":
            self.kubelets.on_node(etype, obj)
        elif kind == "Pod":
            self.kubelets.on_pod(etype, obj)

    async def start(self, timeout: float = 60.0) -> None:
        """Open the client, list+watch Nodes and bound Pods, and wait until both are synced."""
        await self.client.open()
        await self.node_client.open()
        self.kubelets.start(asyncio.get_running_loop())
        self._reflectors = ReflectorSet(
            [
                Reflector(self.client, _NODE, self._sink, self._node_params()),
                Reflector(self.client, _POD, self._sink, {"fieldSelector": "spec.nodeName!="}),
            ]
        )
        self._reflectors.start()
        if not await self._reflectors.wait_synced(timeout):
            raise TimeoutError(f"node emulator: no list of nodes and pods in {timeout:.0f} s")

    def _node_params(self) -> dict[str, str]:
        return {"labelSelector": self.node_selector} if self.node_selector else {}

    async def stop(self) -> None:
        if self._reflectors is not None:
            await self._reflectors.stop()
            self._reflectors = None
        await self.kubelets.shutdown()
        await self.client.close()
        await self.node_client.close()

    async def create_nodes(
        self, count: int, *, prefix: str = "node", concurrency: int = 32, **shape: Any
    ) -> list[str]:
        """Register `count` Nodes shaped as `make_nodes(**shape)` (gpus, cpu, memory, pods,
        racks, labels, taints); one that exists already is kept. Returns their names."""
        nodes = make_nodes(count=count, prefix=prefix, **shape)
        return await self.register_nodes(nodes, concurrency=concurrency)

    async def register_nodes(self, nodes: Iterable[Obj], *, concurrency: int = 32) -> list[str]:
        """Register these Node objects (with their `status.capacity`, as a kubelet does); one
        that exists already is kept. Returns their names."""
        nodes = list(nodes)
        gate = asyncio.Semaphore(concurrency)

        async def create(node: Obj) -> None:
            async with gate:
                await _quiet(lambda: self.client.create(_NODE, node))

        await asyncio.gather(*(create(n) for n in nodes))
        return [n["metadata"]["name"] for n in nodes]

    async def wait_schedulable(self, names: Iterable[str], timeout: float = 60.0) -> None:
        """Wait until every named Node is Ready and untainted, as the emulator's watch sees
        them (TimeoutError names the rest)."""
        left = set(names)
        deadline = time.monotonic() + timeout
        while True:
            left = {n for n in left if not schedulable(self.kubelets.nodes.get(n) or {})}
            if not left:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"nodes not Ready and untainted in {timeout:.0f} s: {left}")
            await asyncio.sleep(0.1)


class EmulatorThread(LoopThread):
    """An `ApiEmulator` on its own event loop in a daemon thread, for synchronous callers."""

    what = "the node emulator"
    stop_timeout = 15.0

    def __init__(self, access: ClusterAccess, **kwargs: Any) -> None:
        super().__init__("tephra-emulator")
        self._access = access
        self._kwargs = kwargs
        self._sync_timeout = 60.0
        self.emulator: ApiEmulator | None = None

    def start(self, timeout: float = 60.0) -> Self:
        """Start the emulator; it waits up to timeout for its first list of nodes and pods."""
        self._sync_timeout = timeout
        return super().start(timeout + 5)

    async def setup(self) -> None:
        self.emulator = ApiEmulator(self._access, **self._kwargs)
        await self.emulator.start(self._sync_timeout)

    async def teardown(self) -> None:
        if self.emulator is not None:
            await self.emulator.stop()
            self.emulator = None

    def _failure(self, problem: str, cause: BaseException | None) -> BaseException:
        # the emulator's own error (TimeoutError, ApiError, ...), as callers catch it
        return cause if cause is not None else TimeoutError(f"{self.what} {problem}")

    def create_nodes(self, count: int, *, timeout: float = 120.0, **shape: Any) -> list[str]:
        """`ApiEmulator.create_nodes`, then wait until they are schedulable."""
        emulator = self._emulator()

        async def create() -> list[str]:
            names = await emulator.create_nodes(count, **shape)
            await emulator.wait_schedulable(names, timeout)
            return names

        return self.run(create, timeout + 5)

    def register_nodes(self, nodes: Iterable[Obj], *, timeout: float = 120.0) -> list[str]:
        """`ApiEmulator.register_nodes`, then wait until they are schedulable."""
        emulator = self._emulator()
        nodes = list(nodes)

        async def register() -> list[str]:
            names = await emulator.register_nodes(nodes)
            await emulator.wait_schedulable(names, timeout)
            return names

        return self.run(register, timeout + 5)

    def wait_schedulable(self, names: Iterable[str], timeout: float = 60.0) -> None:
        """`ApiEmulator.wait_schedulable` from this thread."""
        emulator = self._emulator()
        self.run(lambda: emulator.wait_schedulable(names, timeout), timeout + 5)

    def _emulator(self) -> ApiEmulator:
        if self.emulator is None:
            raise RuntimeError("EmulatorThread.start() first")
        return self.emulator
