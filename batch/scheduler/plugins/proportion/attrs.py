"""proportion's per-queue figures of one session (``QueueAttr``) and the shares the evicting
actions read from them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from batch.model.info import QueueInfo, TaskInfo
from batch.scheduler.framework.shares import TOL, F

__all__ = [
    "QueueAttr",
    "claimed_share",
    "deserved_dims",
    "kept_share",
    "ratio_lists",
    "within_deserved",
]


@dataclass(slots=True)
class QueueAttr:
    queue: QueueInfo
    #: the queue's weight, or with ``usageHalfLife`` its effective weight (usage.py)
    weight: float
    guarantee: F
    capability: F
    real_capability: F
    allocated: F
    request: F
    inqueue: F
    elastic: F
    deserved: F = field(default_factory=lambda: np.zeros(0))
    #: fair share: allocated + admitted-but-unallocated (None: Volcano's order by allocated)
    held: F | None = None
    #: fair share: admitted, unplaced gangs beyond the queue's due (borrowing.py)
    lent: F | None = None
    #: usageHalfLife: what evictions leave the queue, the larger of its deserved share and its
    #: plain weights' share (None: deserved; ``kept_share``), and what it may evict for, the
    #: smaller of the two (None: deserved; ``claimed_share``)
    keep: F | None = None
    claim: F | None = None
    _share: float | None = None
    _order_share: float | None = None
    _overused: bool | None = None

    def share(self) -> float:
        if self._share is None:
            self._share = _ratio(self.allocated, self.deserved)
        return self._share

    def order_share(self) -> float:
        """What QueueOrder compares: share() in Volcano mode, held/deserved with fair shares."""
        if self.held is None:
            return self.share()
        if self._order_share is None:
            self._order_share = _ratio(self.held, self.deserved)
        return self._order_share

    def changed(self) -> None:
        self._share = self._order_share = self._overused = None


def kept_share(a: QueueAttr) -> F:
    """What the evicting actions leave ``a`` (reclaim's victims, the victim floor, overcommit's
    count of what reclaim gives back): its deserved share, or with ``usageHalfLife`` the larger
    of that and its plain weights' share, so that usage steers where free room goes but never
    evicts a queue below what its weight alone gives it (usage.py)."""
    return a.keep if a.keep is not None else a.deserved


def claimed_share(a: QueueAttr) -> F:
    """Up to what ``a`` may have others' pods evicted for it (reclaim, gangreclaim): its
    deserved share, or with ``usageHalfLife`` the smaller of that and its plain weights' share
    (victims keep ``kept_share``, so no eviction could serve a claim beyond it)."""
    return a.claim if a.claim is not None else a.deserved


def _ratio(amount: F, deserved: F) -> float:
    """max over resources (pods left out) of amount/deserved where something is deserved.

    On Python floats (one ``tolist`` each): the same IEEE divisions and maximum as the vector
    form, without its per-call overhead (it runs after every placement)."""
    return ratio_lists(amount.tolist(), deserved.tolist())


def ratio_lists(a: list[float], d: list[float], dims: list[int] | None = None) -> float:
    """``_ratio`` of vectors given as Python lists; ``dims`` (optional): ``deserved_dims(d)``,
    the only resources it looks at (the same divisions, in the same order)."""
    best: float | None = None
    for i in range(1, len(d)) if dims is None else dims:
        if d[i] >= TOL:
            r = a[i] / d[i]
            if best is None or r > best:
                best = r
    return 0.0 if best is None else float(best)


def deserved_dims(d: list[float]) -> list[int]:
    """The resources (pods left out) where ``d`` deserves something (``ratio_lists``)."""
    return [i for i in range(1, len(d)) if d[i] >= TOL]


def task_dims(dims_by_tid: dict[int, list[int]], t: TaskInfo) -> list[int]:
    """The resources (pods left out) ``t``'s template asks for, kept per template id in
    ``dims_by_tid`` (the session's)."""
    tmpl = t.template
    dims = dims_by_tid.get(tmpl.tid)
    if dims is None:
        dims = dims_by_tid[tmpl.tid] = [int(d) for d in np.flatnonzero(t.req[1:] > 0) + 1]
    return dims


def within_deserved(
    dims_by_tid: dict[int, list[int]], t: TaskInfo, allocated: Any, deserved: Any
) -> bool:
    """Allocatable's deserved-share test: ``allocated`` plus ``t``'s request stays within
    ``deserved`` (TOL) on every resource the task asks for; the vectors as arrays or as
    Python lists (``deferred.DeferredShares``)."""
    rl = t.template.req_list
    for d in task_dims(dims_by_tid, t):  # noqa: SIM110 (no generator: asked for every placement)
        if not allocated[d] + rl[d] <= deserved[d] + TOL:
            return False
    return True
