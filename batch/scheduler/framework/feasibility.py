"""Gangs that can never run as the cluster and their queue stand: "can never fit".

Why this exists: a gang that cannot run on the cluster as it is must not hold anything. Before
this, a 16-GPU pod on 8-GPU nodes was admitted against the queue's totals and held its share
(issue 19.5), and the README's own `big` job (5 x 8 GPUs on a 32-GPU cluster) counted as its
queue's waiting demand for ever, so fair admission kept another queue's feasible jobs Pending
(issue 29.1). Such a gang is now judged inadmissible: enqueue leaves it Pending with a reason
saying why ("can never fit: ..."), and the fair-share plugin counts it in no queue's demand. It
is judged again whenever the job, the nodes or its queue's capability change (one verdict is
kept per job for an unchanged job and cluster).

A gang can never fit when:
- a pod of it asks, on some resource, for more than the largest schedulable node's allocatable
  (the pods judged are its unbound pending ones, one per pod template; for a gang whose pods do
  not exist yet, its minResources shared among its minMember pods when minTaskMember says they
  all come from one task, as for a one-task VCJob before admission);
- its minResources ask for more than the whole cluster's allocatable on some resource;
- its minResources ask for more than its queue's capability, or an ancestor queue's, on some
  resource;
- its pods are all of one shape and the nodes cannot hold minAvailable of them even empty
  (per node, as many pods as the node's allocatable holds on every resource).
While no schedulable node exists, nothing is judged (a cluster whose nodes have not registered
yet is not a cluster too small).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from batch.api.resources import describe_amount
from batch.model.info import JobInfo, QueueInfo
from batch.model.parse import ROOT_QUEUE
from batch.model.resources import IntVec
from batch.model.status import ALLOCATED_STATUS
from batch.scheduler.framework.decisions import PendingReason
from batch.scheduler.framework.queue_tree import resolved_parents
from batch.scheduler.framework.session import Session

__all__ = [
    "KIND",
    "holds_nothing",
    "inadmissible_jobs",
    "never_fits",
    "nothing_placed",
    "waits_unstarted",
]

#: the PendingReason kind of a gang that can never fit
KIND = "NeverFits"
_LARGEST = "feasibility.largest_node"
_SESSION = "feasibility.verdicts"
_KEPT = "feasibility"
_PARENTS = "feasibility.parents"
_WORLDS = "feasibility.worlds"
_FITS = "feasibility.fits"
#: at most this many keys that fit (per queue) and queues are kept (``_fits_in``)
_FITS_KEPT = 4096


def _largest(ssn: Session) -> IntVec | None:
    """Per resource, the largest allocatable of a schedulable node (None: no node yet); kept
    across sessions while no node's allocatable, readiness or membership changes."""
    if _LARGEST not in ssn.scratch:
        nd = ssn.nodes
        arrays = nd.arrays
        key = (arrays.meta_gen, arrays.alloc_gen, nd.n, nd.dims)
        kept = ssn.cache.derived.get(_LARGEST)
        if not (isinstance(kept, tuple) and kept[0] == key):
            value = nd.alloc[:, nd.valid].max(axis=1) if nd.valid.any() else None
            if value is not None:
                value.flags.writeable = False
            kept = ssn.cache.derived[_LARGEST] = (key, value)
        ssn.scratch[_LARGEST] = kept[1]
    largest: IntVec | None = ssn.scratch[_LARGEST]
    return largest


def _shown(ssn: Session, index: int, amount: int) -> str:
    return describe_amount(ssn.resources.names[index], amount)


def _pod_shapes(job: JobInfo) -> dict[object, IntVec]:
    """One fit request per pod template of the job's unbound pods; for a gang without its pods
    yet, its minResources divided among its minMember pods when they are all of one task."""
    shapes: dict[object, IntVec] = {}
    for task in job.tasks.values():
        if not task.node_name:
            shapes.setdefault(task.template.tid, task.init_req)
    if not shapes and job.min_resources is not None:
        if job.min_available <= 1:
            return {None: job.min_resources}
        one = _one_task_shape(job, job.min_resources)
        if one is not None:
            return {None: one}
    return shapes


def _one_task_shape(job: JobInfo, mr: IntVec) -> IntVec | None:
    """Each pod's request of a gang whose minMember pods all come from one task (its
    minTaskMember names one task, for all of minMember): minResources is then minMember times
    one pod's request (a VCJob's PodGroup before the job controller creates its pods)."""
    counts = [n for n in job.min_task_member.values() if n > 0]
    n = job.min_available
    if len(counts) != 1 or counts[0] != n or bool((mr[1:] % n).any()):
        return None
    shape: IntVec = mr // n
    shape[0] = 1  # one pod
    return shape


def _over(ssn: Session, need: IntVec, limit: npt.NDArray[Any]) -> list[int]:
    """The resources (not pods) on which ``need`` exceeds ``limit``."""
    n = min(len(need), len(limit))
    return [int(i) + 1 for i in np.nonzero(need[1:n] > limit[1:n])[0]]


def _say(ssn: Session, what: str, need: IntVec, limit: npt.NDArray[Any], dims: list[int]) -> str:
    names = ssn.resources.names
    return "; ".join(
        f"{_shown(ssn, i, int(need[i]))} {names[i]}, {what} {_shown(ssn, i, int(limit[i]))}"
        for i in dims
    )


def _reason(job: JobInfo, rule: str, message: str, dims: list[int], ssn: Session) -> PendingReason:
    names = ssn.resources.names
    return PendingReason(
        job.uid,
        KIND,
        f"can never fit: {message}",
        details={"rule": rule, "resources": [names[i] for i in dims]},
    )


def _by_node(
    ssn: Session, job: JobInfo, largest: IntVec, shapes: dict[object, IntVec]
) -> PendingReason | None:
    for req in shapes.values():
        dims = _over(ssn, req, largest)
        if dims:
            said = _say(ssn, "the largest node has", req, largest, dims)
            return _reason(job, "node", f"a pod asks for {said}", dims, ssn)
    return None


def _by_totals(ssn: Session, job: JobInfo) -> PendingReason | None:
    mr = job.min_resources
    if mr is None:
        return None
    total = ssn.total_resource
    dims = _over(ssn, mr, total)
    if dims:
        said = _say(ssn, "the cluster has", mr, total, dims)
        return _reason(job, "cluster", f"the gang asks for {said}", dims, ssn)
    for q in _capped_line(ssn, job.queue):
        cap = np.full(len(mr), np.iinfo(np.int64).max, dtype=np.int64)
        for name, amount in q.capability.items():
            i = ssn.resources.get(name)
            if i is not None and i < len(cap) and (amount > 0 or i > 2):
                cap[i] = amount
        dims = _over(ssn, mr, cap)
        if dims:
            said = _say(ssn, f"queue {q.name!r} may hold", mr, cap, dims)
            return _reason(job, "capability", f"the gang asks for {said}", dims, ssn)
    return None


def _capped_line(ssn: Session, queue: str) -> list[QueueInfo]:
    """``queue`` and its ancestors (root left out) that have a capability, nearest first: a
    gang its queue could hold but a parent could not can never run either."""
    parents: dict[str, str] | None = ssn.scratch.get(_PARENTS)
    if parents is None:
        parents = ssn.scratch[_PARENTS] = resolved_parents(ssn.queues)
    out: list[QueueInfo] = []
    node: str | None = queue
    while node is not None and node != ROOT_QUEUE:
        q = ssn.queues.get(node)
        if q is None:
            break
        if q.capability:
            out.append(q)
        node = parents.get(node)
    return out


def _by_packing(ssn: Session, job: JobInfo, shapes: dict[object, IntVec]) -> PendingReason | None:
    """A gang of pods of one shape: can the empty nodes hold minAvailable of them?"""
    if len(shapes) != 1 or job.min_available <= 1:
        return None
    req = next(iter(shapes.values()))
    nd = ssn.nodes
    n = min(len(req), nd.alloc.shape[0])
    dims = [d for d in range(1, n) if req[d] > 0]
    if not dims:
        return None
    fit = _pods_held(nd.alloc[dims][:, nd.valid], req[dims])
    if fit >= job.min_available:
        return None
    names = ", ".join(f"{_shown(ssn, d, int(req[d]))} {ssn.resources.names[d]}" for d in dims)
    return _reason(
        job,
        "packing",
        f"{job.min_available} pods of {names} each are needed at once, the nodes hold at most "
        f"{fit} of them",
        dims,
        ssn,
    )


def _pods_held(capacity: npt.NDArray[Any], req: IntVec) -> int:
    """How many pods of ``req`` the nodes' ``capacity`` (resources x nodes) holds."""
    return int((np.maximum(capacity, 0) // req[:, None]).min(axis=0).sum())


def starts_now(ssn: Session, job: JobInfo) -> bool:
    """Could minAvailable of the gang's unbound pods start on the nodes' idle capacity as it is
    now (selectors and taints aside)? Pods of one request: counted; of several: placed in
    decreasing order of their largest amount, each on the first node it fits. A gang without
    its pods yet counts as minMember pods of its one task's share of minResources (no answer
    but False for a gang of several tasks)."""
    nd = ssn.nodes
    reqs = _to_start(job)
    if not reqs:
        return False
    dims = [d for d in range(1, min(len(reqs[0]), nd.idle.shape[0])) if reqs[0][d] > 0]
    idle = nd.idle[:, nd.valid]
    if all(np.array_equal(r, reqs[0]) for r in reqs):
        return not dims or _pods_held(idle[dims], reqs[0][dims]) >= job.min_available
    idle = idle.copy()
    placed = 0
    for req in sorted(reqs, key=lambda r: -int(r[1:].max(initial=0))):
        n = min(len(req), idle.shape[0])
        fits = np.flatnonzero((idle[:n] >= req[:n, None]).all(axis=0))
        if fits.size:
            idle[:n, fits[0]] -= req[:n]
            placed += 1
    return placed >= job.min_available


def start_shape(job: JobInfo) -> tuple[int, tuple[bytes, ...]]:
    """All that ``starts_now`` reads of ``job``: jobs of one start shape get one answer."""
    return job.min_available, tuple(sorted(r.tobytes() for r in _to_start(job)))


def _to_start(job: JobInfo) -> list[IntVec]:
    reqs = [t.init_req for t in job.tasks.values() if not t.node_name]
    if not job.tasks:
        shape = _pod_shapes(job).get(None)
        reqs = [] if shape is None else [shape] * job.min_available
    return reqs


def _judge(
    ssn: Session, job: JobInfo, largest: IntVec, world: tuple[Any, ...]
) -> PendingReason | None:
    """The verdict on ``job``. Every input of it but the job's identity is in ``key``, and
    whatever else it reads of the cluster is in ``world`` (``_world``): a job whose key was
    judged to fit in the same world fits too, unjudged (20,000 single pods of one shape were
    20,000 verdicts; the simulator's sessions judge one new gang each, mostly of a shape judged
    before). The keys that fit are kept across sessions (``_FITS``, for one world at a time)."""
    shapes = _pod_shapes(job)
    mr = job.min_resources
    key = (
        job.queue,
        job.min_available,
        None if mr is None else mr.tobytes(),
        tuple(sorted(job.min_task_member.items())),
        tuple((tid, req.tobytes()) for tid, req in shapes.items()),
    )
    fits = _fits_in(ssn, job.queue, world)
    if key in fits:
        return None
    verdict = (
        _by_node(ssn, job, largest, shapes) or _by_totals(ssn, job) or _by_packing(ssn, job, shapes)
    )
    if verdict is None:
        if len(fits) >= _FITS_KEPT:
            fits.clear()
        fits.add(key)
    return verdict


def _fits_in(ssn: Session, queue: str, world: tuple[Any, ...]) -> set[tuple[Any, ...]]:
    """The keys judged to fit among jobs of ``queue`` in ``world`` (kept across sessions per
    queue while its world stays the same)."""
    kept: dict[str, tuple[tuple[Any, ...], set[tuple[Any, ...]]]] = ssn.cache.derived.setdefault(
        _FITS, {}
    )
    got = kept.get(queue)
    if got is None or got[0] != world:
        if got is None and len(kept) >= _FITS_KEPT:
            kept.clear()
        got = kept[queue] = (world, set())
    return got[1]


def never_fits(ssn: Session, job: JobInfo) -> PendingReason | None:
    """Why ``job`` can never fit the cluster as it stands, or None (see the module docstring).
    Verdicts are kept across sessions while the job, the nodes and its queue are unchanged."""
    largest = _largest(ssn)
    if largest is None:
        return None
    return _verdict(ssn, job, largest, *_verdict_tables(ssn))


#: uid -> this session's verdict; uid -> (version, world, verdict) kept across sessions
_Got = dict[str, PendingReason | None]
_Kept = dict[str, tuple[int, object, PendingReason | None]]


def _verdict_tables(ssn: Session) -> tuple[_Got, _Kept]:
    return ssn.scratch.setdefault(_SESSION, {}), ssn.cache.derived.setdefault(_KEPT, {})


def _verdict(
    ssn: Session,
    job: JobInfo,
    largest: IntVec,
    got: _Got,
    kept: _Kept,
) -> PendingReason | None:
    """``never_fits`` with what it reads of the session looked up once by the caller."""
    if job.uid in got:
        return got[job.uid]
    world = _world(ssn, job.queue, largest)
    hit = kept.get(job.uid)
    if hit is not None and hit[0] == job.version and hit[1] == world:
        verdict = hit[2]
    else:
        verdict = _judge(ssn, job, largest, world)
        if len(kept) > 4 * max(len(ssn.jobs), 1024):
            kept.clear()
        kept[job.uid] = (job.version, world, verdict)
    got[job.uid] = verdict
    return verdict


def _world(ssn: Session, queue: str, largest: IntVec) -> tuple[Any, ...]:
    """What a kept verdict on a job of ``queue`` depends on besides the job: the nodes (their
    metadata and allocatable), the cluster's total and the capabilities over the queue (the
    same for the whole session: kept per queue in its scratch, and with ``KEEP_WORLDS`` across
    sessions while all of it and the queues are the same)."""
    worlds: dict[str, tuple[Any, ...]] | None = ssn.scratch.get(_WORLDS)
    if worlds is None:
        worlds = ssn.scratch[_WORLDS] = _kept_worlds(ssn, largest) if KEEP_WORLDS else {}
    got = worlds.get(queue)
    if got is None:
        arrays = ssn.nodes.arrays
        got = worlds[queue] = (
            arrays.meta_gen,
            arrays.alloc_gen,
            ssn.nodes.n,
            ssn.total_resource.tobytes(),
            largest.tobytes(),
            tuple((q.name, tuple(sorted(q.capability.items()))) for q in _capped_line(ssn, queue)),
        )
    return got


#: keep the queues' worlds (``_world``) across sessions (False: worked out every session)
KEEP_WORLDS = True
_KEPT_WORLDS = "feasibility.kept-worlds"


def _kept_worlds(ssn: Session, largest: IntVec) -> dict[str, tuple[Any, ...]]:
    """The worlds last worked out, while the nodes' generations and count, the cluster's
    total, the largest node and the queue objects (replaced, never changed, when a queue
    changes; kept alive here so that their ids are not reused) are the ones they were worked
    out for; else a new, empty dict."""
    arrays = ssn.nodes.arrays
    queues = tuple(ssn.queues.values())
    key = (
        arrays.meta_gen,
        arrays.alloc_gen,
        ssn.nodes.n,
        ssn.total_resource.tobytes(),
        largest.tobytes(),
        tuple(map(id, queues)),
    )
    kept = ssn.cache.derived.get(_KEPT_WORLDS)
    if not (isinstance(kept, tuple) and kept[0] == key):
        kept = ssn.cache.derived[_KEPT_WORLDS] = (key, queues, {})
    worlds: dict[str, tuple[Any, ...]] = kept[2]
    return worlds


def waits_unstarted(job: JobInfo) -> bool:
    """A gang not admitted yet, or admitted with nothing of it placed yet."""
    return job.phase == "Pending" or (job.phase == "Inqueue" and nothing_placed(job))


#: answer ``nothing_placed`` from the job's task counts when no task of it is in an allocated
#: status (exact: ``allocated`` is then the sum of no requests, zero), else from the vector's
#: Python ints, without a numpy reduction (False: numpy's ``any``; tests compare both)
COUNT_FIRST = True
_HOLD_A, _HOLD_B, _HOLD_C, _HOLD_D = (int(s) for s in sorted(ALLOCATED_STATUS))


def holds_nothing(job: JobInfo) -> bool:
    """No task of ``job`` is in an allocated status (its ``allocated`` is zero)."""
    c = job.counts
    return not (c[_HOLD_A] or c[_HOLD_B] or c[_HOLD_C] or c[_HOLD_D])


def nothing_placed(job: JobInfo) -> bool:
    """No resource (pods aside) is allocated to ``job``: its unplaced gangs, 100,000 a session
    in a burst, are told apart without a numpy call each."""
    if not COUNT_FIRST:
        return not job.allocated[1:].any()
    return holds_nothing(job) or not any(job.allocated.tolist()[1:])


#: ``inadmissible_jobs`` looks up the largest node and the verdict tables once, not per job
#: (False: ``never_fits`` per job; tests compare both)
HOIST = True


def inadmissible_jobs(ssn: Session) -> dict[str, PendingReason]:
    """The session's unstarted gangs (``waits_unstarted``) that can never fit, with why."""
    out: dict[str, PendingReason] = {}
    largest = _largest(ssn)
    if largest is None:
        return out
    got, kept = _verdict_tables(ssn)
    for job in ssn.active_jobs():  # an unstarted gang is never settled
        if waits_unstarted(job):
            why = _verdict(ssn, job, largest, got, kept) if HOIST else never_fits(ssn, job)
            if why is not None:
                out[job.uid] = why
    return out
