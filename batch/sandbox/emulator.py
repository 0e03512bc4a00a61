"""The node emulator: the sandbox's kubelets.

Every Node object becomes Ready (conditions, addresses, nodeInfo, allocatable) and renews a
heartbeat Lease in `kube-node-lease`. Every pod bound to a node is admitted against the node's
allocatable like a kubelet would (OutOfcpu / OutOfmemory / OutOf<resource> on over-commit), then
runs: Running with containerStatuses, Ready condition, podIP and startTime; it terminates after
`sandbox.tephra.io/run-seconds` with `sandbox.tephra.io/exit-code`, honouring restartPolicy
(restart counts under OnFailure/Always, restarted at once rather than with CrashLoopBackOff
delays). A deleted pod terminates after its grace period capped by `max_grace_seconds`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from batch.api.events import event_body, reference_of
from batch.api.integration import GangError, pod_requests
from batch.api.quantity import QuantityError
from batch.api.resources import Resource, parse_resource_list
from batch.sandbox.core import Core
from batch.sandbox.errors import ApiError
from batch.sandbox.store import Obj, dumps

log = logging.getLogger(__name__)

RUN_SECONDS = "sandbox.tephra.io/run-seconds"
EXIT_CODE = "sandbox.tephra.io/exit-code"
KUBELET_VERSION = "v1.32.0-tephra-sandbox"
_TERMINAL = ("Succeeded", "Failed")


class _PodRun:
    __slots__ = ("admitted", "node", "requests", "timer")

    def __init__(self, node: str, requests: Resource, *, admitted: bool) -> None:
        self.node = node
        self.requests = requests
        self.admitted = admitted
        self.timer: asyncio.TimerHandle | None = None


class NodeEmulator:
    def __init__(
        self, core: Core, *, max_grace_seconds: float = 2.0, heartbeat_seconds: float = 10.0
    ) -> None:
        self.core = core
        self.max_grace = max_grace_seconds
        self.heartbeat = heartbeat_seconds
        self.pods_rt = core.rt("", "v1", "pods")
        self.nodes_rt = core.rt("", "v1", "nodes")
        self.leases_rt = core.rt("coordination.k8s.io", "v1", "leases")
        self.events_rt = core.rt("", "v1", "events")
        self.runs: dict[str, _PodRun] = {}  # pod uid -> run
        self.used: dict[str, Resource] = {}  # node -> requests of admitted, non-terminal pods
        self.pod_count: dict[str, int] = {}
        self.kills: dict[str, asyncio.TimerHandle] = {}
        self.waiting: dict[str, set[tuple[str, str, str]]] = {}  # node -> pods bound before it
        self._ip = 0
        self._req_cache: dict[bytes, Resource] = {}
        self._alloc_cache: dict[str, tuple[Any, Resource]] = {}
        self._node_index: dict[str, int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._heartbeat_task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.core.store.listeners.append(self.on_change)
        for node in list(self.core.store.buckets["nodes"].iter(None)):
            self._soon(self._node_seen, node["metadata"]["name"])
        for pod in list(self.core.store.buckets["pods"].iter(None)):
            self.on_change("ADDED", "pods", pod, None)
        self._heartbeat_task = loop.create_task(self._heartbeat_loop())

    def stop(self) -> None:
        if self.on_change in self.core.store.listeners:
            self.core.store.listeners.remove(self.on_change)
        for run in self.runs.values():
            if run.timer is not None:
                run.timer.cancel()
        for t in self.kills.values():
            t.cancel()
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()

    def _soon(self, fn: Callable[..., None], *args: Any) -> None:
        if self._loop is not None:
            self._loop.call_soon(self._safe, fn, *args)

    def _later(self, delay: float, fn: Callable[..., None], *args: Any) -> asyncio.TimerHandle:
        assert self._loop is not None
        return self._loop.call_later(delay, self._safe, fn, *args)

    @staticmethod
    def _safe(fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except ApiError as err:
            if err.code not in (404, 409):
                log.warning("node emulator: %s", err.message)
        except Exception:
            log.exception("node emulator failed")

    # ------------------------------------------------------------------ events
    def on_change(self, etype: str, key: str, obj: Obj, old: Obj | None) -> None:
        if key == "pods":
            self._pod_event(etype, obj, old)
        elif key == "nodes":
            name = obj["metadata"]["name"]
            if etype == "ADDED":
                self._soon(self._node_seen, name)
            elif etype == "DELETED":
                self._soon(self._node_gone, name)

    def _pod_event(self, etype: str, pod: Obj, old: Obj | None) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        if etype == "DELETED":
            self._release(uid)
            kill = self.kills.pop(uid, None)
            if kill is not None:
                kill.cancel()
            return
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            return
        phase = (pod.get("status") or {}).get("phase")
        if meta.get("deletionTimestamp"):
            if uid not in self.kills:
                grace = float(meta.get("deletionGracePeriodSeconds") or 0)
                delay = min(grace, self.max_grace)
                self.kills[uid] = self._later(
                    delay, self._kill, meta.get("namespace", ""), meta["name"], uid
                )
            return
        run = self.runs.get(uid)
        if phase in _TERMINAL and run is not None and run.admitted:
            self._release(uid)  # finished (possibly marked so by someone else): frees the node
            return
        if (
            uid not in self.runs
            and phase == "Pending"
            and not ((pod.get("status") or {}).get("containerStatuses"))
        ):
            self.runs[uid] = _PodRun(node, Resource.zero(), admitted=False)  # placeholder
            self._soon(self._admit, meta.get("namespace", ""), meta["name"], uid)

    # ------------------------------------------------------------------ nodes
    def _node_seen(self, name: str) -> None:
        node = self.core.find(self.nodes_rt, "", name)
        if node is None:
            return
        idx = self._node_index.setdefault(name, len(self._node_index) + 1)
        status = dict(node.get("status") or {})
        now = self.core.clock.stamp()
        cap = dict(status.get("capacity") or {})
        cap.setdefault("pods", "110")
        status["capacity"] = cap
        alloc = dict(status.get("allocatable") or cap)
        alloc.setdefault("pods", cap["pods"])
        status["allocatable"] = alloc
        status["conditions"] = [
            _cond("MemoryPressure", "False", "KubeletHasSufficientMemory", now),
            _cond("DiskPressure", "False", "KubeletHasNoDiskPressure", now),
            _cond("PIDPressure", "False", "KubeletHasSufficientPID", now),
            _cond("Ready", "True", "KubeletReady", now, "kubelet is posting ready status"),
        ]
        status.setdefault(
            "addresses",
            [
                {"type": "InternalIP", "address": f"172.18.{(idx >> 8) & 255}.{idx & 255}"},
                {"type": "Hostname", "address": name},
            ],
        )
        status["nodeInfo"] = {
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": KUBELET_VERSION,
            "operatingSystem": "linux",
            "architecture": "amd64",
            "containerRuntimeVersion": "sandbox://1.0",
            "osImage": "Tephra sandbox",
            "kernelVersion": "6.1.0",
            "machineID": node["metadata"]["uid"].replace("-", ""),
            "systemUUID": node["metadata"]["uid"],
            "bootID": node["metadata"]["uid"],
        }
        status.setdefault("daemonEndpoints", {"kubeletEndpoint": {"Port": 10250}})
        self.core.write(self.nodes_rt, node, {**node, "status": status}, subresource="status")
        self._renew_lease(name)
        for ns, pod_name, uid in sorted(self.waiting.pop(name, ())):
            pod = self.core.find(self.pods_rt, ns, pod_name)
            if pod is not None and pod["metadata"]["uid"] == uid and uid not in self.runs:
                self.runs[uid] = _PodRun(name, Resource.zero(), admitted=False)
                self._admit(ns, pod_name, uid)

    def _node_gone(self, name: str) -> None:
        lease = self.core.find(self.leases_rt, "kube-node-lease", name)
        if lease is not None:
            self.core.delete(self.leases_rt, "kube-node-lease", name)
        # Pod GC: pods bound to a node that no longer exists are deleted.
        for pod in list(self.core.store.buckets["pods"].iter(None)):
            if (pod.get("spec") or {}).get("nodeName") == name:
                meta = pod["metadata"]
                self.core.delete(self.pods_rt, meta.get("namespace", ""), meta["name"], grace=0)

    def _renew_lease(self, name: str) -> None:
        now = self.core.clock.now()
        stamp = _micro(now)
        lease = self.core.find(self.leases_rt, "kube-node-lease", name)
        node = self.core.find(self.nodes_rt, "", name)
        if node is None:
            return
        spec = {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": stamp}
        if lease is None:
            self.core.create(
                self.leases_rt,
                "kube-node-lease",
                {
                    "metadata": {
                        "name": name,
                        "namespace": "kube-node-lease",
                        "ownerReferences": [
                            {
                                "apiVersion": "v1",
                                "kind": "Node",
                                "name": name,
                                "uid": node["metadata"]["uid"],
                            }
                        ],
                    },
                    "spec": spec,
                },
            )
        else:
            self.core.write(self.leases_rt, lease, {**lease, "spec": {**lease["spec"], **spec}})

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat)
            names = [n["metadata"]["name"] for n in self.core.store.buckets["nodes"].iter(None)]
            for i, name in enumerate(names):
                self._safe(self._renew_lease, name)
                if i % 500 == 499:
                    await asyncio.sleep(0)

    # ------------------------------------------------------------------ pods
    def _release(self, uid: str) -> None:
        run = self.runs.pop(uid, None)
        if run is None:
            return
        if run.timer is not None:
            run.timer.cancel()
        if run.admitted:
            self.used[run.node] = self.used.get(run.node, Resource.zero()).sub(run.requests)
            self.pod_count[run.node] = self.pod_count.get(run.node, 1) - 1

    def _admit(self, ns: str, name: str, uid: str) -> None:
        pod = self.core.find(self.pods_rt, ns, name)
        if pod is None or pod["metadata"]["uid"] != uid or pod["metadata"].get("deletionTimestamp"):
            self.runs.pop(uid, None)
            return
        node_name = pod["spec"]["nodeName"]
        node = self.core.find(self.nodes_rt, "", node_name)
        if node is None:
            # No kubelet: the pod stays Pending until a Node of that name appears.
            self.runs.pop(uid, None)
            self.waiting.setdefault(node_name, set()).add((ns, name, uid))
            return
        try:
            req = self._requests(pod.get("spec") or {})
            alloc = self._allocatable(node)
        except (GangError, QuantityError) as exc:
            self.runs.pop(uid, None)
            self._fail(pod, "UnexpectedAdmissionError", str(exc))
            return
        used = self.used.get(node_name, Resource.zero())
        count = self.pod_count.get(node_name, 0)
        max_pods = alloc.get("pods", 110)
        if count + 1 > max_pods:
            self.runs.pop(uid, None)
            self._fail(
                pod,
                "OutOfpods",
                "Pod was rejected: Node didn't have enough resource: "
                f"pods, requested: 1, used: {count}, capacity: {max_pods}",
            )
            return
        for res in sorted(req.names()):
            if res == "pods":
                continue
            need = req.get(res)
            if need <= 0:
                continue
            have = alloc.get(res)
            if used.get(res) + need > have:
                self.runs.pop(uid, None)
                self._fail(
                    pod,
                    f"OutOf{res}",
                    "Pod was rejected: Node didn't have enough "
                    f"resource: {res}, requested: {need}, used: {used.get(res)}, "
                    f"capacity: {have}",
                )
                return
        run = _PodRun(node_name, req, admitted=True)
        self.runs[uid] = run
        self.used[node_name] = used.add(req)
        self.pod_count[node_name] = count + 1
        self._start(pod, run, restarts=None)

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
        raw = (node.get("status") or {}).get("allocatable")
        name = node["metadata"]["name"]
        cached = self._alloc_cache.get(name)
        if cached is None or cached[0] != raw:
            cached = (raw, Resource(parse_resource_list(raw)))
            self._alloc_cache[name] = cached
        return cached[1]

    def _fail(self, pod: Obj, reason: str, message: str) -> None:
        status = dict(pod.get("status") or {})
        status.update(
            phase="Failed",
            reason=reason,
            message=message,
            startTime=status.get("startTime") or self.core.clock.stamp(),
        )
        self.core.write(self.pods_rt, pod, {**pod, "status": status}, subresource="status")
        self._event(pod, reason, message)

    def _event(self, pod: Obj, reason: str, message: str) -> None:
        """A Warning event about the pod from its node's kubelet (kubectl describe shows it)."""
        node = str((pod.get("spec") or {}).get("nodeName", ""))
        involved = reference_of(pod, kind="Pod", api_version="v1")
        body = event_body(
            involved,
            reason=reason,
            message=message,
            type="Warning",
            component="kubelet",
            stamp=self.core.clock.stamp(),
            host=node,
        )
        self.core.create(self.events_rt, body["metadata"]["namespace"], body)

    def _next_ip(self) -> str:
        self._ip += 1
        i = self._ip
        return f"10.{64 + ((i >> 16) & 63)}.{(i >> 8) & 255}.{i & 255}"

    def _start(self, pod: Obj, run: _PodRun, *, restarts: dict[str, Any] | None) -> None:
        now = self.core.clock.stamp()
        status = dict(pod.get("status") or {})
        spec = pod.get("spec") or {}
        node = self.core.find(self.nodes_rt, "", run.node)
        host_ip = ""
        if node is not None:
            for a in (node.get("status") or {}).get("addresses") or []:
                if a.get("type") == "InternalIP":
                    host_ip = str(a.get("address"))
        if restarts is None:
            status["startTime"] = now
            status["podIP"] = self._next_ip()
            status["podIPs"] = [{"ip": status["podIP"]}]
            status["hostIP"] = host_ip
            status["hostIPs"] = [{"ip": host_ip}]
        statuses = []
        for c in spec.get("containers") or []:
            prev = (restarts or {}).get(c["name"])
            cs: Obj = {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": f"sandbox://{c.get('image', '')}",
                "containerID": f"sandbox://{pod['metadata']['uid'][:8]}-{c['name']}",
                "ready": True,
                "started": True,
                "restartCount": int(prev["restartCount"]) + 1 if prev else 0,
                "state": {"running": {"startedAt": now}},
            }
            if prev:
                cs["lastState"] = {"terminated": prev["state"]["terminated"]}
            statuses.append(cs)
        status["containerStatuses"] = statuses
        status["phase"] = "Running"
        status.pop("reason", None)
        status.pop("message", None)
        conds = [c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"]
        conds += [
            _cond("PodReadyToStartContainers", "True", None, now),
            _cond("Initialized", "True", None, now),
            _cond("Ready", "True", None, now),
            _cond("ContainersReady", "True", None, now),
        ]
        status["conditions"] = conds
        stored = self.core.write(self.pods_rt, pod, {**pod, "status": status}, subresource="status")
        ann = stored["metadata"].get("annotations") or {}
        seconds = ann.get(RUN_SECONDS)
        if seconds is not None:
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
            meta = stored["metadata"]
            run.timer = self._later(
                delay, self._finish, meta.get("namespace", ""), meta["name"], meta["uid"]
            )

    def _finish(self, ns: str, name: str, uid: str) -> None:
        pod = self.core.find(self.pods_rt, ns, name)
        run = self.runs.get(uid)
        if pod is None or run is None or pod["metadata"]["uid"] != uid:
            return
        if pod["metadata"].get("deletionTimestamp"):
            return
        ann = pod["metadata"].get("annotations") or {}
        try:
            code = int(ann.get(EXIT_CODE, "0"))
        except ValueError:
            code = 1
        now = self.core.clock.stamp()
        policy = (pod.get("spec") or {}).get("restartPolicy", "Always")
        status = dict(pod.get("status") or {})
        terminated = []
        for cs in status.get("containerStatuses") or []:
            started = ((cs.get("state") or {}).get("running") or {}).get("startedAt", now)
            term = {
                "exitCode": code,
                "reason": "Completed" if code == 0 else "Error",
                "startedAt": started,
                "finishedAt": now,
                "containerID": cs.get("containerID"),
            }
            terminated.append(
                {**cs, "ready": False, "started": False, "state": {"terminated": term}}
            )
        restart = policy == "Always" or (policy == "OnFailure" and code != 0)
        if restart:
            by_name = {cs["name"]: cs for cs in terminated}
            self._start({**pod, "status": status}, run, restarts=by_name)
            return
        status["containerStatuses"] = terminated
        status["phase"] = "Succeeded" if code == 0 else "Failed"
        conds = []
        for cond in status.get("conditions") or []:
            if cond.get("type") in ("Ready", "ContainersReady"):
                conds.append(
                    {**cond, "status": "False", "reason": "PodCompleted", "lastTransitionTime": now}
                )
            else:
                conds.append(cond)
        status["conditions"] = conds
        self._release(uid)
        self.core.write(self.pods_rt, pod, {**pod, "status": status}, subresource="status")

    def _kill(self, ns: str, name: str, uid: str) -> None:
        self.kills.pop(uid, None)
        pod = self.core.find(self.pods_rt, ns, name)
        if pod is None or pod["metadata"]["uid"] != uid:
            return
        self._release(uid)
        phase = (pod.get("status") or {}).get("phase")
        if pod["metadata"].get("finalizers") and phase not in _TERMINAL:
            # The object outlives its containers: record how they ended, as a kubelet does.
            now = self.core.clock.stamp()
            status = dict(pod.get("status") or {})
            status["containerStatuses"] = [
                {
                    **cs,
                    "ready": False,
                    "started": False,
                    "state": {
                        "terminated": {
                            "exitCode": 143,
                            "reason": "Error",
                            "finishedAt": now,
                            "startedAt": ((cs.get("state") or {}).get("running") or {}).get(
                                "startedAt", now
                            ),
                        }
                    },
                }
                for cs in status.get("containerStatuses") or []
            ]
            status["phase"] = "Failed"
            self.core.write(self.pods_rt, pod, {**pod, "status": status}, subresource="status")
        self.core.delete(self.pods_rt, ns, name, grace=0)


def _cond(typ: str, status: str, reason: str | None, now: str, message: str = "") -> Obj:
    c: Obj = {"type": typ, "status": status, "lastProbeTime": None, "lastTransitionTime": now}
    if reason:
        c["reason"] = reason
        c["lastHeartbeatTime"] = now
    if message:
        c["message"] = message
    return c


def _micro(t: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
