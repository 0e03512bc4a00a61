"""The chaos tier's invariants on a real kube-apiserver (issue 30): `Watchdog`'s counts, observed
through a watch of every pod instead of the sandbox's store.

A thread lists the pods, then watches them from that resourceVersion; a cut watch (an apiserver
restart) resumes from the last version it saw, a 410 Gone relists. Every event updates a mirror
of the pods in the order etcd committed them, so the room on a node at a bind is what the API
server held at that revision: a bind that leaves a node's bound, unfinished pods asking for more
than its allocatable is an over-commit (the apiserver does not check room; the scheduler must).
Also counted: double binds (a pod uid whose nodeName changes), pods created twice (one
namespace/name seen with more than one uid: a controller created it again), and the longest
stretch a gang stayed partly bound. `snapshot` lists, once the faults stop, orphans, partly
bound gangs and unfinished VCJobs of one namespace.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
import urllib.error
import urllib.request
from typing import Any

from .invariants import FINAL, GROUP, Counts, count_over_commits

SCHED = "/apis/scheduling.volcano.sh/v1beta1"
VCJOBS = "/apis/batch.volcano.sh/v1alpha1"


class RealWatchdog:
    """`RealWatchdog(server, context, namespace)`; read `counts`, call `snapshot()`, `stop()`."""

    def __init__(self, server: str, context: ssl.SSLContext, namespace: str) -> None:
        self.server, self.context, self.namespace = server, context, namespace
        self.counts = Counts()
        self.created_twice = 0
        self._lock = threading.Lock()
        self._pods: dict[str, dict[str, Any]] = {}  # uid -> pod
        self._node_of: dict[str, str] = {}
        self._uid_of: dict[tuple[str, str], str] = {}
        self._alloc: dict[str, dict[str, Any]] = {}
        self._need: dict[str, int] = {}  # PodGroup -> minMember
        self._partial_since: dict[tuple[str, str], float] = {}
        self._stop = threading.Event()
        self._synced = threading.Event()
        self._thread = threading.Thread(target=self._run, name="real-watchdog", daemon=True)
        self._thread.start()
        if not self._synced.wait(60):
            raise RuntimeError("the watchdog could not list the pods")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=40)

    # ------------------------------------------------------------------ the API, read-only
    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.server + path, context=self.context, timeout=10) as r:
            return json.loads(r.read())

    def _run(self) -> None:
        version = ""
        while not self._stop.is_set():
            try:
                if not version:
                    version = self._relist()
                version = self._watch(version)
            except (OSError, ValueError, urllib.error.URLError):
                time.sleep(0.5)  # the apiserver is away: resume from `version`

    def _relist(self) -> str:
        page = self.get("/api/v1/pods")
        for pod in page["items"]:
            self._on_event("ADDED", pod)
        self._synced.set()
        return str(page["metadata"]["resourceVersion"])

    def _watch(self, version: str) -> str:
        """Follow the watch from `version` until it ends; the last version seen ("" on 410)."""
        path = f"/api/v1/pods?watch=1&resourceVersion={version}&timeoutSeconds=20"
        with urllib.request.urlopen(self.server + path, context=self.context, timeout=30) as r:
            for line in r:
                if self._stop.is_set():
                    break
                event = json.loads(line)
                obj = event["object"]
                if event["type"] == "ERROR":
                    return "" if obj.get("code") == 410 else version
                if event["type"] != "BOOKMARK":
                    self._on_event(event["type"], obj)
                version = str(obj["metadata"]["resourceVersion"])
        return version

    # ------------------------------------------------------------------ the invariants
    def _on_event(self, etype: str, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        uid = str(meta["uid"])
        with self._lock:
            if etype == "DELETED":
                self._pods.pop(uid, None)
                return
            self._pods[uid] = pod
            node = pod.get("spec", {}).get("nodeName")
            if meta.get("namespace") != self.namespace:
                return  # other tests' pods only take room
            self._count_creation(uid, (str(meta["namespace"]), str(meta["name"])))
            if not node:
                return
            before = self._node_of.get(uid)
            if before is None:
                self._node_of[uid] = node
                self.counts.binds += 1
                self._check_node(node)
                self._check_gang(pod)
            elif before != node:
                self.counts.double_binds += 1
                self.counts.details.append(f"pod {meta['name']}: {before} -> {node}")

    def _count_creation(self, uid: str, key: tuple[str, str]) -> None:
        first = self._uid_of.setdefault(key, uid)
        if first != uid:
            self._uid_of[key] = uid
            self.created_twice += 1
            self.counts.details.append(f"pod {key[1]} created again")

    def _allocatable(self, node: str) -> dict[str, Any]:
        if node not in self._alloc:
            got = self.get(f"/api/v1/nodes/{node}")
            self._alloc[node] = (got.get("status") or {}).get("allocatable") or {}
        return self._alloc[node]

    def _check_node(self, node: str) -> None:
        try:
            alloc = self._allocatable(node)
        except (OSError, ValueError):
            return
        count_over_commits(self.counts, node, alloc, self._pods.values())

    def _check_gang(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        group = (meta.get("annotations") or {}).get(GROUP)
        if not group:
            return
        mine = [p for p in self._pods.values() if _group(p) == group]
        bound = sum(1 for p in mine if p.get("spec", {}).get("nodeName"))
        need = self._min_member(str(group))
        now = time.monotonic()
        if bound < need:
            self._partial_since.setdefault((self.namespace, group), now)
        elif (since := self._partial_since.pop((self.namespace, group), None)) is not None:
            took = now - since
            self.counts.longest_partial_seconds = max(self.counts.longest_partial_seconds, took)

    def _min_member(self, group: str) -> int:
        if group not in self._need:
            try:
                pg = self.get(f"{SCHED}/namespaces/{self.namespace}/podgroups/{group}")
            except (OSError, ValueError):
                return 1
            self._need[group] = int((pg.get("spec") or {}).get("minMember") or 1)
        return self._need[group]

    def snapshot(self) -> Counts:
        """Count orphans, partly bound gangs and unfinished VCJobs of the namespace now."""
        ns = self.namespace
        pods = self.get(f"/api/v1/namespaces/{ns}/pods")["items"]
        groups = self.get(f"{SCHED}/namespaces/{ns}/podgroups")["items"]
        jobs = self.get(f"{VCJOBS}/namespaces/{ns}/jobs")["items"]
        c = self.counts
        c.orphan_pods = c.orphan_podgroups = c.partial_gangs = c.unfinished_jobs = 0
        live = {str(o["metadata"]["uid"]) for o in [*pods, *groups, *jobs]}
        for kind, items in (("pod", pods), ("podgroup", groups)):
            for o in items:
                owners = [r.get("uid") for r in o["metadata"].get("ownerReferences") or []]
                if owners and not any(u in live for u in owners):
                    c.orphan_pods += kind == "pod"
                    c.orphan_podgroups += kind == "podgroup"
                    c.details.append(f"orphan {kind} {o['metadata']['name']}")
        for pg in groups:
            name = pg["metadata"]["name"]
            bound = sum(1 for p in pods if _group(p) == name and p["spec"].get("nodeName"))
            if 0 < bound < int(pg.get("spec", {}).get("minMember") or 1):
                c.partial_gangs += 1
                c.details.append(f"gang {name} partly bound: {bound}")
        for job in jobs:
            if ((job.get("status") or {}).get("state") or {}).get("phase", "") not in FINAL:
                c.unfinished_jobs += 1
        return c

    def report(self) -> str:
        return f"{self.counts.report()} created_twice={self.created_twice}"


def _group(pod: dict[str, Any]) -> str | None:
    return (pod["metadata"].get("annotations") or {}).get(GROUP)
