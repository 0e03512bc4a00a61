"""Fair share: work that does not fit its queue's share runs on borrowed room.

Why this exists: a queue's deserved share can be smaller than its next gang (weight 1 of 6 on
32 GPUs is 5.3 GPUs; its gangs are 8 or 16), and gang sizes rarely add up to a share exactly.
Such work may start only on room no other queue is owed — a queue is owed room only while it
has work that fits in what it still deserves (``unowed_idle``) — and, of the queues that could
borrow that room, the one left with the lowest share (held over deserved) afterwards goes
first (``may_borrow``): a weight-3 queue's second gang before a weight-1 queue's first, so a
higher weight never makes a queue wait longer. Once admitted, a borrowing gang
that cannot be placed holds nothing of its queue's share (``lend_borrowers``): otherwise its
admission kept its queue's smaller jobs out for as long as other queues used their shares (seen
on the sandbox: three queues 1:2:3, one of them holding no GPU at all).

When placing (allocate, backfill: ``placing=True``) the better claim counts only other queues'
work that can be placed now, admitted jobs with pods: enqueue ran first in the session, so
work it left unadmitted cannot use the room before the next session. Counting it left a GPU
idle while an admitted gang that fits waited: with shares that are not a whole number of gangs
(weights 1:4 on 16 GPUs, 8-GPU gangs: 3.2 and 12.8) the borrower's own admission held
overcommit's budget, so the other queue's gang was never admitted to use the room either.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from batch.model.info import JobInfo
from batch.model.status import TaskStatus
from batch.scheduler.framework.feasibility import nothing_placed, waits_unstarted
from batch.scheduler.framework.session import Session
from batch.scheduler.framework.shares import TOL, F, le_common, nearer_on, positive_dims

if TYPE_CHECKING:
    from batch.scheduler.plugins.proportion.attrs import QueueAttr

_NEEDS = "proportion.waiting_needs"
_ADMITTED = "proportion.admitted_with_pods"


def _need(job: JobInfo) -> F | None:
    """What ``job`` needs next: its minResources while nothing of it runs, else its pending
    pods' average request (None: nothing)."""
    mr = job.min_resources
    if waits_unstarted(job) and mr is not None:
        return mr.astype(np.float64)
    pending = job.counts[TaskStatus.PENDING]
    if pending:
        return np.asarray(job.pending_req, dtype=np.float64) / pending
    return None


#: work out a need once per distinct input of ``_need`` (minResources, or pending requests
#: and count) instead of once per job (False: per job; exact either way, tests compare both)
NEED_PER_INPUT = True


def _need_input(job: JobInfo) -> tuple[object, ...] | None:
    """All that ``_need`` reads of ``job``, as a key (None: it needs nothing)."""
    mr = job.min_resources
    if waits_unstarted(job) and mr is not None:
        return (mr.tobytes(),)
    pending = job.counts[TaskStatus.PENDING]
    if pending:
        return (job.pending_req.tobytes(), pending)
    return None


def _jobs_needing(ssn: Session) -> dict[str, list[JobInfo]]:
    """Per queue, the active jobs that need something, or with ``NEED_PER_INPUT`` the first of
    each distinct input (``_need_input``), in job order."""
    if not NEED_PER_INPUT:
        got: dict[str, list[JobInfo]] = {}
        for job in ssn.active_jobs():
            got.setdefault(job.queue, []).append(job)
        return got
    firsts: dict[str, dict[object, JobInfo]] = {}
    for job in ssn.active_jobs():
        key = _need_input(job)
        if key is not None:
            firsts.setdefault(job.queue, {}).setdefault(key, job)
    return {name: list(jobs.values()) for name, jobs in firsts.items()}


def waiting_needs(ssn: Session) -> dict[str, list[F]]:
    """Per queue, what its jobs with work left need next, each distinct need once, smallest
    first (once per session)."""
    got: dict[str, list[F]] | None = ssn.scratch.get(_NEEDS)
    if got is None:
        got = {}
        for name, jobs in _jobs_needing(ssn).items():
            needs = [n for n in map(_need, jobs) if n is not None]
            if needs:  # each shape once: a backlog is many of a few
                unique = {v.tobytes(): v for v in needs}
                got[name] = sorted(unique.values(), key=lambda v: float(v[1:].sum()))
        ssn.scratch[_NEEDS] = got
    return got


def placeable_needs(ssn: Session, queue: str) -> list[F]:
    """What each admitted job of ``queue`` with pods waiting needs next, smallest first:
    the work that could be placed in this session (read live: placements change it)."""
    got: dict[str, list[JobInfo]] | None = ssn.scratch.get(_ADMITTED)
    if got is None:
        got = {}
        for job in ssn.active_jobs():
            if job.phase in ("Inqueue", "Running") and job.counts[TaskStatus.PENDING]:
                got.setdefault(job.queue, []).append(job)
        ssn.scratch[_ADMITTED] = got
    needs = [n for n in map(_need, got.get(queue, ())) if n is not None]
    needs.sort(key=lambda v: float(v[1:].sum()))
    return needs


def owed(ssn: Session, b: QueueAttr) -> F:
    """What queue ``b`` is still owed: deserved less held, while some work of it would take it
    nearer its share (``nearer_on``: a gang past the share by less than the gap counts)."""
    if b.held is None:
        return np.zeros_like(b.deserved)
    gap = np.maximum(b.deserved - b.held, 0.0)
    for need in waiting_needs(ssn).get(b.queue.name, ()):
        n = min(len(need), len(gap))
        if nearer_on(b.held[:n], need[:n], b.deserved[:n], np.flatnonzero(need[1:n] > 0) + 1):
            return gap
    return np.zeros_like(gap)


def unowed_idle(
    ssn: Session, a: QueueAttr, attrs: Iterable[QueueAttr], *, placing: bool = False
) -> F:
    """What is idle now less what the queues other than ``a`` are still owed; when admitting
    (not ``placing``), less what every queue was admitted to and has not placed yet too (that
    room is taken already: admitting on it made gangs wait admitted, holding the budget)."""
    nd = ssn.nodes
    room: F = nd.idle[:, nd.valid].sum(axis=1).astype(np.float64)
    for b in attrs:
        o = owed(ssn, b) if b is not a else np.zeros_like(b.deserved)
        if not placing:  # lent gangs hold no room: they wait for room nobody is owed
            o = o + (b.inqueue if b.lent is None else np.maximum(b.inqueue - b.lent, 0.0))
        n = min(len(room), len(o))
        room[:n] -= o[:n]
    return room


def unplaced_gang(job: JobInfo) -> bool:
    """An admitted gang with nothing placed yet."""
    return job.min_resources is not None and job.phase == "Inqueue" and nothing_placed(job)


def lend_borrowers(ssn: Session, attrs: Mapping[str, QueueAttr]) -> None:
    """Take admitted, unplaced gangs that borrow out of their queues' held; their admission is
    counted in ``lent`` instead (overcommit may give it to a queue within its share). A queue's
    unplaced gangs, oldest first, are its own while each takes it nearer its share
    (``nearer_on``, the rule that admitted them): a queue owed 10.7 GPUs holds its first 16-GPU
    gang, not its second (counting the first as borrowed let the queue be admitted a second
    gang on its share while a weight-3 queue waited for the room)."""
    parts: dict[str, list[F]] = {}
    unplaced = [j for j in ssn.active_jobs() if unplaced_gang(j)]  # sorted: few, not every job
    for job in sorted(unplaced, key=lambda j: (j.creation, j.uid)):
        a = attrs.get(job.queue)
        if a is None or a.held is None:
            continue
        mr = job.min_resources
        assert mr is not None
        part = np.maximum(mr - job.gated_req, 0).astype(np.float64)[: len(a.held)]
        part[0] = 0.0
        parts.setdefault(job.queue, []).append(part)
    for name, gangs in parts.items():
        a = attrs[name]
        assert a.held is not None
        lent = gangs[0] if len(gangs) == 1 else np.sum(gangs, axis=0)  # mostly one
        held = np.maximum(a.held - lent, 0.0)
        for part in gangs:
            if nearer_on(held, part, a.deserved, positive_dims(part)):
                held = held + part
            else:
                a.lent = part if a.lent is None else a.lent + part
        a.held = held
        a.changed()


def _share_after(b: QueueAttr, need: F) -> float:
    """``b``'s share (max over resources of held / deserved) were it to take ``need``."""
    held = b.held if b.held is not None else b.allocated
    n = min(len(need), len(held))
    after = held[1:n] + need[1:n]
    des = b.deserved[1:n]
    mask = des >= TOL
    if not mask.any():
        return float("inf")
    return float((after[mask] / des[mask]).max())


def may_borrow(
    ssn: Session, a: QueueAttr, need: F, attrs: Mapping[str, QueueAttr], *, placing: bool = False
) -> bool:
    """May queue ``a`` take ``need`` beyond its share? Only on idle room no other queue is
    owed, and only if no other queue's next work that also fits that room (when ``placing``,
    work that can be placed now) would leave it with a lower share than ``a`` will have."""
    room = unowed_idle(ssn, a, attrs.values(), placing=placing)
    if not le_common(need, room):
        return False
    mine = _share_after(a, need)
    needs = waiting_needs(ssn)
    for name, b in attrs.items():
        if b is a:
            continue
        for other in placeable_needs(ssn, name) if placing else needs.get(name, ()):
            if le_common(other, room):
                if _share_after(b, other) < mine - 1e-9:
                    return False
                break  # the smallest need that fits decides for this queue
    return True
