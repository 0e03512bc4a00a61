"""Queue statuses at session close, worked out only for the queues whose figures moved.

Why this exists: every close reports every queue's status (``allocated``, summed up the queue
tree, and its PodGroups per phase). The simulator's sessions are tiny (about one new job
each), yet building each queue's figures walked every queue and its ancestors and formatted a
key of its vector and counts: a fixed cost per session that did not depend on what changed.
``QueueBook`` keeps, across sessions, each queue's share of the sums (its jobs' ``allocated``
plus the session's delta), each queue's total over its subtree and the last statuses; a close
looks only at the queues whose kept sum moved (``JobSums.stamps``), that had a delta in this
or the last session, or whose phase counts moved (``StatusBook.moved``), and their ancestors.
Everything else keeps its status object. Any other change (the queues, the resource
registry, a new sums or counts object) starts the book afresh. Totals are int64 sums, so the
kept totals are exactly the recomputed ones, and a queue's status object is reused under the
same rule as the plain path (``close._queue_statuses``: the same key as the last status).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from batch.model.info import QueueInfo
from batch.model.resources import IntVec, ResourceIndex
from batch.scheduler.framework.aggregate import JobSums

__all__ = ["QueueBook", "queue_status"]


def queue_status(
    kept: dict[str, tuple[Any, dict[str, Any]]],
    qname: str,
    res: ResourceIndex,
    qvec: IntVec | None,
    counts: Mapping[str, int],
) -> dict[str, Any]:
    """The status of queue ``qname`` with ``allocated`` ``qvec`` (None: nothing) and its
    PodGroups per phase (``counts``): the one ``kept`` for the same figures, else a new one
    (kept; statuses are never changed once made)."""
    key = (res, res.version, qvec.tobytes() if qvec is not None else None, *counts.values())
    hit = kept.get(qname)
    if hit is not None and hit[0] == key:
        return hit[1]
    status: dict[str, Any] = {"allocated": res.to_list(res.zeros() if qvec is None else qvec)}
    status.update(counts)
    kept[qname] = (key, status)
    return status


class QueueBook:
    """What the last close said of each queue (``ClusterCache.derived``; module docstring)."""

    __slots__ = (
        "counts",
        "delta",
        "items",
        "kept",
        "keys",
        "leaf",
        "out",
        "present",
        "res",
        "stamps",
        "sums",
        "total",
        "version",
    )

    KEY = "close-queue-book"

    def __init__(self) -> None:
        self.sums: JobSums | None = None
        self.counts: dict[str, dict[str, int]] | None = None
        self.items: list[tuple[str, QueueInfo]] = []
        self.res: ResourceIndex | None = None
        self.version = -1
        self.stamps: dict[str, int] = {}
        #: the queues the sums had
        self.keys: set[str] = set()
        #: the queues the last close's delta named
        self.delta: Iterable[str] = ()
        #: queue -> its own share (jobs' sum plus delta; a copy), None: it has none
        self.leaf: dict[str, IntVec | None] = {}
        #: queue -> Σ of the shares in its subtree, and how many shares that is
        self.total: dict[str, IntVec] = {}
        self.present: dict[str, int] = {}
        #: queue -> (the key of its last status, that status), as ``close._queue_statuses``
        self.kept: dict[str, tuple[Any, dict[str, Any]]] = {}
        self.out: dict[str, dict[str, Any]] = {}

    def statuses(
        self,
        queues: Mapping[str, QueueInfo],
        res: ResourceIndex,
        sums: JobSums,
        delta: Mapping[str, IntVec],
        q_counts: dict[str, dict[str, int]],
        moved: set[str],
        none: Mapping[str, int],
    ) -> dict[str, dict[str, Any]]:
        """Every queue's status after this close (a new dict; the statuses may be shared):
        ``q_counts`` its PodGroups per phase (``none``: a queue without any), ``moved`` the
        queues whose counts moved since the last close (emptied here)."""
        items = list(queues.items())
        fresh = (
            sums is not self.sums
            or q_counts is not self.counts
            or res is not self.res
            or res.version != self.version
            or items != self.items
        )
        if fresh:
            self._start(items, res, sums, q_counts)
            shares: Iterable[str] = [*sums.sums, *(q for q in delta if q not in sums.sums)]
            touched: set[str] | None = None
        else:
            shares = self._moved_shares(sums, delta)
            touched = set(moved)
        moved.clear()
        grown = self._take_shares(queues, shares, sums.sums, delta)
        self.delta = list(delta)
        self._restate(queues, res, q_counts, none, None if touched is None else touched | grown)
        return dict(self.out)

    def _start(
        self,
        items: list[tuple[str, QueueInfo]],
        res: ResourceIndex,
        sums: JobSums,
        q_counts: dict[str, dict[str, int]],
    ) -> None:
        self.sums, self.counts, self.items = sums, q_counts, items
        self.res, self.version = res, res.version
        self.stamps, self.keys, self.delta = dict(sums.stamps), set(sums.sums), ()
        self.leaf, self.total, self.present, self.out = {}, {}, {}, {}
        if len(self.kept) > 2 * len(items) + 64:  # forget departed queues
            self.kept.clear()

    def _moved_shares(self, sums: JobSums, delta: Mapping[str, IntVec]) -> list[str]:
        """The queues whose share may have moved since the last close."""
        out = [*delta, *self.delta]
        stamps = sums.stamps
        if stamps != self.stamps:
            kept = self.stamps
            out += [q for q, n in stamps.items() if kept.get(q) != n]
            self.stamps = dict(stamps)
        if sums.sums.keys() != self.keys:  # a sum went or came without moving (no stamp)
            out += self.keys ^ sums.sums.keys()
            self.keys = set(sums.sums)
        return out

    def _take_shares(
        self,
        queues: Mapping[str, QueueInfo],
        names: Iterable[str],
        sums: Mapping[str, IntVec],
        delta: Mapping[str, IntVec],
    ) -> set[str]:
        """Bring the shares of ``names`` up to date; return the queues whose total moved."""
        touched: set[str] = set()
        leaf = self.leaf
        for q in dict.fromkeys(names):
            vec, more = sums.get(q), delta.get(q)
            share = vec if more is None else more if vec is None else vec + more
            old = leaf.get(q)
            if old is None and share is None:
                continue
            if old is not None and share is not None and old.tobytes() == share.tobytes():
                continue
            leaf[q] = None if share is None else share.copy()
            self._carry(queues, q, old, leaf[q], touched)
        return touched

    def _carry(
        self,
        queues: Mapping[str, QueueInfo],
        name: str,
        old: IntVec | None,
        new: IntVec | None,
        touched: set[str],
    ) -> None:
        """Move the totals of ``name`` and its ancestors from share ``old`` to ``new``."""
        total, present = self.total, self.present
        step = (new is not None) - (old is not None)
        seen: set[str] = set()
        while name and name not in seen:
            seen.add(name)
            touched.add(name)
            acc = total.get(name)
            if acc is not None and old is not None:
                acc = acc - old  # never changed in place: statuses' keys were read from it
            if new is not None:
                acc = new if acc is None else acc + new
            if acc is not None:
                total[name] = acc
            present[name] = present.get(name, 0) + step
            q = queues.get(name)
            name = q.parent if q is not None else ""

    def _restate(
        self,
        queues: Mapping[str, QueueInfo],
        res: ResourceIndex,
        q_counts: Mapping[str, Mapping[str, int]],
        none: Mapping[str, int],
        touched: set[str] | None,
    ) -> None:
        """Work out the statuses of the ``touched`` queues (None: of every queue, in order;
        the others are in ``out`` already, in order)."""
        kept, out, total, present = self.kept, self.out, self.total, self.present
        for qname in queues if touched is None else [q for q in touched if q in queues]:
            qvec = total.get(qname) if present.get(qname) else None
            out[qname] = queue_status(kept, qname, res, qvec, q_counts.get(qname, none))
