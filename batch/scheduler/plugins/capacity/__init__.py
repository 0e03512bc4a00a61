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


class CapacityPlugin(Plugin):
    name = "capacity"

    def on_session_open(self, ssn: Session) -> None:
        option = self.option
        hierarchy = bool(option is not None and option.hierarchy)
        total = ssn.total_resource.astype(np.float64)
        total[0] = 0.0
        zero = np.zeros_like(total)
        attrs: dict[str, CapAttr] = {}
        for name, q in ssn.queues.items():
            attrs[name] = CapAttr(
                queue=q,
                guarantee=vec_of(ssn, q.guarantee),
                capability=capability_vec(ssn, q),
                deserved=vec_of(ssn, q.deserved),
                has_deserved=bool(q.deserved),
                allocated=zero.copy(),
                inqueue=zero.copy(),
                elastic=zero.copy(),
            )
        self.refuse = ""
        if hierarchy:
            for name, a in attrs.items():
                if name == ROOT_QUEUE:
                    continue
                parent = attrs.get(a.queue.parent or ROOT_QUEUE)
                if parent is not None and parent is not a:
                    a.parent = parent
                    parent.children.append(a)
            for job in ssn.jobs.values():
                ja_ = attrs.get(job.queue)
                if ja_ is not None and ja_.children:
                    self.refuse = f"job {job.uid} is in non-leaf queue {job.queue!r}"
                    break
            root = attrs.get(ROOT_QUEUE)
            if root is not None:
                self._fill_root(root, total)
                root.real_capability = np.minimum(total, root.capability)
                self._descend(root)
            for a in attrs.values():
                if a.parent is None and a.queue.name != ROOT_QUEUE:
                    a.real_capability = np.minimum(total, a.capability)
        else:
            total_guarantee = zero.copy()
            for a in attrs.values():
                total_guarantee += a.guarantee
            for a in attrs.values():
                real = np.maximum(total - total_guarantee, 0) + a.guarantee
                a.real_capability = np.minimum(real, a.capability)
        for a in attrs.values():
            a.deserved = np.maximum(np.minimum(a.deserved, a.real_capability), a.guarantee)
            a.deserved[0] = 0.0
        for job in ssn.jobs.values():
            qa = attrs.get(job.queue)
            if qa is None:
                continue
            ja = job.allocated.astype(np.float64)
            ja[0] = 0.0
            mr = job.min_resources.astype(np.float64) if job.min_resources is not None else zero
            for node in qa.chain() if hierarchy else [qa]:
                node.allocated += ja
                if job.min_resources is not None and job.phase == "Inqueue":
                    node.inqueue += np.maximum(np.maximum(mr - ja, 0) - job.gated_req, 0)
                node.elastic += np.maximum(ja - mr, 0)
        self.attrs = attrs
        self.hierarchy = hierarchy

        def deserved(queue: str) -> npt.NDArray[np.float64] | None:
            a = attrs.get(queue)
            return a.deserved if a is not None else None

        ssn.hooks.add_deserved_fn(deserved)

        def chain(q: QueueInfo) -> list[CapAttr]:
            a = attrs.get(q.name)
            if a is None:
                return []
            return a.chain() if hierarchy else [a]

        def order_key(q: QueueInfo) -> tuple[object, ...]:
            a = attrs.get(q.name)
            if a is None:
                return ()
            if not hierarchy:
                return (-q.priority, a.share(), 0 if a.has_deserved else 1)
            path = list(reversed(a.chain()))[1:]  # below root
            return tuple((-n.queue.priority, n.share(), n.queue.name) for n in path)

        ssn.hooks.add_queue_order_key(order_key)

        def dims_of(req: IntVec) -> npt.NDArray[np.intp]:
            return np.flatnonzero(req[1:] > 0) + 1

        def under_capability(q: QueueInfo, req: IntVec) -> bool:
            if self.refuse or not q.is_open():
                return False
            dims = dims_of(req)
            return all(
                bool((n.allocated[dims] + req[dims] <= n.real_capability[dims] + TOL).all())
                for n in chain(q)
            )

        ssn.hooks.add_allocatable_fn(lambda q, t: under_capability(q, t.req))

        def preemptive(q: QueueInfo, tasks: Sequence[TaskInfo]) -> bool:
            req = ssn.resources.zeros()
            for t in tasks:
                req = req + t.req
            if not under_capability(q, req):
                return False
            a = attrs[q.name]
            dims = dims_of(req)
            return bool((a.allocated[dims] + req[dims] <= a.deserved[dims] + TOL).any())

        ssn.hooks.add_preemptive_fn(preemptive)

        def enqueueable(job: JobInfo) -> int:
            q = ssn.queues[job.queue]
            if self.refuse:
                ssn.set_reason(PendingReason(job.uid, "NotEnqueued", f"capacity: {self.refuse}"))
                return REJECT
            if not q.is_open():
                ssn.set_reason(
                    PendingReason(job.uid, "QueueClosed", f"queue {q.name!r} is {q.state}")
                )
                return REJECT
            if job.min_resources is None:
                return PERMIT
            mr = job.min_resources.astype(np.float64)
            dims = dims_of(job.min_resources)
            for n in chain(q):
                want = mr + n.allocated + n.inqueue - n.elastic
                if not bool((want[dims] <= n.real_capability[dims] + TOL).all()):
                    ssn.event(job, "Warning", "Unschedulable", "queue resource quota insufficient")
                    ssn.set_reason(
                        PendingReason(
                            job.uid,
                            "OverCapability",
                            "queue resource quota insufficient: queue "
                            f"{n.queue.name!r} cannot hold the job's minResources",
                            details={"rejected_by": "capacity"},
                        )
                    )
                    return REJECT
            return PERMIT

        ssn.hooks.add_job_enqueueable_fn(enqueueable)

        def enqueued(job: JobInfo) -> None:
            if job.min_resources is None:
                return
            add = np.maximum(job.min_resources - job.gated_req, 0).astype(np.float64)
            add[0] = 0.0
            for n in chain(ssn.queues[job.queue]):
                n.inqueue = n.inqueue + add

        ssn.hooks.add_job_enqueued_fn(enqueued)

        def reclaimable(_: TaskInfo, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            copies: dict[str, F] = {}
            victims: list[TaskInfo] = []
            for t in candidates:
                job = ssn.jobs.get(t.job_id or "")
                a = attrs.get(job.queue) if job is not None else None
                if a is None:
                    continue
                alloc = copies.get(a.queue.name)
                if alloc is None:
                    alloc = a.allocated.copy()
                after = alloc - t.req
                dims = dims_of(t.req)
                if not bool((after[dims] + TOL >= a.guarantee[dims]).all()):
                    continue
                uses_deserved = bool((a.deserved[dims] >= TOL).any())
                above = bool((alloc[dims] > a.deserved[dims] + TOL).any())
                if not uses_deserved or above:
                    victims.append(t)
                    copies[a.queue.name] = after
            return victims, PERMIT

        ssn.hooks.add_reclaimable_fn(reclaimable)

        def on_alloc(task: TaskInfo) -> None:
            job = ssn.jobs.get(task.job_id or "")
            if job is None:
                return
            for n in chain(ssn.queues[job.queue]):
                np.add(n.allocated, task.req, out=n.allocated)
                n.allocated[0] = 0.0

        def on_dealloc(task: TaskInfo) -> None:
            job = ssn.jobs.get(task.job_id or "")
            if job is None:
                return
            for n in chain(ssn.queues[job.queue]):
                np.subtract(n.allocated, task.req, out=n.allocated)
                n.allocated[0] = 0.0

        ssn.hooks.add_event_handler(on_alloc, on_dealloc)

    def on_session_close(self, ssn: Session) -> None:
        publish_shares(ssn, self.attrs)

    def _fill_root(self, root: CapAttr, total: F) -> None:
        """Root deserved/guarantee default to the sum of its children (capability unlimited)."""
        if root.children:
            if not root.has_deserved:
                root.deserved = np.sum([c.deserved for c in root.children], axis=0)
                root.has_deserved = True
            if not root.queue.guarantee:
                root.guarantee = np.sum([c.guarantee for c in root.children], axis=0)
        if not root.queue.capability:
            root.capability = np.full_like(total, INF)

    def _descend(self, parent: CapAttr) -> None:
        sum_g = np.zeros_like(parent.real_capability)
        for c in parent.children:
            sum_g += c.guarantee
        for c in parent.children:
            # missing capability dims are inherited from the parent
            cap = np.where(np.isinf(c.capability), parent.capability, c.capability)
            c.capability = cap
            real = np.maximum(parent.real_capability - sum_g, 0) + c.guarantee
            c.real_capability = np.minimum(real, cap)
            self._descend(c)
