"""The chaos tier's invariants, observed inside the sandbox's store (issue 30).

`Watchdog` is a store listener: it sees every committed change on the sandbox's event loop, so
nothing between two polls escapes it. It counts, while faults are injected:

* double binds: a pod (by uid) whose nodeName changes once set;
* over-commits: a bind that leaves a node's bound, unfinished pods asking for more of a resource
  than the node's allocatable;

and how long the longest stretch lasted during which a gang had some but not all of its
minMember pods bound (reported, not asserted: it is time). `snapshot` counts, once the faults
stop, what must then be true of the stored state: orphan PodGroups and pods (an owner uid that
names no stored object), gangs partly bound (fewer bound pods than minMember but more than
none) and VCJobs not in a final phase.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from batch.api.quantity import parse_quantity

PODS = "pods"
PODGROUPS = "podgroups.scheduling.volcano.sh"
VCJOBS = "jobs.batch.volcano.sh"
NODES = "nodes"
FINAL = frozenset({"Completed", "Failed", "Aborted", "Terminated"})
GROUP = "scheduling.k8s.io/group-name"


def _requests(pod: dict[str, Any], into: dict[str, Fraction]) -> None:
    for c in pod.get("spec", {}).get("containers") or []:
        for name, q in ((c.get("resources") or {}).get("requests") or {}).items():
            into[name] += parse_quantity(str(q))


def _holds(pod: dict[str, Any]) -> bool:
    return bool(pod.get("spec", {}).get("nodeName")) and (pod.get("status") or {}).get(
        "phase"
    ) not in ("Succeeded", "Failed")


@dataclass
class Counts:
    """What one run observed; `report()` is printed by the tests (the issue's note quotes it)."""

    binds: int = 0
    double_binds: int = 0
    over_commits: int = 0
    orphan_podgroups: int = 0
    orphan_pods: int = 0
    partial_gangs: int = 0
    unfinished_jobs: int = 0
    longest_partial_seconds: float = 0.0
    details: list[str] = field(default_factory=list)

    def report(self) -> str:
        return (
            f"binds={self.binds} double_binds={self.double_binds} "
            f"over_commits={self.over_commits} orphan_podgroups={self.orphan_podgroups} "
            f"orphan_pods={self.orphan_pods} partial_gangs={self.partial_gangs} "
            f"unfinished_jobs={self.unfinished_jobs} "
            f"longest_partial_gang={self.longest_partial_seconds:.2f}s"
        )


def count_over_commits(
    counts: Counts, node: str, alloc: dict[str, Any], pods: Iterable[dict[str, Any]]
) -> None:
    """Count on `counts` every resource of `node` whose holding pods ask for more than its
    allocatable `alloc` (the over-commit invariant, for either watcher)."""
    used: dict[str, Fraction] = defaultdict(Fraction)
    for pod in pods:
        if pod.get("spec", {}).get("nodeName") == node and _holds(pod):
            _requests(pod, used)
    for name, amount in used.items():
        if name in alloc and amount > parse_quantity(str(alloc[name])):
            counts.over_commits += 1
            counts.details.append(f"node {node} over on {name}")


class Watchdog:
    """Install on a `SandboxHandle` (`Watchdog(sb)`); read `counts` and call `snapshot()`."""

    def __init__(self, sb: Any) -> None:
        self.sb = sb
        self.counts = Counts()
        self._lock = threading.Lock()
        self._node_of: dict[str, str] = {}
        self._bound: dict[tuple[str, str], int] = {}
        self._partial_since: dict[tuple[str, str], float] = {}
        sb.call(lambda: sb.core.store.listeners.append(self._on_change))

    def _on_change(self, etype: str, key: str, obj: dict[str, Any], old: Any) -> None:
        if key != PODS or etype == "DELETED":
            return
        uid = str(obj["metadata"].get("uid"))
        node = obj.get("spec", {}).get("nodeName")
        if not node:
            return
        with self._lock:
            before = self._node_of.get(uid)
            if before is None:
                self._node_of[uid] = node
                self.counts.binds += 1
                self._check_node(node)
                self._check_gang(obj)
            elif before != node:
                self.counts.double_binds += 1
                self.counts.details.append(f"pod {obj['metadata']['name']}: {before} -> {node}")

    def _check_node(self, node: str) -> None:
        store = self.sb.core.store
        n = store.get(NODES, "", node)
        if n is None:
            return
        alloc = (n.get("status") or {}).get("allocatable") or {}
        count_over_commits(self.counts, node, alloc, store.buckets[PODS].iter(None))

    def _check_gang(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        group = (meta.get("annotations") or {}).get(GROUP)
        if not group:
            return
        key = (str(meta.get("namespace")), str(group))
        bound = self._bound[key] = self._bound.get(key, 0) + 1
        pg = self.sb.core.store.get(PODGROUPS, *key)
        need = int(((pg or {}).get("spec") or {}).get("minMember") or 1)
        now = time.monotonic()
        if bound < need:
            self._partial_since.setdefault(key, now)
        elif key in self._partial_since:
            took = now - self._partial_since.pop(key)
            self.counts.longest_partial_seconds = max(self.counts.longest_partial_seconds, took)

    def snapshot(self) -> Counts:
        """Count orphans, partial gangs and unfinished jobs now (on the sandbox's loop)."""
        return self.sb.call(self._snapshot)

    def _snapshot(self) -> Counts:
        store = self.sb.core.store
        uids = {str(o["metadata"].get("uid")) for b in store.buckets.values() for o in b.iter(None)}
        c = self.counts
        c.orphan_pods = c.orphan_podgroups = c.partial_gangs = c.unfinished_jobs = 0
        pods = list(store.buckets[PODS].iter(None))
        for key in (PODS, PODGROUPS):
            for o in store.buckets[key].iter(None):
                owners = [r.get("uid") for r in o["metadata"].get("ownerReferences") or []]
                if owners and not any(u in uids for u in owners):
                    if key == PODS:
                        c.orphan_pods += 1
                    else:
                        c.orphan_podgroups += 1
                    c.details.append(f"orphan {key} {o['metadata']['name']}")
        for pg in store.buckets[PODGROUPS].iter(None):
            name = pg["metadata"]["name"]
            mine = [p for p in pods if (p["metadata"].get("annotations") or {}).get(GROUP) == name]
            bound = sum(1 for p in mine if p.get("spec", {}).get("nodeName"))
            if 0 < bound < int(pg.get("spec", {}).get("minMember") or 1):
                c.partial_gangs += 1
                c.details.append(f"gang {name} partly bound: {bound}")
        for job in store.buckets[VCJOBS].iter(None):
            phase = ((job.get("status") or {}).get("state") or {}).get("phase", "")
            if phase not in FINAL:
                c.unfinished_jobs += 1
        return c
