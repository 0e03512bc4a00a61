"""proportion's per-queue figures of a session: what each job adds to its queue's sums
(``queue_contribution``), each queue's vectors from its spec (``QueueVectors``), the sums as one
matrix kept across sessions (``QueueRows``) and the ``QueueAttr`` of every queue with jobs
(``queue_attrs``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from batch.model.info import JobInfo
from batch.model.resources import IntVec
from batch.model.status import ALLOCATED_STATUS
from batch.scheduler.framework.aggregate import JobSums
from batch.scheduler.framework.feasibility import inadmissible_jobs
from batch.scheduler.framework.queue_tree import resolved_parents
from batch.scheduler.framework.session import Session
from batch.scheduler.framework.shares import F, capability_vec, vec_of

from .attrs import QueueAttr
from .tree import QueueTree

#: fill_rows results kept per request matrix (``QueueVectors.fills``), at most this many
FILLS_KEPT = 64

ROWS = 5  # allocated, pending requests, inqueue, elastic, unstarted demand

#: a QueueAttr's deserved share until the water-filling sets it (one array for all of them)
_NO_SHARE = np.zeros(0)
_NO_SHARE.flags.writeable = False


def queue_contribution(job: JobInfo) -> IntVec:
    """What ``job`` adds to its queue's figures (rows: allocated, pending requests, the inqueue
    part of minResources, the elastic part of allocated, as
    docs/volcano-semantics.md#proportion-inputs defines them; and, for fair shares, the part
    of a Pending or Inqueue gang's minResources that neither its allocated nor its pending pods
    cover — a gang whose pods the controller has not created yet asks for nothing in Volcano).
    """
    ja = job.allocated
    out = np.zeros((ROWS, len(ja)), dtype=np.int64)
    out[0] = ja
    out[1] = job.pending_req
    mr = job.min_resources
    if mr is None:
        out[3] = ja  # no minResources: all of allocated is elastic; no inqueue part
        return out
    if job.phase in ("Pending", "Inqueue"):
        out[4] = np.maximum(mr - ja - job.pending_req, 0)
    if job.phase == "Inqueue" or (
        job.phase == "Running" and job.count(*ALLOCATED_STATUS) >= job.min_available
    ):
        out[2] = np.maximum(np.maximum(mr - ja, 0) - job.gated_req, 0)
    out[3] = np.maximum(ja - mr, 0)
    return out


def admitted_gap(job: JobInfo, allocated: IntVec) -> IntVec:
    """The inqueue part of an admitted ``job`` (Inqueue, or Running) were it to hold
    ``allocated``: what its minResources still reserve beyond its allocated (gated pods left
    out)."""
    mr = job.min_resources
    if mr is None or job.phase not in ("Inqueue", "Running"):
        return np.zeros_like(allocated)
    gap: IntVec = np.maximum(np.maximum(mr - allocated, 0) - job.gated_req, 0)
    return gap


class QueueVectors:
    """Each queue's guarantee, capability and real capability, which depend only on the
    queues' specs, the resource names and the cluster's total: kept across sessions
    (``ClusterCache.derived``) until one of those changes, read-only; the queue tree unless
    every queue hangs under root (``tree``, None when flat) with the same vectors for fair
    shares down it (``tree_vectors``: the real capability at most every ancestor's
    capability); and the water-filling results for the same inputs (``kept_fill``)."""

    __slots__ = ("fills", "key", "orders", "queues", "tree", "tree_vectors", "vectors")

    KEY = "proportion-queues"

    def __init__(self, ssn: Session, total: F, key: tuple[Any, ...]) -> None:
        self.key = key
        self.queues = tuple(ssn.queues.values())  # keeps the ids in ``key`` from reuse
        self.fills: dict[Any, F] = {}
        self.orders: dict[tuple[str, ...], tuple[str, ...]] = {}
        total_guarantee = np.zeros_like(total)
        for q in self.queues:
            total_guarantee += vec_of(ssn, q.guarantee)
        free = np.maximum(total - total_guarantee, 0)
        self.vectors: dict[str, tuple[F, F, F]] = {}
        for q in self.queues:
            guarantee = vec_of(ssn, q.guarantee)
            cap = capability_vec(ssn, q)
            real = np.minimum(free + guarantee, cap)
            for v in (guarantee, cap, real):
                v.flags.writeable = False
            self.vectors[q.name] = (guarantee, cap, real)
        parents = resolved_parents(ssn.queues)
        self.tree: QueueTree | None = None
        self.tree_vectors: dict[str, tuple[F, F, F]] | None = None
        if not QueueTree.flat(parents):
            self.tree_vectors = _capped_by_ancestors(self.vectors, parents)
            self.tree = QueueTree(parents, self._specs(self.tree_vectors))

    def _specs(self, vectors: dict[str, tuple[F, F, F]]) -> dict[str, QueueAttr]:
        """Every queue's figures from its spec alone (a queue with no jobs in a session takes
        part in the tree through them)."""
        out: dict[str, QueueAttr] = {}
        for q in self.queues:
            guarantee, cap, real = vectors[q.name]
            zero = np.zeros_like(guarantee)
            out[q.name] = QueueAttr(
                queue=q,
                weight=q.weight,
                guarantee=guarantee,
                capability=cap,
                real_capability=real,
                allocated=zero,
                request=zero,
                inqueue=zero,
                elastic=zero,
            )
        return out

    def for_mode(self, *, fair: bool) -> dict[str, tuple[F, F, F]]:
        """The vectors the session's queues take: down the tree with fair shares."""
        if fair and self.tree_vectors is not None:
            return self.tree_vectors
        return self.vectors

    def ordered(self, ssn: Session, names: Iterable[str]) -> tuple[str, ...]:
        """``names`` (of queues among ``queues``) oldest first, as last sorted for the same
        names in the same order."""
        key = tuple(names)
        got = self.orders.get(key)
        if got is None:
            if len(self.orders) >= FILLS_KEPT:
                self.orders.clear()
            got = self.orders[key] = tuple(sorted(key, key=lambda n: (ssn.queues[n].creation, n)))
        return got

    @classmethod
    def of(cls, ssn: Session, total: F) -> QueueVectors:
        key = (ssn.resources.version, total.tobytes(), tuple(map(id, ssn.queues.values())))
        kept = ssn.cache.derived.get(cls.KEY)
        if not isinstance(kept, cls) or kept.key != key:
            kept = ssn.cache.derived[cls.KEY] = cls(ssn, total, key)
        return kept


def _capped_by_ancestors(
    vectors: dict[str, tuple[F, F, F]], parents: dict[str, str]
) -> dict[str, tuple[F, F, F]]:
    """``vectors`` with each real capability at most every ancestor's capability (so no queue
    holds, borrowing or not, more than its parent may)."""
    out: dict[str, tuple[F, F, F]] = {}
    for name, (guarantee, cap, real) in vectors.items():
        capped = real
        parent = parents.get(name)
        while parent is not None and parent in vectors:
            capped = np.minimum(capped, vectors[parent][1])
            parent = parents.get(parent)
        capped.flags.writeable = False
        out[name] = (guarantee, cap, capped)
    return out


@dataclass(slots=True)
class QueueFigures:
    """The queues of a session with their figures (``queue_attrs``), oldest first, and their
    requests as a matrix with one row per queue, in that order."""

    attrs: dict[str, QueueAttr]
    request: F


def _sum_rows(names: Sequence[str], sums: JobSums) -> F:
    """The job sums of ``names`` as one float matrix (queue, row, resource), pods left out."""
    zero = np.zeros(sums.shape, dtype=np.int64)
    m = np.array([sums.sums.get(n, zero) for n in names], dtype=np.float64).reshape(
        (len(names), *sums.shape)
    )
    m[:, :, 0] = 0.0
    return m


class QueueRows:
    """The job sums of a session's queues as one float matrix (``_sum_rows``), kept across
    sessions (``ClusterCache.derived``) with the ``JobSums.stamps`` each row was converted at:
    a session converts again only the rows of queues whose sums changed since, and works on a
    copy (its handlers update the rows in place)."""

    __slots__ = ("names", "rows", "stamps", "sums")

    KEY = "proportion-rows"

    def __init__(self, sums: JobSums, names: tuple[str, ...]) -> None:
        self.sums = sums
        self.names = names
        self.rows = _sum_rows(list(names), sums)
        self.stamps = [sums.stamps.get(n, 0) for n in names]

    def current(self) -> F:
        """The rows as the sums stand now (a copy)."""
        sums, stamps, rows = self.sums, self.stamps, self.rows
        for i, name in enumerate(self.names):
            stamp = sums.stamps.get(name, 0)
            if stamp != stamps[i]:
                got = sums.sums.get(name)
                rows[i] = 0 if got is None else got
                rows[i, :, 0] = 0.0
                stamps[i] = stamp
        return rows.copy()

    @classmethod
    def of(cls, ssn: Session, sums: JobSums, names: tuple[str, ...]) -> F:
        """The session's copy of the rows of ``names`` (in that order) from ``sums``."""
        kept = ssn.cache.derived.get(cls.KEY)
        if not isinstance(kept, cls) or kept.sums is not sums or kept.names != names:
            kept = ssn.cache.derived[cls.KEY] = cls(sums, names)
        return kept.current()


def _leave_out(m: F, names: Sequence[str], jobs: Iterable[JobInfo]) -> None:
    """Take ``jobs`` (gangs that can never fit) out of their queues' rows of ``m``."""
    row = {n: i for i, n in enumerate(names)}
    for job in jobs:
        i = row.get(job.queue)
        if i is not None:
            c = queue_contribution(job).astype(np.float64)
            c[:, 0] = 0.0
            m[i] = np.maximum(m[i] - c, 0.0)


def queue_attrs(ssn: Session, kept: QueueVectors, *, fair: bool) -> QueueFigures:
    """Every queue with jobs in this session with its figures (the job sums kept across
    sessions, docs/volcano-semantics.md#proportion-inputs); with fair shares, its request is its
    demand (waiting gangs' unstarted part included, gangs that can never fit left out). All
    queues are converted at once; each QueueAttr's vectors are rows of this session's matrices
    (the session's handlers update them in place)."""
    vectors = kept.for_mode(fair=fair)
    sums = JobSums.of(ssn.cache, "proportion", (ROWS, ssn.resources.capacity))
    sums.refresh(ssn.jobs, queue_contribution, follow=ssn.skip_settled)
    names = kept.ordered(ssn, sums.counts)
    m = QueueRows.of(ssn, sums, names)
    if fair:
        never = inadmissible_jobs(ssn)
        _leave_out(m, names, (ssn.jobs[uid] for uid in never))
    allocated, pending, inqueue, elastic, unstarted = (m[:, r] for r in range(ROWS))
    request = allocated + pending + (unstarted if fair else 0.0)
    held = allocated + inqueue if fair else None
    if not ROW_VIEWS:
        return QueueFigures(_attrs_indexed(ssn, names, vectors, m, request, held), request)
    queues = ssn.queues
    attrs: dict[str, QueueAttr] = {}
    rows = zip(
        names, allocated, request, inqueue, elastic, names if held is None else held, strict=True
    )
    for name, al, rq, iq, el, hd in rows:  # each matrix's rows, as views
        q = queues[name]
        guarantee, cap, real = vectors[name]
        attrs[name] = QueueAttr(
            q,
            q.weight,
            guarantee,
            cap,
            real,
            al,
            rq,
            iq,
            el,
            _NO_SHARE,
            None if held is None else hd,
        )
    return QueueFigures(attrs, request)


#: ``queue_attrs`` takes each queue's vectors by iterating over the matrices' rows (False: by
#: indexing them one queue at a time; the same views)
ROW_VIEWS = True


def _attrs_indexed(
    ssn: Session,
    names: Sequence[str],
    vectors: dict[str, tuple[F, F, F]],
    m: F,
    request: F,
    held: F | None,
) -> dict[str, QueueAttr]:
    allocated, inqueue, elastic = m[:, 0], m[:, 2], m[:, 3]
    attrs: dict[str, QueueAttr] = {}
    for i, name in enumerate(names):
        q = ssn.queues[name]
        guarantee, cap, real = vectors[name]
        attrs[name] = QueueAttr(
            queue=q,
            weight=q.weight,
            guarantee=guarantee,
            capability=cap,
            real_capability=real,
            allocated=allocated[i],
            request=request[i],
            inqueue=inqueue[i],
            elastic=elastic[i],
            deserved=_NO_SHARE,
            held=held[i] if held is not None else None,
        )
    return attrs
