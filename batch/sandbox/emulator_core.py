"""The node emulator in process: `Kubelets` writing to the sandbox's store with no HTTP hop.

`NodeEmulator` is what the sandbox runs: it feeds `batch.sandbox.emulator.Kubelets` the store's
Node and Pod changes, and `CoreTransport` writes their status patches, Leases, Events and final
deletions straight through `Core` (`batch.sandbox.emulator_http` is the same logic over HTTP).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from batch.sandbox.core import Core
from batch.sandbox.emulator import LEASE_NAMESPACE, Kubelets, apply_status_patch, lease_body
from batch.sandbox.errors import ApiError
from batch.sandbox.store import Obj

__all__ = ["CoreTransport", "NodeEmulator"]

P = ParamSpec("P")
R = TypeVar("R")


def _quiet(fn: Callable[P, Awaitable[R]]) -> Callable[P, Coroutine[Any, Any, R | None]]:
    """The store's 404/409 answers turned into None, as `Transport` says."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R | None:
        try:
            return await fn(*args, **kwargs)
        except ApiError as err:
            if err.code in (404, 409):
                return None
            raise

    return wrapper


class CoreTransport:
    """The transport of the sandbox's own emulator: the store in process, no HTTP hop."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.pods_rt = core.rt("", "v1", "pods")
        self.nodes_rt = core.rt("", "v1", "nodes")
        self.leases_rt = core.rt("coordination.k8s.io", "v1", "leases")
        self.events_rt = core.rt("", "v1", "events")

    def _same(self, obj: Obj | None, uid: str) -> Obj | None:
        return obj if obj is not None and obj["metadata"]["uid"] == uid else None

    @_quiet
    async def node_status(self, name: str, uid: str, patch: Obj) -> Obj | None:
        node = self._same(self.core.find(self.nodes_rt, "", name), uid)
        if node is None:
            return None
        status = apply_status_patch(node.get("status") or {}, patch)
        new = {**node, "status": status}
        return self.core.write(self.nodes_rt, node, new, subresource="status", manager="kubelet")

    @_quiet
    async def pod_status(self, ns: str, name: str, uid: str, patch: Obj) -> Obj | None:
        pod = self._same(self.core.find(self.pods_rt, ns, name), uid)
        if pod is None:
            return None
        status = apply_status_patch(pod.get("status") or {}, patch)
        return self.core.write(
            self.pods_rt, pod, {**pod, "status": status}, subresource="status", manager="kubelet"
        )

    @_quiet
    async def renew_lease(self, name: str, node_uid: str, spec: Obj) -> None:
        lease = self.core.find(self.leases_rt, LEASE_NAMESPACE, name)
        if lease is not None:
            new = {**lease, "spec": {**lease["spec"], **spec}}
            self.core.write(self.leases_rt, lease, new, manager="kubelet")
            return
        self.core.create(self.leases_rt, LEASE_NAMESPACE, lease_body(name, node_uid, spec))

    @_quiet
    async def delete_lease(self, name: str) -> None:
        if self.core.find(self.leases_rt, LEASE_NAMESPACE, name) is not None:
            self.core.delete(self.leases_rt, LEASE_NAMESPACE, name)

    @_quiet
    async def create_event(self, body: Obj) -> None:
        self.core.create(self.events_rt, body["metadata"]["namespace"], body)

    @_quiet
    async def delete_pod(self, ns: str, name: str, uid: str) -> None:
        if self._same(self.core.find(self.pods_rt, ns, name), uid) is not None:
            self.core.delete(self.pods_rt, ns, name, grace=0)


class NodeEmulator:
    """The sandbox's kubelets: `Kubelets` fed by the store's change listener."""

    def __init__(
        self, core: Core, *, max_grace_seconds: float = 2.0, heartbeat_seconds: float = 10.0
    ) -> None:
        self.core = core
        self.kubelets = Kubelets(
            CoreTransport(core),
            max_grace_seconds=max_grace_seconds,
            heartbeat_seconds=heartbeat_seconds,
            stamp=core.clock.stamp,
        )

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.kubelets.start(loop)
        self.core.store.listeners.append(self.on_change)
        for node in list(self.core.store.buckets["nodes"].iter(None)):
            self.kubelets.on_node("ADDED", node)
        for pod in list(self.core.store.buckets["pods"].iter(None)):
            self.kubelets.on_pod("ADDED", pod)

    def stop(self) -> None:
        if self.on_change in self.core.store.listeners:
            self.core.store.listeners.remove(self.on_change)
        self.kubelets.stop()

    async def idle(self) -> None:
        await self.kubelets.idle()

    def on_change(self, etype: str, key: str, obj: Obj, old: Obj | None) -> None:
        if key == "pods":
            self.kubelets.on_pod(etype, obj)
        elif key == "nodes":
            self.kubelets.on_node(etype, obj)
