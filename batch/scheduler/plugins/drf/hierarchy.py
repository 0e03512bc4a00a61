"""Hierarchical DRF (drf with ``enableHierarchy: true``; docs/volcano-semantics.md#drf).

The tree: root -> path nodes from each queue's ``volcano.sh/hierarchy`` annotation (weights from
``volcano.sh/hierarchy-weights``, < 1 clamped to 1; a queue without them sits at
``root/<queue>`` with weight 1) -> leaves = jobs (weight 1, request = the job's total request).
A leaf is saturated when, for some resource, allocated >= request (both non-zero), or it requests
a resource the cluster has fully allocated. Bottom-up, with m = the minimum dominant share among
non-empty, non-saturated children: allocated = Σ over non-empty children of (child.allocated if
saturated else child.allocated x m / child.share); saturated iff every child is. QueueOrder
compares the queues' paths level by level: non-saturated first, then smaller share / weight.
Reclaimable: a candidate is a victim iff, after moving its resources to the reclaimer, the
reclaimer's queue still orders strictly before the reclaimee's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from batch.model.info import JobInfo, QueueInfo, TaskInfo
from batch.model.resources import IntVec
from batch.scheduler.framework.session import Session
from batch.scheduler.framework.votes import PERMIT

F = npt.NDArray[np.float64]
HIERARCHY = "volcano.sh/hierarchy"
WEIGHTS = "volcano.sh/hierarchy-weights"


@dataclass(slots=True, eq=False)
class HNode:
    name: str
    weight: float
    children: dict[str, HNode] = field(default_factory=dict)
    job: JobInfo | None = None
    allocated: F = field(default_factory=lambda: np.zeros(0))
    share: float = 0.0
    saturated: bool = False


def queue_path(q: QueueInfo) -> list[tuple[str, float]]:
    path = q.annotations.get(HIERARCHY, "")
    weights = q.annotations.get(WEIGHTS, "")
    if not path:
        return [("root", 1.0), (q.name, 1.0)]
    names = [p for p in path.split("/") if p]
    ws = [w for w in weights.split("/") if w] if weights else []
    if names[0] != "root":
        names = ["root", *names]
        ws = ["1", *ws] if ws else ws
    out: list[tuple[str, float]] = []
    for i, n in enumerate(names):
        try:
            w = float(ws[i]) if i < len(ws) else 1.0
        except ValueError:
            w = 1.0
        out.append((n, max(w, 1.0)))
    return out


class HierarchicalDrf:
    def __init__(self, ssn: Session, total: IntVec, dims: npt.NDArray[np.intp]) -> None:
        self.ssn = ssn
        self.total = total.astype(np.float64)
        self.dims = dims
        self.paths = {name: queue_path(q) for name, q in ssn.queues.items()}
        self._keys: dict[str, tuple[Any, ...]] | None = None

    def _share(self, v: F) -> float:
        if len(self.dims) == 0:
            return 0.0
        return float((v[self.dims] / self.total[self.dims]).max())

    def build(self, override: dict[str, F] | None = None) -> dict[str, tuple[Any, ...]]:
        ssn = self.ssn
        root = HNode("root", 1.0)
        cluster_alloc = np.zeros_like(self.total)
        allocs: dict[str, F] = {}
        for job in ssn.jobs.values():
            a = job.allocated.astype(np.float64)
            if override and job.uid in override:
                a = override[job.uid]
            allocs[job.uid] = a
            cluster_alloc += a
        demanding = cluster_alloc < self.total
        for job in ssn.jobs.values():
            node = root
            for name, w in self.paths.get(job.queue, [("root", 1.0), (job.queue, 1.0)])[1:]:
                child = node.children.get(name)
                if child is None:
                    child = node.children[name] = HNode(name, w)
                node = child
            leaf = HNode(job.uid, 1.0, job=job)
            leaf.allocated = allocs[job.uid]
            req = job.total_req.astype(np.float64)
            leaf.share = self._share(leaf.allocated)
            dims = self.dims
            sat = bool(
                np.any(
                    (leaf.allocated[dims] >= req[dims])
                    & (req[dims] > 0)
                    & (leaf.allocated[dims] > 0)
                )
            )
            sat = sat or bool(np.any((req[dims] > 0) & ~demanding[dims]))
            leaf.saturated = sat
            node.children[job.uid] = leaf
        self._update(root)
        keys: dict[str, tuple[Any, ...]] = {}
        for qname, path in self.paths.items():
            node = root
            key: list[tuple[int, float]] = []
            for name, _ in path[1:]:
                nxt = node.children.get(name)
                if nxt is None:
                    break
                node = nxt
                key.append((1 if node.saturated else 0, node.share / node.weight))
            keys[qname] = tuple(key)
        return keys

    def _update(self, node: HNode) -> None:
        if node.job is not None:
            return
        for c in node.children.values():
            self._update(c)
        kids = [c for c in node.children.values() if c.allocated.any()]
        open_kids = [c for c in kids if not c.saturated and c.share > 0]
        m = min((c.share for c in open_kids), default=0.0)
        total = np.zeros_like(self.total)
        for c in kids:
            if c.saturated or c.share == 0:
                total += c.allocated
            else:
                total += c.allocated * (m / c.share)
        node.allocated = total
        node.share = self._share(total)
        node.saturated = bool(node.children) and all(c.saturated for c in node.children.values())

    def keys(self) -> dict[str, tuple[Any, ...]]:
        if self._keys is None:
            self._keys = self.build()
        return self._keys

    def register(self) -> None:
        ssn = self.ssn

        def dirty(_: TaskInfo) -> None:
            self._keys = None

        ssn.hooks.add_event_handler(dirty, dirty)
        ssn.hooks.add_queue_order_key(lambda q: self.keys().get(q.name, ()))

        def reclaimable(
            reclaimer: TaskInfo, candidates: list[TaskInfo]
        ) -> tuple[list[TaskInfo], int]:
            rjob = ssn.jobs.get(reclaimer.job_id or "")
            if rjob is None:
                return [], PERMIT
            victims: list[TaskInfo] = []
            for t in candidates:
                vjob = ssn.jobs.get(t.job_id or "")
                if vjob is None:
                    continue
                override = {
                    rjob.uid: (rjob.allocated + reclaimer.req).astype(np.float64),
                    vjob.uid: (vjob.allocated - t.req).astype(np.float64),
                }
                keys = self.build(override)
                if keys.get(rjob.queue, ()) < keys.get(vjob.queue, ()):
                    victims.append(t)
            return victims, PERMIT

        ssn.hooks.add_reclaimable_fn(reclaimable)
