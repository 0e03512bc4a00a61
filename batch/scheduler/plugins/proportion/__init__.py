"""proportion: Volcano's proportion plugin — weighted water-filling queue shares
(docs/volcano-semantics.md#proportion).

Deserved shares are computed exactly as Volcano does (float vectors, 0.1 tolerance) from queue
weight, capability, guarantee and the queues' requests; shares drive QueueOrder, Overused,
Allocatable, Preemptive, Reclaimable and the JobEnqueueable admission gate.

``fairShare: true`` (Tephra's default configuration, not Volcano's; the older name
``fairShareAtAdmission`` is accepted; docs/scheduler.md#the-fair-share-model): one share model
for every decision. A queue's demand is what it holds plus what its pods ask for plus the part
of its waiting gangs' minResources no pod asks for yet (a gang whose pods the controller has not
created asks for nothing in Volcano), leaving out gangs that can never fit
(framework/feasibility.py). The water-filling of the cluster over that demand, down the queue
tree (``spec.parent``; tree.py), is the queue's deserved share, and admission, QueueOrder
(what a queue holds *or was admitted to* over its share), Overused, Allocatable, the victim
rules, the overcommit budget (``held_beyond_share``) and the published metrics all read it.
Work beyond a queue's share runs only on room no other queue is owed, the queue left with the
lowest share first (borrowing.py); a gang that would take its queue past its share otherwise
is not admitted (``beyond_share``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from batch.model.info import JobInfo, QueueInfo, TaskInfo
from batch.model.resources import IntVec
from batch.model.status import TaskStatus
from batch.scheduler.framework.arguments import Arg, Arguments
from batch.scheduler.framework.decisions import PendingReason
from batch.scheduler.framework.hooks import EventHandler, Hooks
from batch.scheduler.framework.registry import Plugin
from batch.scheduler.framework.session import Session
from batch.scheduler.framework.shares import (
    TOL,
    F,
    describe_shares,
    le,
    le_on,
    nearer_on,
    positive_dims,
    publish_shares,
)
from batch.scheduler.framework.votes import PERMIT, REJECT

from . import deferred
from .attrs import QueueAttr, claimed_share, kept_share, within_deserved
from .borrowing import lend_borrowers, may_borrow
from .figures import FILLS_KEPT, QueueVectors, admitted_gap, queue_attrs
from .floatfill import fill_floats, specs, whole_weights
from .tree import QueueTree
from .usage import UsageFigure, usage_decay_of, usage_figures


def water_fill(
    attrs: Sequence[QueueAttr],
    total: F,
    fills: dict[Any, F] | None = None,
    request: F | None = None,
    tree: QueueTree | None = None,
) -> None:
    """The deserved-share loop of docs/volcano-semantics.md#proportion-water-filling (sets
    ``attr.deserved``); ``fills`` remembers results for ``kept_fill``; ``request``: the
    queues' requests as rows, when the caller has them (default: stacked from ``attrs``);
    ``tree``: fill down the queue tree (fair shares, tree.py) rather than flat."""
    if attrs:
        if request is None:
            request = np.stack([a.request for a in attrs])
        for a, d in zip(attrs, kept_fill(attrs, request, total, fills, tree), strict=True):
            a.deserved = d


def kept_fill(
    attrs: Sequence[QueueAttr],
    request: F,
    total: F,
    fills: dict[Any, F] | None,
    tree: QueueTree | None = None,
) -> F:
    """``fill_rows`` (down ``tree`` if given), answered from ``fills`` when the same queues
    asked for the same requests (``fills`` belongs to one set of queue specs and one cluster
    total: ``QueueVectors``)."""
    if fills is None:
        return _fill(attrs, request, total, tree)
    key = (tree is not None, tuple(a.queue.name for a in attrs), request.tobytes())
    got = fills.get(key)
    if got is None:
        if len(fills) >= FILLS_KEPT:
            fills.clear()
        got = fills[key] = _fill(attrs, request, total, tree)
    return got.copy()


def _fill(attrs: Sequence[QueueAttr], request: F, total: F, tree: QueueTree | None) -> F:
    if tree is None:
        return fill_rows(attrs, request, total)
    return tree.fill(attrs, request, total, fill_rows)


def fill_rows(attrs: Sequence[QueueAttr], request: F, total: F) -> F:
    """Water-filling of ``total`` over ``attrs`` for the given requests (one row per queue).

    Within a round every queue's step depends only on the round's ``remaining`` and weight sum,
    so a round is computed for all queues at once (one row per queue); the result is Volcano's
    queue-by-queue loop's. A guarantee is a floor, as in Volcano: a queue is raised to it
    inside the loop, even above its request, without taking it from what is left, so with
    guarantees the shares can add up to more than the cluster (guaranteed 8 of 9 GPUs, two
    other queues asking 1 each: 8 + 1 + 1).

    Up to ``FLOAT_FILL_MAX`` queues with whole-number weights, the same arithmetic runs on
    Python floats (floatfill.py; the same results bit for bit, cheaper on small matrices).
    """
    if len(attrs) <= FLOAT_FILL_MAX and whole_weights([a.weight for a in attrs]):
        return _fill_rows_floats(attrs, request, total)
    return _fill_rows_vectors(attrs, request, total)


#: ``fill_rows`` on Python floats (floatfill.py) for at most this many queues (0: never)
FLOAT_FILL_MAX = 64


def _fill_rows_floats(attrs: Sequence[QueueAttr], request: F, total: F) -> F:
    live = specs([a.real_capability for a in attrs], [a.guarantee for a in attrs]).live(
        total, request
    )
    deserved = np.zeros_like(request)
    if live.cols:
        deserved[:, live.at] = fill_floats(
            [float(a.weight) for a in attrs],
            live.cap,
            live.guarantee,
            request[:, live.cols].tolist(),
            live.total,
        )
    return deserved


def _fill_rows_vectors(attrs: Sequence[QueueAttr], request: F, total: F) -> F:
    weight = np.array([a.weight for a in attrs], dtype=np.float64)
    spec = specs([a.real_capability for a in attrs], [a.guarantee for a in attrs])
    cap, guarantee = spec.cap, spec.guarantee
    deserved = np.zeros_like(request)
    meet = np.zeros(len(attrs), dtype=bool)
    remaining = total.copy()
    remaining[0] = 0.0
    while True:
        rows = np.flatnonzero(~meet)
        w = weight[rows].sum()
        if w == 0:
            break
        old = deserved[rows]
        d = old + remaining * (weight[rows] / w)[:, None]
        d = np.minimum(d, cap[rows])
        d = np.minimum(d, request[rows])
        d = np.maximum(d, guarantee[rows])
        d[:, 0] = 0.0
        deserved[rows] = d
        satisfied = (request[rows, 1:] <= d[:, 1:] + TOL).all(axis=1)
        meet[rows[satisfied | (d == old).all(axis=1)]] = True
        increased = np.maximum(d - old, 0).sum(axis=0)
        decreased = np.maximum(old - d, 0).sum(axis=0)
        new_remaining = np.maximum(remaining + decreased - increased, 0)
        if bool((new_remaining[1:] < TOL).all()) or np.array_equal(new_remaining, remaining):
            break
        remaining = new_remaining
    return deserved


def beyond_share(
    ssn: Session, a: QueueAttr, mr: F, dims: npt.NDArray[np.intp], attrs: dict[str, QueueAttr]
) -> QueueAttr | None:
    """Fair share: would admitting minResources ``mr`` take the queue past its deserved share
    while another queue waits below its own or has a better claim on the room (``may_borrow``)?
    That queue (the first one, oldest first), or None."""
    if a.held is None or nearer_on(a.held, mr, a.deserved, dims):
        return None
    waiting = next((b for b in attrs.values() if b is not a and _below_share(b)), None)
    if waiting is None or may_borrow(ssn, a, mr, attrs):
        return None
    return waiting


def _below_share(b: QueueAttr) -> bool:
    return b.held is not None and bool((b.held[1:] + TOL < b.deserved[1:]).any())


def over_capability(
    ssn: Session, job: JobInfo, q: QueueInfo, excess: F, dims: npt.NDArray[np.intp]
) -> int:
    """Reject ``job``: its minResources do not fit the queue's real capability (``excess`` > 0
    on the resources short)."""
    ssn.event(job, "Warning", "Unschedulable", "queue resource quota insufficient")
    over = [ssn.resources.names[int(d)] for d in dims if excess[d] > TOL]
    ssn.set_reason(
        PendingReason(
            job.uid,
            "OverCapability",
            f"queue resource quota insufficient: queue {q.name!r} cannot hold the "
            f"job's minResources on {', '.join(over)}",
            details={"rejected_by": "proportion", "resources": over},
        )
    )
    return REJECT


def _register_queue_points(hooks: Hooks, p: ProportionPlugin) -> None:
    """QueueOrder, Overused and Allocatable (reading the open session's ``p.attrs``)."""

    def queue_key(q: QueueInfo) -> tuple[int, float]:
        a = p.attrs.get(q.name)
        return (-q.priority, a.order_share() if a is not None else 0.0)

    hooks.add_queue_order_key(queue_key)

    def overused(q: QueueInfo) -> bool:
        a = p.attrs.get(q.name)
        if a is None:
            return False
        if a._overused is None:
            a._overused = le(a.deserved, a.allocated)
        return a._overused

    hooks.add_overused_fn(overused)

    def allocatable(q: QueueInfo, t: TaskInfo) -> bool:
        attrs = p.attrs
        a = attrs.get(q.name)
        if a is None or not q.is_open():
            return False
        if within_deserved(p.dims_by_tid, t, a.allocated, a.deserved):
            return True
        job = p.ssn.jobs.get(t.job_id or "")
        if a.held is None or job is None:
            return False
        return nearer_with(a, job, t) or borrow_fits(p.ssn, a, job, t, attrs)

    hooks.add_allocatable_fn(allocatable)
    p.queue_fns = (queue_key, overused, allocatable)


def nearer_with(a: QueueAttr, job: JobInfo, task: TaskInfo) -> bool:
    """Fair share: does ``job``, with ``task`` placed, take its queue nearer its deserved share
    than the queue is without it (``nearer_on``: the job's minimum, or all it then holds),
    within the queue's capability?"""
    dims = np.flatnonzero(task.req[1:] > 0) + 1
    if not le_on(a.allocated + task.req, a.real_capability, dims):
        return False
    mine = job.allocated.astype(np.float64)
    if job.counts[TaskStatus.PIPELINED]:  # the evicting actions' dry runs pipeline
        for t in job.tasks.values():
            if t.status is TaskStatus.PIPELINED:
                mine += t.req
    need = mine + task.req
    if job.min_resources is not None:
        need = np.maximum(need, job.min_resources)
    return nearer_on(a.allocated - mine, need, a.deserved, dims)


def borrow_fits(
    ssn: Session, a: QueueAttr, job: JobInfo, task: TaskInfo, attrs: dict[str, QueueAttr]
) -> bool:
    """Fair share: the borrowing admission allows (``beyond_share``) holds when placing too: in
    allocate and backfill, an admitted job's task beyond its queue's share (within its
    capability) may be placed when the rest of the job's minimum (the task alone, above it) may
    borrow the room (``may_borrow``, against work that can be placed now). Evicting actions
    never borrow."""
    if ssn.action not in ("allocate", "backfill") or job.phase not in ("Inqueue", "Running"):
        return False
    dims = np.flatnonzero(task.req[1:] > 0) + 1
    if not le_on(a.allocated + task.req, a.real_capability, dims):
        return False
    mr = job.min_resources
    rest = np.maximum(mr - job.allocated, 0) if mr is not None else np.zeros_like(task.req)
    need = np.maximum(rest, task.req).astype(np.float64)
    return may_borrow(ssn, a, need, attrs, placing=True)


def _register_victim_points(hooks: Hooks, p: ProportionPlugin) -> None:
    """Preemptive, Reclaimable and the at-deserved rule of the evicting actions (reading the
    open session's ``p.attrs``)."""

    def preemptive(q: QueueInfo, tasks: Sequence[TaskInfo]) -> bool:
        ssn = p.ssn
        a = p.attrs.get(q.name)
        if a is None or not q.is_open():
            return False
        total_req = ssn.resources.zeros()
        for t in tasks:
            total_req = total_req + t.req
        dims = np.flatnonzero(total_req[1:] > 0) + 1
        claim = claimed_share(a)
        if bool((a.allocated[dims] + total_req[dims] <= claim[dims] + TOL).all()):
            return True
        # a whole gang may take its queue nearer its share past it (actionlib/gang_victims.py
        # then asks the plan to bring the queues it touches nearer their shares, too)
        fair = a.held is not None and ssn.action == "gangreclaim"
        return fair and nearer_on(a.allocated, total_req.astype(np.float64), claim, dims)

    hooks.add_preemptive_fn(preemptive)

    def reclaimable(_: TaskInfo, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
        ssn, attrs = p.ssn, p.attrs
        copies: dict[str, F] = {}
        victims: list[TaskInfo] = []
        for t in candidates:
            job = ssn.jobs.get(t.job_id or "")
            if job is None:
                continue
            a = attrs.get(job.queue)
            if a is None:
                continue
            alloc = copies.get(job.queue)
            if alloc is None:
                alloc = a.allocated.copy()
            if not le(alloc, kept_share(a)):
                alloc = alloc - t.req
                victims.append(t)
            copies[job.queue] = alloc
        return victims, PERMIT

    hooks.add_reclaimable_fn(reclaimable)

    def at_deserved(queue: str) -> bool:
        # reclaimable above takes victims only from a queue whose allocated is not <= deserved
        a = p.attrs.get(queue)
        return a is None or le(a.allocated, kept_share(a))

    hooks.add_queue_at_deserved_fn(at_deserved)
    hooks.add_victim_queue_floor_fn("reclaimable", at_deserved)


def _register_admission(hooks: Hooks, p: ProportionPlugin) -> None:
    """JobEnqueueable (the queue's real capability; with fair shares, its deserved share)
    and JobEnqueued (the admitted gang's minResources join the queue's inqueue), reading the
    open session's ``p.attrs``."""
    fair = p.fair

    def enqueueable(job: JobInfo) -> int:
        ssn, attrs = p.ssn, p.attrs
        q = ssn.queues[job.queue]
        a = attrs.get(job.queue)
        if not q.is_open():
            ssn.set_reason(PendingReason(job.uid, "QueueClosed", f"queue {q.name!r} is {q.state}"))
            return REJECT
        if job.min_resources is None or a is None:
            return PERMIT
        mr = job.min_resources.astype(np.float64)
        dims = positive_dims(mr)
        want = mr + a.allocated + a.inqueue - a.elastic
        if a.lent is not None:  # gangs it is not owed wait for room nobody is: none of its own
            want -= a.lent
        if not le_on(want, a.real_capability, dims):
            return over_capability(ssn, job, q, want - a.real_capability, dims)
        waiting = beyond_share(ssn, a, mr, dims, attrs) if fair else None
        if waiting is not None:
            ssn.set_reason(at_share(ssn, job, a, waiting, dims))
            return REJECT
        return PERMIT

    hooks.add_job_enqueueable_fn(enqueueable)

    def enqueued(job: JobInfo) -> None:
        a = p.attrs.get(job.queue)
        if a is None or job.min_resources is None:
            return
        add = np.maximum(job.min_resources - job.gated_req, 0).astype(np.float64)
        add[0] = 0.0
        a.inqueue = a.inqueue + add
        if a.held is not None:
            a.held = a.held + add
            a.changed()

    hooks.add_job_enqueued_fn(enqueued)
    if fair:
        hooks.add_held_beyond_share_fn(lambda job: held_beyond_share(p.attrs, job))


def at_share(
    ssn: Session, job: JobInfo, a: QueueAttr, waiting: QueueAttr, dims: npt.NDArray[np.intp]
) -> PendingReason:
    """Why a gang that would take its queue past its fair share waits: the queue's figures on
    the resources the gang asks for, and the queue below its own share that goes first."""

    def amounts(v: F) -> str:
        said = describe_shares(ssn, v, dims)
        return said or "nothing"

    return PendingReason(
        job.uid,
        "NotEnqueued",
        f"queue {a.queue.name!r} would pass its fair share: it holds or was admitted to "
        f"{amounts(a.held if a.held is not None else a.allocated)} of "
        f"{amounts(a.deserved)} deserved, and queue {waiting.queue.name!r} waits below its "
        "own share",
        details={"rejected_by": "proportion", "waiting_queue": waiting.queue.name},
    )


def held_beyond_share(attrs: dict[str, QueueAttr], job: JobInfo) -> IntVec | None:
    """Fair share: what of overcommit's budget ``job`` may count as free (None: nothing).
    Admitted gangs larger than their queue's share that wait unplaced (``lent``, any queue's)
    hold none of it: they wait for room nobody is owed. And when ``job``'s minResources take
    its own queue nearer its share (``nearer_on``), what the other queues hold beyond their
    deserved share and can give back: neither gangs admitted before a queue below its share
    arrived nor pods a reclaimable queue runs above its share may keep that queue out, since
    reclaim takes the latter back. (Of a queue that is not reclaimable, only admissions not yet
    started count.)"""
    a = attrs.get(job.queue)
    mr = job.min_resources
    if a is None or mr is None or a.held is None:
        return None
    want = mr.astype(np.float64)
    spare = np.zeros_like(want)
    for b in attrs.values():
        if b.lent is not None:
            spare += b.lent
    if nearer_on(a.held, want, a.deserved, positive_dims(want)):
        for b in attrs.values():
            if b is not a and b.held is not None:
                beyond = np.maximum(b.held - kept_share(b), 0.0)
                spare += beyond if b.queue.reclaimable else np.minimum(beyond, b.inqueue)
    spare[0] = 0.0
    return np.floor(spare).astype(np.int64) if spare.any() else None


def _register_handlers(ssn: Session, attrs: dict[str, QueueAttr]) -> EventHandler:
    """Follow in-session placements: the queue's allocated (and, fairly admitted, held)."""

    def on_alloc(task: TaskInfo) -> None:
        job = ssn.jobs.get(task.job_id or "")
        a = attrs.get(job.queue) if job is not None else None
        if a is not None and job is not None:
            np.add(a.allocated, task.req, out=a.allocated)
            a.allocated[0] = 0.0
            a.changed()
            if a.held is not None:  # the admitted part this task starts stops being held twice
                before = admitted_gap(job, job.allocated - task.req)
                a.held += task.req - (before - admitted_gap(job, job.allocated))
                a.held[0] = 0.0

    def on_dealloc(task: TaskInfo) -> None:
        job = ssn.jobs.get(task.job_id or "")
        a = attrs.get(job.queue) if job is not None else None
        if a is not None and job is not None:
            np.subtract(a.allocated, task.req, out=a.allocated)
            a.allocated[0] = 0.0
            a.changed()
            if a.held is not None:
                after = admitted_gap(job, job.allocated + task.req)
                a.held -= task.req - (admitted_gap(job, job.allocated) - after)
                a.held[0] = 0.0

    return ssn.hooks.add_event_handler(on_alloc, on_dealloc)


#: ``ClusterCache.derived`` key: the water-filling results kept for one set of effective weights
USAGE_FILLS = "proportion-usage-fills"


def _effective_weights(
    ssn: Session, kept: QueueVectors, attrs: dict[str, QueueAttr], usage: dict[str, UsageFigure]
) -> dict[Any, F]:
    """Feed the usage-decayed weights to the water-filling (the one place the effective weight
    enters) and return where to keep its results: ``kept.fills`` for plain weights, else a
    memo of these weights' own."""
    if not usage:
        return kept.fills
    for name, a in attrs.items():
        a.weight = usage[name].effective_weight
    weights = tuple(a.weight for a in attrs.values())
    held = ssn.cache.derived.get(USAGE_FILLS)
    if not (isinstance(held, tuple) and held[0] is kept and held[1] == weights):
        held = ssn.cache.derived[USAGE_FILLS] = (kept, weights, {})
    fills: dict[Any, F] = held[2]
    return fills


def _keep_plain_shares(
    attrs: dict[str, QueueAttr],
    usage: dict[str, UsageFigure],
    total: F,
    fills: dict[Any, F],
    request: F,
    tree: QueueTree | None = None,
) -> None:
    """``keep`` and ``claim`` of every queue: the larger and the smaller of its deserved share
    and the water-filling with the queues' own weights (kept in ``fills``, the plain weights'
    memo; down ``tree`` as the deserved share)."""
    plain = [dataclasses.replace(a, weight=usage[n].weight) for n, a in attrs.items()]
    for a, d in zip(attrs.values(), kept_fill(plain, request, total, fills, tree), strict=True):
        a.keep = np.maximum(a.deserved, d)
        a.claim = np.minimum(a.deserved, d)


class ProportionPlugin(Plugin):
    name = "proportion"
    ARGUMENTS = (
        Arg(
            "fairShare",
            "bool",
            False,
            "one fair share per queue decides admission, order and reclaim (scheduler.md)",
        ),
        Arg("fairShareAtAdmission", "bool", False, "the former name of `fairShare`"),
        Arg("usageHalfLife", "duration", None, "decay past usage with this half-life (off: none)"),
        Arg("usageWeight", "float", 1, "how strongly usage lowers a queue's weight", min=0),
        Arg(
            "usageMinFactor",
            "float",
            0.1,
            "the least a queue's weight is multiplied by",
            min=0,
            max=1,
            min_open=True,
        ),
        Arg("usageEvicts", "bool", False, "reclaim may evict down to the usage-decayed share"),
    )

    def __init__(self, arguments: Arguments) -> None:
        super().__init__(arguments)
        self.fair = arguments.get_bool(
            "fairShare", arguments.get_bool("fairShareAtAdmission", False)
        )
        self.decay = usage_decay_of(arguments)
        self.usage: dict[str, UsageFigure] = {}
        #: fair shares down a tree (None: flat); its inner queues without jobs publish their
        #: subtree's sums (``QueueTree.inner_figures``)
        self.tree: QueueTree | None = None
        #: the open session's queues (what the callbacks read)
        self.attrs: dict[str, QueueAttr] = {}
        #: the open session's resources each task template asks for (Allocatable)
        self.dims_by_tid: dict[int, list[int]] = {}
        #: the QueueOrder key, Overused and Allocatable callbacks (``DeferredShares``)
        self.queue_fns: tuple[Any, Any, Any] | None = None

    #: the callbacks (all but the event handlers) are registered once per ``Hooks`` and read
    #: the open session from the plugin (False: registered again at every open, as before)
    keeps_callbacks = True

    def register_kept(self, hooks: Hooks) -> None:
        _register_queue_points(hooks, self)
        _register_victim_points(hooks, self)
        hooks.add_deserved_fn(self.deserved)
        _register_admission(hooks, self)

    def on_session_open(self, ssn: Session) -> None:
        total = ssn.total_resource.astype(np.float64)
        kept = QueueVectors.of(ssn, total)
        figures = queue_attrs(ssn, kept, fair=self.fair)
        attrs, fills = figures.attrs, kept.fills
        tree = kept.tree if self.fair else None
        if self.decay is not None:
            self.usage = usage_figures(
                {n: a.weight for n, a in attrs.items()}, ssn.cache.queue_usage, self.decay
            )
            fills = _effective_weights(ssn, kept, attrs, self.usage)
        water_fill(list(attrs.values()), total, fills, figures.request, tree)
        if self.usage and self.decay is not None and not self.decay.evicts:
            _keep_plain_shares(attrs, self.usage, total, kept.fills, figures.request, tree)
        if self.fair:
            lend_borrowers(ssn, attrs)
        self.attrs = attrs
        self.dims_by_tid = {}
        self.tree = tree
        self.total = total
        if not self.keeps_callbacks:
            self.ssn = ssn
            self.register_kept(ssn.hooks)
        handler = _register_handlers(ssn, attrs)
        plain = all(a.held is None for a in attrs.values())
        if deferred.DEFER and self.queue_fns is not None and plain:
            ssn.hooks.add_deferred_queues(deferred.DeferredShares(self, handler))

    def on_session_close(self, ssn: Session) -> None:
        publish_shares(ssn, self.attrs)
        if self.tree is not None:  # after the session's placements, as the queues' own
            publish_shares(ssn, self.tree.inner_figures(self.attrs))
        for name, fig in self.usage.items():
            m = ssn.queue_metrics.get(name)
            if m is not None:
                m.effective_weight, m.usage_share = fig.effective_weight, fig.usage_share

    def deserved(self, queue: str) -> F | None:
        """The deserved vector of ``queue`` as the evicting actions read it (the victim floor,
        gangs larger than the share): ``kept_share``, the computed deserved share unless
        ``usageHalfLife`` is on."""
        a = self.attrs.get(queue)
        return kept_share(a) if a is not None else None
