"""The node emulator: Tephra's kubelets, for the sandbox and for a real kube-apiserver.

Every Node object becomes Ready (conditions, addresses, nodeInfo, allocatable) and renews a
heartbeat Lease in `kube-node-lease`. Every pod bound to a node is admitted against the node's
allocatable like a kubelet would (OutOfcpu / OutOfmemory / OutOf<resource> on over-commit), then
runs: Running with containerStatuses, Ready condition, podIP and startTime; it terminates after
`sandbox.tephra.io/run-seconds` with `sandbox.tephra.io/exit-code`, honouring restartPolicy
(restart counts under OnFailure/Always, restarted at once rather than with CrashLoopBackOff
delays). A deleted pod terminates after its grace period capped by `max_grace_seconds`; its
Killing event names the grace applied.

A pod status write or final deletion that fails (the API server unreachable longer than the
transport's retries) is not lost: as a kubelet's status manager keeps each pod's status until
the server has it, the kubelet keeps the pod's unwritten patches (in order, later writes queue
behind them) and its deletion, and tries them again every RESYNC_SECONDS (doubling up to the
heartbeat) until they are taken or the pod is gone.

One kubelet logic (`Kubelets`) sees Node and Pod events and writes through a `Transport`:
`batch.sandbox.emulator_core` calls the sandbox's store in process (`NodeEmulator`, what the
sandbox runs), `batch.sandbox.emulator_http` speaks HTTP to any API server, the sandbox's or
kube-apiserver. Every write is a status patch, a lease renewal, an Event or a final pod
deletion, each checked against the object's uid, so a pod recreated under the same name is never
touched by mistake.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from batch.api.events import event_body, reference_of
from batch.api.integration import GangError, pod_requests
from batch.api.quantity import QuantityError
from batch.api.resources import Resource, parse_resource_list
from batch.sandbox.pod_annotations import EXIT_CODE, RUN_SECONDS
from batch.sandbox.store import Obj, dumps

__all__ = [
    "Kubelets",
    "Transport",
    "apply_status_patch",
    "lease_body",
]

log = logging.getLogger(__name__)

KUBELET_VERSION = "v1.32.0-tephra-sandbox"
LEASE_NAMESPACE = "kube-node-lease"
LEASE_SECONDS = 40
_TERMINAL = ("Succeeded", "Failed")
RESYNC_SECONDS = 0.5
_OWN_POD_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")


class Transport(Protocol):
    """How the kubelet logic writes. Each call answers None when the object is gone (404) or is
    another one by now (uid precondition failed, 409); other failures raise."""

    async def node_status(self, name: str, uid: str, patch: Obj) -> Obj | None: ...

    async def pod_status(self, ns: str, name: str, uid: str, patch: Obj) -> Obj | None: ...

    async def renew_lease(self, name: str, node_uid: str, spec: Obj) -> None: ...

    async def delete_lease(self, name: str) -> None: ...

    async def create_event(self, body: Obj) -> None: ...

    async def delete_pod(self, ns: str, name: str, uid: str) -> None: ...


def apply_status_patch(status: Obj, patch: Obj) -> Obj:
    """A status patch as strategic merge applies it to the fields the emulator writes: None
    removes a key, `conditions` merge by type, every other value replaces."""
    out = dict(status)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif key == "conditions":
            by_type = {c.get("type"): c for c in out.get("conditions") or []}
            order = list(by_type)
            for cond in value:
                if cond.get("type") not in by_type:
                    order.append(cond.get("type"))
                by_type[cond.get("type")] = cond
            out["conditions"] = [by_type[t] for t in order]
        else:
            out[key] = value
    return out


class _Pod:
    """What the emulator knows of one bound pod."""

    __slots__ = ("admitted", "kill", "killed", "node", "obj", "requests", "timer")

    def __init__(self, obj: Obj, node: str) -> None:
        self.obj = obj
        self.node = node
        self.requests = Resource.zero()
        self.admitted = False
        self.timer: asyncio.TimerHandle | None = None
        self.kill: asyncio.TimerHandle | None = None
        self.killed = False

    @property
    def key(self) -> tuple[str, str, str]:
        meta = self.obj["metadata"]
        return meta.get("namespace", ""), meta["name"], meta["uid"]


def _stopping(pod: Obj, grace: float, asked: float) -> str:
    """The Killing event's message: the containers stopped and the grace they get."""
    containers = ", ".join(c["name"] for c in pod["spec"].get("containers") or [])
    capped = f" ({asked:g} s asked, capped at {grace:g} s)" if grace < asked else ""
    return f"Stopping container {containers} with a grace of {grace:g} s{capped}"


def _newer(old: Obj, new: Obj) -> Obj:
    """The later of two versions of one object (watch events may trail a write's answer)."""
    try:
        before = int(old["metadata"].get("resourceVersion") or 0)
        after = int(new["metadata"].get("resourceVersion") or 0)
    except ValueError:
        return new
    return new if after >= before else old


class Kubelets:
    """The kubelet logic of every node, fed Node and Pod events, writing through a transport."""

    def __init__(
        self,
        transport: Transport,
        *,
        max_grace_seconds: float = 2.0,
        heartbeat_seconds: float = 10.0,
        stamp: Callable[[], str] | None = None,
        every_node: bool = True,
    ) -> None:
        """`every_node=False`: this emulator is the kubelet of the Nodes it is fed only (its
        watch selects some); pods bound elsewhere are left alone, even when deleted."""
        self.transport = transport
        self.max_grace = max_grace_seconds
        self.heartbeat = heartbeat_seconds
        self.stamp = stamp or _stamp
        self.every_node = every_node
        self.nodes: dict[str, Obj] = {}
        self.posted: set[str] = set()  # nodes whose status this emulator wrote
        self.pods: dict[str, _Pod] = {}  # uid -> bound pod
        self.used: dict[str, Resource] = {}  # node -> requests of admitted, non-terminal pods
        self.pod_count: dict[str, int] = {}
        self.waiting: dict[str, set[str]] = {}  # node -> uids bound before its status is posted
        self._ip = 0
        self._node_index: dict[str, int] = {}
        self._req_cache: dict[bytes, Resource] = {}
        self._alloc_cache: dict[str, tuple[Any, Resource]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._heartbeat_task: asyncio.Task[None] | None = None
        #: uid -> (pod, status patches the API server has not taken yet, in order)
        self.unsynced: dict[str, tuple[_Pod, list[Obj]]] = {}
        self.undeleted: dict[str, _Pod] = {}  # uid -> pod whose final deletion failed
        self._resync_task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._heartbeat_task = loop.create_task(self._heartbeat_loop())

    def stop(self) -> None:
        for rec in self.pods.values():
            for handle in (rec.timer, rec.kill):
                if handle is not None:
                    handle.cancel()
        for task in (*self._tasks, self._heartbeat_task, self._resync_task):
            if task is not None:
                task.cancel()

    async def shutdown(self) -> None:
        """`stop`, then wait for the cancelled writes to end."""
        pending = [
            t for t in (*self._tasks, self._heartbeat_task, self._resync_task) if t is not None
        ]
        self.stop()
        await asyncio.gather(*pending, return_exceptions=True)

    async def idle(self) -> None:
        """Wait until every write started so far is done."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _spawn(self, coro: Awaitable[None]) -> None:
        assert self._loop is not None, "Kubelets.start() first"
        task = self._loop.create_task(self._guard(coro))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _later(
        self, delay: float, fn: Callable[[_Pod], Awaitable[None]], rec: _Pod
    ) -> asyncio.TimerHandle:
        assert self._loop is not None
        return self._loop.call_later(delay, lambda: self._spawn(fn(rec)))

    @staticmethod
    async def _guard(coro: Awaitable[None]) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("node emulator: %s", exc)

    # ------------------------------------------------------------------ events
    def on_node(self, etype: str, node: Obj) -> None:
        name = node["metadata"]["name"]
        if etype == "DELETED":
            self.nodes.pop(name, None)
            self.posted.discard(name)
            self._spawn(self._node_gone(name))
            return
        old = self.nodes.get(name)
        self.nodes[name] = node if old is None else _newer(old, node)
        if old is None:
            self._spawn(self._post_node(name))

    def on_pod(self, etype: str, pod: Obj) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        if etype == "DELETED":
            self._forget(uid)
            return
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            return
        rec = self.pods.get(uid)
        fresh = rec is None
        if rec is None:
            rec = self.pods[uid] = _Pod(pod, node)
        else:
            rec.obj = _newer(rec.obj, pod)
        status = pod.get("status") or {}
        if meta.get("deletionTimestamp"):
            self._schedule_kill(rec)
        elif status.get("phase") in _TERMINAL:
            self._release(rec)  # finished (possibly marked so by someone else): frees the node
        elif fresh and status.get("phase") == "Pending" and not status.get("containerStatuses"):
            self._spawn(self._admit(rec))

    def _schedule_kill(self, rec: _Pod) -> None:
        if rec.kill is not None or rec.killed:
            return
        if not self.every_node and rec.node not in self.nodes:
            return  # another kubelet's pod
        asked = float(rec.obj["metadata"].get("deletionGracePeriodSeconds") or 0)
        grace = min(asked, self.max_grace)
        rec.kill = self._later(grace, self._kill, rec)
        if (rec.obj.get("status") or {}).get("phase") not in _TERMINAL:
            self._spawn(self._event(rec.obj, "Killing", _stopping(rec.obj, grace, asked), "Normal"))

    def _forget(self, uid: str) -> None:
        rec = self.pods.pop(uid, None)
        if rec is None:
            return
        self._release(rec)
        if rec.kill is not None:
            rec.kill.cancel()
        self.waiting.get(rec.node, set()).discard(uid)
        self.unsynced.pop(uid, None)
        self.undeleted.pop(uid, None)

    # ------------------------------------------------------------------ nodes
    async def _post_node(self, name: str) -> None:
        node = self.nodes.get(name)
        if node is None:
            return
        meta = node["metadata"]
        stored = await self.transport.node_status(name, meta["uid"], self._node_status(node))
        if stored is None or name not in self.nodes:
            return
        self.nodes[name] = _newer(self.nodes[name], stored)
        self.posted.add(name)
        await self._renew_lease(name)
        for uid in sorted(self.waiting.pop(name, ())):
            rec = self.pods.get(uid)
            if rec is not None:
                await self._admit(rec)

    def _node_status(self, node: Obj) -> Obj:
        name = node["metadata"]["name"]
        uid = node["metadata"]["uid"]
        idx = self._node_index.setdefault(name, len(self._node_index) + 1)
        status = node.get("status") or {}
        now = self.stamp()
        cap = {"pods": "110", **(status.get("capacity") or {})}
        alloc = dict(status.get("allocatable") or cap)
        alloc.setdefault("pods", cap["pods"])
        patch: Obj = {
            "capacity": cap,
            "allocatable": alloc,
            "conditions": [
                _cond("MemoryPressure", "False", "KubeletHasSufficientMemory", now),
                _cond("DiskPressure", "False", "KubeletHasNoDiskPressure", now),
                _cond("PIDPressure", "False", "KubeletHasSufficientPID", now),
                _cond("Ready", "True", "KubeletReady", now, "kubelet is posting ready status"),
            ],
            "nodeInfo": _node_info(uid),
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        }
        if not status.get("addresses"):
            patch["addresses"] = [
                {"type": "InternalIP", "address": f"172.18.{(idx >> 8) & 255}.{idx & 255}"},
                {"type": "Hostname", "address": name},
            ]
        return patch

    async def _node_gone(self, name: str) -> None:
        await self.transport.delete_lease(name)
        # Pod GC: pods bound to a node that no longer exists are deleted.
        for rec in [r for r in self.pods.values() if r.node == name]:
            await self.transport.delete_pod(*rec.key)

    async def _renew_lease(self, name: str) -> None:
        node = self.nodes.get(name)
        if node is None:
            return
        spec = {
            "holderIdentity": name,
            "leaseDurationSeconds": LEASE_SECONDS,
            "renewTime": _micro(time.time()),
        }
        await self.transport.renew_lease(name, node["metadata"]["uid"], spec)

    async def _heartbeat_loop(self) -> None:
        """Every Node's heartbeat each `heartbeat` seconds, all at once: the transport's pool
        bounds the requests in flight, and no Node waits for the slowest of a batch before it
        (a round that took longer than the period starts the next one at once)."""
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            due += self.heartbeat
            await asyncio.sleep(max(0.0, due - loop.time()))
            due = max(due, loop.time())
            await asyncio.gather(
                *(self._guard(self._heartbeat_one(n)) for n in sorted(self.nodes)),
                return_exceptions=True,
            )

    async def _heartbeat_one(self, name: str) -> None:
        node = self.nodes.get(name)
        if node is None:
            return
        if name not in self.posted or not _ready(node):
            # A status write that failed, or someone (the node lifecycle controller) said
            # otherwise: post it again, as a live kubelet keeps doing.
            await self._post_node(name)
        else:
            await self._renew_lease(name)

    # ------------------------------------------------------------------ pods
    def _release(self, rec: _Pod) -> None:
        if rec.timer is not None:
            rec.timer.cancel()
            rec.timer = None
        if rec.admitted:
            rec.admitted = False
            self.used[rec.node] = self.used.get(rec.node, Resource.zero()).sub(rec.requests)
            self.pod_count[rec.node] = self.pod_count.get(rec.node, 1) - 1

    def _current(self, rec: _Pod) -> bool:
        """The pod is still known and not being deleted."""
        uid = rec.obj["metadata"]["uid"]
        return self.pods.get(uid) is rec and not rec.obj["metadata"].get("deletionTimestamp")

    async def _admit(self, rec: _Pod) -> None:
        if not self._current(rec):
            return
        node = self.nodes.get(rec.node)
        if node is None or rec.node not in self.posted:
            # No kubelet yet: the pod stays Pending until its Node is there and Ready.
            self.waiting.setdefault(rec.node, set()).add(rec.obj["metadata"]["uid"])
            return
        try:
            req = self._requests(rec.obj.get("spec") or {})
            alloc = self._allocatable(node)
        except (GangError, QuantityError) as exc:
            await self._fail(rec, "UnexpectedAdmissionError", str(exc))
            return
        refusal = self._refusal(rec.node, req, alloc)
        if refusal is not None:
            await self._fail(rec, *refusal)
            return
        rec.requests = req
        rec.admitted = True
        self.used[rec.node] = self.used.get(rec.node, Resource.zero()).add(req)
        self.pod_count[rec.node] = self.pod_count.get(rec.node, 0) + 1
        await self._start(rec, restarts=None)

    def _refusal(self, node: str, req: Resource, alloc: Resource) -> tuple[str, str] | None:
        """(reason, message) when the pod does not fit the node's free allocatable."""
        used = self.used.get(node, Resource.zero())
        count = self.pod_count.get(node, 0)
        max_pods = alloc.get("pods", 110)
        if count + 1 > max_pods:
            return "OutOfpods", (
                "Pod was rejected: Node didn't have enough resource: "
                f"pods, requested: 1, used: {count}, capacity: {max_pods}"
            )
        for res in sorted(req.names()):
            need = req.get(res)
            if res == "pods" or need <= 0:
                continue
            have = alloc.get(res)
            if used.get(res) + need > have:
                return f"OutOf{res}", (
                    "Pod was rejected: Node didn't have enough "
                    f"resource: {res}, requested: {need}, used: {used.get(res)}, "
                    f"capacity: {have}"
                )
        return None

    def _requests(self, spec: Obj) -> Resource:
        """`pod_requests` memoized on the resource-relevant part of the spec (exact parsing of
        quantities is slow and pods of one workload share their requests)."""
        key = dumps(
            [
                [
                    (c.get("resources"), c.get("restartPolicy"))
                    for c in spec.get("containers") or []
                ],
                [
                    (c.get("resources"), c.get("restartPolicy"))
                    for c in spec.get("initContainers") or []
                ],
                spec.get("overhead"),
            ]
        )
        cached = self._req_cache.get(key)
        if cached is None:
            cached = pod_requests(spec)
            if len(self._req_cache) > 4096:
                self._req_cache.clear()
            self._req_cache[key] = cached
        return cached

    def _allocatable(self, node: Obj) -> Resource:
        status = node.get("status") or {}
        raw = status.get("allocatable") or status.get("capacity")
        name = node["metadata"]["name"]
        cached = self._alloc_cache.get(name)
        if cached is None or cached[0] != raw:
            cached = (raw, Resource(parse_resource_list(raw)))
            self._alloc_cache[name] = cached
        return cached[1]

    async def _write_pod(self, rec: _Pod, patch: Obj) -> Obj | None:
        """Write a status patch; None when the pod is gone. One the server cannot take now is
        kept for the resync and the pod's status as the kubelet means it is answered."""
        ns, name, uid = rec.key
        queued = self.unsynced.get(uid)
        if queued is None:
            try:
                stored = await self.transport.pod_status(ns, name, uid, patch)
            except Exception as exc:
                log.warning("node emulator: pod %s/%s status kept to retry: %s", ns, name, exc)
            else:
                if stored is not None and self.pods.get(uid) is rec:
                    rec.obj = _newer(rec.obj, stored)
                return stored
            queued = self.unsynced[uid] = (rec, [])
        queued[1].append(patch)
        self._resync_soon()
        status = apply_status_patch(rec.obj.get("status") or {}, patch)
        rec.obj = {**rec.obj, "status": status}
        return rec.obj

    async def _delete_pod(self, rec: _Pod) -> None:
        try:
            await self.transport.delete_pod(*rec.key)
        except Exception as exc:
            log.warning("node emulator: pod %s deletion kept to retry: %s", rec.key[1], exc)
            self.undeleted[rec.key[2]] = rec
            self._resync_soon()

    def _resync_soon(self) -> None:
        if self._loop is not None and (self._resync_task is None or self._resync_task.done()):
            self._resync_task = self._loop.create_task(self._resync_loop())

    async def _resync_loop(self) -> None:
        delay = RESYNC_SECONDS
        while self.unsynced or self.undeleted:
            await asyncio.sleep(delay)
            delay = min(delay * 2, max(self.heartbeat, RESYNC_SECONDS))
            try:
                await self._resync_once()
            except Exception as exc:  # still unreachable: keep everything for the next round
                log.debug("node emulator: resync deferred: %s", exc)
            else:
                delay = RESYNC_SECONDS

    async def _resync_once(self) -> None:
        """Write every kept patch and deletion in order; raises at the first failure."""
        for uid, (rec, patches) in list(self.unsynced.items()):
            while patches and self.pods.get(uid) is rec:
                stored = await self.transport.pod_status(*rec.key, patches[0])
                patches.pop(0)
                if stored is None:
                    break  # gone, or another pod now
                rec.obj = _newer(rec.obj, stored)
            del self.unsynced[uid]
        for uid, rec in list(self.undeleted.items()):
            await self.transport.delete_pod(*rec.key)
            self.undeleted.pop(uid, None)

    async def _fail(self, rec: _Pod, reason: str, message: str) -> None:
        status = rec.obj.get("status") or {}
        patch = {
            "phase": "Failed",
            "reason": reason,
            "message": message,
            "startTime": status.get("startTime") or self.stamp(),
        }
        if await self._write_pod(rec, patch) is not None:
            await self._event(rec.obj, reason, message)

    async def _event(self, pod: Obj, reason: str, message: str, kind: str = "Warning") -> None:
        """An event about the pod from its node's kubelet (kubectl describe shows it)."""
        node = str((pod.get("spec") or {}).get("nodeName", ""))
        involved = reference_of(pod, kind="Pod", api_version="v1")
        body = event_body(
            involved,
            reason=reason,
            message=message,
            type=kind,
            component="kubelet",
            stamp=self.stamp(),
            host=node,
        )
        await self.transport.create_event(body)

    def _next_ip(self) -> str:
        self._ip += 1
        i = self._ip
        return f"10.{64 + ((i >> 16) & 63)}.{(i >> 8) & 255}.{i & 255}"

    def _host_ip(self, node_name: str) -> str:
        node = self.nodes.get(node_name) or {}
        for a in (node.get("status") or {}).get("addresses") or []:
            if a.get("type") == "InternalIP":
                return str(a.get("address"))
        return ""

    def _running_patch(self, rec: _Pod, restarts: dict[str, Obj] | None) -> Obj:
        now = self.stamp()
        patch: Obj = {"phase": "Running", "reason": None, "message": None}
        if restarts is None:
            pod_ip, host_ip = self._next_ip(), self._host_ip(rec.node)
            patch.update(
                startTime=now,
                podIP=pod_ip,
                podIPs=[{"ip": pod_ip}],
                hostIP=host_ip,
                hostIPs=[{"ip": host_ip}],
            )
        statuses = []
        uid = rec.obj["metadata"]["uid"]
        for c in (rec.obj.get("spec") or {}).get("containers") or []:
            prev = (restarts or {}).get(c["name"])
            cs: Obj = {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": f"sandbox://{c.get('image', '')}",
                "containerID": f"sandbox://{uid[:8]}-{c['name']}",
                "ready": True,
                "started": True,
                "restartCount": int(prev["restartCount"]) + 1 if prev else 0,
                "state": {"running": {"startedAt": now}},
            }
            if prev:
                cs["lastState"] = {"terminated": prev["state"]["terminated"]}
            statuses.append(cs)
        patch["containerStatuses"] = statuses
        patch["conditions"] = [_cond(t, "True", None, now) for t in _OWN_POD_CONDITIONS]
        return patch

    async def _start(self, rec: _Pod, *, restarts: dict[str, Obj] | None) -> None:
        stored = await self._write_pod(rec, self._running_patch(rec, restarts))
        if stored is None or not self._current(rec) or not rec.admitted:
            return
        ann = stored["metadata"].get("annotations") or {}
        seconds = ann.get(RUN_SECONDS)
        if seconds is None:
            return
        try:
            delay = max(float(seconds), 0.0)
        except ValueError:
            log.warning(
                "pod %s: %s=%r is not a number; it runs until deleted",
                stored["metadata"]["name"],
                RUN_SECONDS,
                seconds,
            )
            return
        rec.timer = self._later(delay, self._finish, rec)

    async def _finish(self, rec: _Pod) -> None:
        rec.timer = None
        if not self._current(rec) or not rec.admitted:
            return
        ann = rec.obj["metadata"].get("annotations") or {}
        try:
            code = int(ann.get(EXIT_CODE, "0"))
        except ValueError:
            code = 1
        now = self.stamp()
        status = rec.obj.get("status") or {}
        terminated = [_terminated(cs, code, now) for cs in status.get("containerStatuses") or []]
        policy = (rec.obj.get("spec") or {}).get("restartPolicy", "Always")
        if policy == "Always" or (policy == "OnFailure" and code != 0):
            await self._start(rec, restarts={cs["name"]: cs for cs in terminated})
            return
        conds = [
            {**c, "status": "False", "reason": "PodCompleted", "lastTransitionTime": now}
            for c in status.get("conditions") or []
            if c.get("type") in ("Ready", "ContainersReady")
        ]
        self._release(rec)
        phase = "Succeeded" if code == 0 else "Failed"
        await self._write_pod(
            rec, {"phase": phase, "containerStatuses": terminated, "conditions": conds}
        )

    async def _kill(self, rec: _Pod) -> None:
        rec.kill = None
        rec.killed = True
        self._release(rec)
        status = rec.obj.get("status") or {}
        if rec.obj["metadata"].get("finalizers") and status.get("phase") not in _TERMINAL:
            # The object outlives its containers: record how they ended, as a kubelet does.
            now = self.stamp()
            statuses = [
                _terminated(cs, 143, now, reason="Error")
                for cs in status.get("containerStatuses") or []
            ]
            await self._write_pod(rec, {"phase": "Failed", "containerStatuses": statuses})
        await self._delete_pod(rec)


def _terminated(cs: Obj, code: int, now: str, *, reason: str | None = None) -> Obj:
    started = ((cs.get("state") or {}).get("running") or {}).get("startedAt", now)
    term = {
        "exitCode": code,
        "reason": reason or ("Completed" if code == 0 else "Error"),
        "startedAt": started,
        "finishedAt": now,
        "containerID": cs.get("containerID"),
    }
    return {**cs, "ready": False, "started": False, "state": {"terminated": term}}


def _ready(node: Obj) -> bool:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return bool(c.get("status") == "True")
    return False


def _node_info(uid: str) -> Obj:
    return {
        "kubeletVersion": KUBELET_VERSION,
        "kubeProxyVersion": KUBELET_VERSION,
        "operatingSystem": "linux",
        "architecture": "amd64",
        "containerRuntimeVersion": "sandbox://1.0",
        "osImage": "Tephra sandbox",
        "kernelVersion": "6.1.0",
        "machineID": uid.replace("-", ""),
        "systemUUID": uid,
        "bootID": uid,
    }


def _cond(typ: str, status: str, reason: str | None, now: str, message: str = "") -> Obj:
    c: Obj = {"type": typ, "status": status, "lastProbeTime": None, "lastTransitionTime": now}
    if reason:
        c["reason"] = reason
        c["lastHeartbeatTime"] = now
    if message:
        c["message"] = message
    return c


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_body(name: str, node_uid: str, spec: Obj) -> Obj:
    """A node's heartbeat Lease, owned by its Node as a kubelet creates it."""
    owner = {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node_uid}
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": LEASE_NAMESPACE, "ownerReferences": [owner]},
        "spec": spec,
    }
