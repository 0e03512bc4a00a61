"""capacity: Volcano's capacity plugin — explicit deserved shares
(docs/volcano-semantics.md#capacity).

Flat mode: a queue's deserved is ``spec.deserved`` (min realCapability, max guarantee), its
realCapability as in proportion (total - Σ guarantees + own guarantee, min capability). Share =
max allocated_r / deserved_r over deserved's resources; a queue without deserved has share 1.
QueueOrder: priority, then share (queues with deserved first on ties). Allocatable: queue Open
and allocated + task <= realCapability on the requested resources (capability, not deserved).
Preemptive: that, plus one requested resource where allocated + task <= deserved.
JobEnqueueable: minResources + allocated + inqueue - elastic <= realCapability, for the queue and
every ancestor. Reclaimable: a victim must keep its queue at or above its guarantee, and either use
no resource of its queue's deserved or come from a queue above deserved on one it uses. No
Overused callback.

Hierarchical mode (``enableHierarchy: true``, ``spec.parent``): jobs only in leaf queues (a job in
a non-leaf queue makes the plugin refuse the whole session); root capability defaults to
unlimited and root deserved/guarantee to the sum of its children; children inherit missing
capability from the parent; child realCapability = parent realCapability - Σ children's
guarantees + own guarantee, min own capability; allocation and enqueue checks walk up to root;
QueueOrder compares the ancestors just below the common ancestor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from batch.model.info import JobInfo, QueueInfo, TaskInfo
from batch.model.parse import ROOT_QUEUE
from batch.model.resources import IntVec
from batch.scheduler.framework.decisions import PendingReason
from batch.scheduler.framework.queue_tree import parent_of
from batch.scheduler.framework.registry import Plugin
from batch.scheduler.framework.session import Session
from batch.scheduler.framework.shares import INF, TOL, capability_vec, publish_shares, vec_of
from batch.scheduler.framework.votes import PERMIT, REJECT

F = npt.NDArray[np.float64]


@dataclass(slots=True, eq=False)
class CapAttr:
    queue: QueueInfo
    guarantee: F
    capability: F
    deserved: F
    has_deserved: bool
    real_capability: F = field(default_factory=lambda: np.zeros(0))
    allocated: F = field(default_factory=lambda: np.zeros(0))
    inqueue: F = field(default_factory=lambda: np.zeros(0))
    elastic: F = field(default_factory=lambda: np.zeros(0))
    parent: CapAttr | None = None
    children: list[CapAttr] = field(default_factory=list)

    def share(self) -> float:
        if not self.has_deserved:
            return 1.0
        d = self.deserved[1:]
        present = d >= TOL
        if not present.any():
            return 1.0
        return float((self.allocated[1:][present] / d[present]).max())

    def chain(self) -> list[CapAttr]:
        out: list[CapAttr] = []
        node: CapAttr | None = self
        while node is not None:
            out.append(node)
            node = node.parent
        return out


def _cluster_total(ssn: Session) -> F:
    """The cluster's resources as floats, pods (dimension 0) left out."""
    total = ssn.total_resource.astype(np.float64)
    total[0] = 0.0
    return total


def _new_attrs(ssn: Session, zero: F) -> dict[str, CapAttr]:
    """One CapAttr per queue, with its spec's guarantee, capability and deserved."""
    return {
        name: CapAttr(
            queue=q,
            guarantee=vec_of(ssn, q.guarantee),
            capability=capability_vec(ssn, q),
            deserved=vec_of(ssn, q.deserved),
            has_deserved=bool(q.deserved),
            allocated=zero.copy(),
            inqueue=zero.copy(),
            elastic=zero.copy(),
        )
        for name, q in ssn.queues.items()
    }


def _link_tree(attrs: dict[str, CapAttr]) -> None:
    """Hang every queue under its ``spec.parent`` (root when none)."""
    for a in attrs.values():
        name = parent_of(a.queue)
        parent = attrs.get(name) if name is not None else None
        if parent is not None and parent is not a:
            a.parent = parent
            parent.children.append(a)


def _non_leaf_job(ssn: Session, attrs: dict[str, CapAttr]) -> str:
    """Why the plugin refuses the session: the first job in a queue with children ("" if none)."""
    for job in ssn.jobs.values():
        a = attrs.get(job.queue)
        if a is not None and a.children:
            return f"job {job.uid} is in non-leaf queue {job.queue!r}"
    return ""


def _fill_root(root: CapAttr, total: F) -> None:
    """Root deserved/guarantee default to the sum of its children (capability unlimited)."""
    if root.children:
        if not root.has_deserved:
            root.deserved = np.sum([c.deserved for c in root.children], axis=0)
            root.has_deserved = True
        if not root.queue.guarantee:
            root.guarantee = np.sum([c.guarantee for c in root.children], axis=0)
    if not root.queue.capability:
        root.capability = np.full_like(total, INF)


def _descend(parent: CapAttr) -> None:
    """Children's realCapability from their parent's, recursively."""
    sum_g = np.zeros_like(parent.real_capability)
    for c in parent.children:
        sum_g += c.guarantee
    for c in parent.children:
        # missing capability dims are inherited from the parent
        cap = np.where(np.isinf(c.capability), parent.capability, c.capability)
        c.capability = cap
        real = np.maximum(parent.real_capability - sum_g, 0) + c.guarantee
        c.real_capability = np.minimum(real, cap)
        _descend(c)


def _tree_real_capability(attrs: dict[str, CapAttr], total: F) -> None:
    """Hierarchical mode: root from the cluster, then down the tree; orphans from the cluster."""
    root = attrs.get(ROOT_QUEUE)
    if root is not None:
        _fill_root(root, total)
        root.real_capability = np.minimum(total, root.capability)
        _descend(root)
    for a in attrs.values():
        if a.parent is None and a.queue.name != ROOT_QUEUE:
            a.real_capability = np.minimum(total, a.capability)


def _flat_real_capability(attrs: dict[str, CapAttr], total: F) -> None:
    """Flat mode: total - Σ guarantees + own guarantee, at most the queue's capability."""
    total_guarantee = np.zeros_like(total)
    for a in attrs.values():
        total_guarantee += a.guarantee
    for a in attrs.values():
        real = np.maximum(total - total_guarantee, 0) + a.guarantee
        a.real_capability = np.minimum(real, a.capability)


def _clamp_deserved(attrs: dict[str, CapAttr]) -> None:
    """deserved = min(deserved, realCapability), at least guarantee; no pods dimension."""
    for a in attrs.values():
        a.deserved = np.maximum(np.minimum(a.deserved, a.real_capability), a.guarantee)
        a.deserved[0] = 0.0


def _add_jobs(ssn: Session, attrs: dict[str, CapAttr], zero: F, *, hierarchy: bool) -> None:
    """Each job's allocated, inqueue and elastic resources, on its queue (and its ancestors)."""
    for job in ssn.jobs.values():
        qa = attrs.get(job.queue)
        if qa is None:
            continue
        ja = job.allocated.astype(np.float64)
        ja[0] = 0.0
        mr = job.min_resources.astype(np.float64) if job.min_resources is not None else zero
        inqueue = job.min_resources is not None and job.phase == "Inqueue"
        for node in qa.chain() if hierarchy else [qa]:
            node.allocated += ja
            if inqueue:
                node.inqueue += np.maximum(np.maximum(mr - ja, 0) - job.gated_req, 0)
            node.elastic += np.maximum(ja - mr, 0)


def _dims_of(req: IntVec) -> npt.NDArray[np.intp]:
    """The requested resources, pods left out."""
    return np.flatnonzero(req[1:] > 0) + 1


class _Hooks:
    """The plugin's callbacks over one session's CapAttrs."""

    def __init__(
        self, ssn: Session, attrs: dict[str, CapAttr], *, hierarchy: bool, refuse: str
    ) -> None:
        self.ssn = ssn
        self.attrs = attrs
        self.hierarchy = hierarchy
        self.refuse = refuse

    def register(self) -> None:
        hooks = self.ssn.hooks
        hooks.add_deserved_fn(self.deserved)
        hooks.add_queue_order_key(self.order_key)
        under_capability = self.under_capability
        hooks.add_allocatable_fn(lambda q, t: under_capability(q, t.req))
        hooks.add_preemptive_fn(self.preemptive)
        hooks.add_job_enqueueable_fn(self.enqueueable)
        hooks.add_job_enqueued_fn(self.enqueued)
        hooks.add_reclaimable_fn(self.reclaimable)
        hooks.add_event_handler(self.on_alloc, self.on_dealloc)

    def deserved(self, queue: str) -> F | None:
        a = self.attrs.get(queue)
        return a.deserved if a is not None else None

    def chain(self, q: QueueInfo) -> list[CapAttr]:
        a = self.attrs.get(q.name)
        if a is None:
            return []
        return a.chain() if self.hierarchy else [a]

    def order_key(self, q: QueueInfo) -> tuple[object, ...]:
        a = self.attrs.get(q.name)
        if a is None:
            return ()
        if not self.hierarchy:
            return (-q.priority, a.share(), 0 if a.has_deserved else 1)
        path = list(reversed(a.chain()))[1:]  # below root
        return tuple((-n.queue.priority, n.share(), n.queue.name) for n in path)

    def under_capability(self, q: QueueInfo, req: IntVec) -> bool:
        if self.refuse or not q.is_open():
            return False
        dims = _dims_of(req)
        return all(
            bool((n.allocated[dims] + req[dims] <= n.real_capability[dims] + TOL).all())
            for n in self.chain(q)
        )

    def preemptive(self, q: QueueInfo, tasks: Sequence[TaskInfo]) -> bool:
        req = self.ssn.resources.zeros()
        for t in tasks:
            req = req + t.req
        if not self.under_capability(q, req):
            return False
        a = self.attrs[q.name]
        dims = _dims_of(req)
        return bool((a.allocated[dims] + req[dims] <= a.deserved[dims] + TOL).any())

    def enqueueable(self, job: JobInfo) -> int:
        ssn = self.ssn
        q = ssn.queues[job.queue]
        if self.refuse:
            ssn.set_reason(PendingReason(job.uid, "NotEnqueued", f"capacity: {self.refuse}"))
            return REJECT
        if not q.is_open():
            ssn.set_reason(PendingReason(job.uid, "QueueClosed", f"queue {q.name!r} is {q.state}"))
            return REJECT
        if job.min_resources is None:
            return PERMIT
        full = self._over_capability(q, job.min_resources)
        if full is None:
            return PERMIT
        ssn.event(job, "Warning", "Unschedulable", "queue resource quota insufficient")
        ssn.set_reason(
            PendingReason(
                job.uid,
                "OverCapability",
                "queue resource quota insufficient: queue "
                f"{full.queue.name!r} cannot hold the job's minResources",
                details={"rejected_by": "capacity"},
            )
        )
        return REJECT

    def _over_capability(self, q: QueueInfo, min_resources: IntVec) -> CapAttr | None:
        """The first queue of the chain where minResources + allocated + inqueue - elastic
        exceeds realCapability on a requested resource."""
        mr = min_resources.astype(np.float64)
        dims = _dims_of(min_resources)
        for n in self.chain(q):
            want = mr + n.allocated + n.inqueue - n.elastic
            if not bool((want[dims] <= n.real_capability[dims] + TOL).all()):
                return n
        return None

    def enqueued(self, job: JobInfo) -> None:
        if job.min_resources is None:
            return
        add = np.maximum(job.min_resources - job.gated_req, 0).astype(np.float64)
        add[0] = 0.0
        for n in self.chain(self.ssn.queues[job.queue]):
            n.inqueue = n.inqueue + add

    def reclaimable(self, _: TaskInfo, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
        """Victims that keep their queue at its guarantee and either use none of its deserved
        or come from a queue above deserved on a resource they use (each pick counted)."""
        copies: dict[str, F] = {}
        victims: list[TaskInfo] = []
        for t in candidates:
            job = self.ssn.jobs.get(t.job_id or "")
            a = self.attrs.get(job.queue) if job is not None else None
            if a is None:
                continue
            alloc = copies.get(a.queue.name)
            if alloc is None:
                alloc = a.allocated.copy()
            after = alloc - t.req
            dims = _dims_of(t.req)
            if not bool((after[dims] + TOL >= a.guarantee[dims]).all()):
                continue
            uses_deserved = bool((a.deserved[dims] >= TOL).any())
            above = bool((alloc[dims] > a.deserved[dims] + TOL).any())
            if not uses_deserved or above:
                victims.append(t)
                copies[a.queue.name] = after
        return victims, PERMIT

    def on_alloc(self, task: TaskInfo) -> None:
        job = self.ssn.jobs.get(task.job_id or "")
        if job is None:
            return
        for n in self.chain(self.ssn.queues[job.queue]):
            np.add(n.allocated, task.req, out=n.allocated)
            n.allocated[0] = 0.0

    def on_dealloc(self, task: TaskInfo) -> None:
        job = self.ssn.jobs.get(task.job_id or "")
        if job is None:
            return
        for n in self.chain(self.ssn.queues[job.queue]):
            np.subtract(n.allocated, task.req, out=n.allocated)
            n.allocated[0] = 0.0


class CapacityPlugin(Plugin):
    name = "capacity"
    ARGUMENTS = ()

    def on_session_open(self, ssn: Session) -> None:
        option = self.option
        hierarchy = bool(option is not None and option.hierarchy)
        total = _cluster_total(ssn)
        zero = np.zeros_like(total)
        attrs = _new_attrs(ssn, zero)
        self.refuse = ""
        if hierarchy:
            _link_tree(attrs)
            self.refuse = _non_leaf_job(ssn, attrs)
            _tree_real_capability(attrs, total)
        else:
            _flat_real_capability(attrs, total)
        _clamp_deserved(attrs)
        _add_jobs(ssn, attrs, zero, hierarchy=hierarchy)
        self.attrs = attrs
        self.hierarchy = hierarchy
        _Hooks(ssn, attrs, hierarchy=hierarchy, refuse=self.refuse).register()

    def on_session_close(self, ssn: Session) -> None:
        publish_shares(ssn, self.attrs)
