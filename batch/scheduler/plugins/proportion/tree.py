"""Fair share down the queue tree (``fairShare: true``; docs/scheduler.md#the-fair-share-model).

Why this exists: a team splits its share between its own queues (root → teamA → {a1, a2}) and
expects the split to stay inside the team: teamB with one queue deserves as much as teamA with
two when their weights are equal. Water-filling flat over every queue gave each queue its
weight's part of the whole cluster, so a team's share grew with its number of queues.

The cluster is water-filled (proportion's ``fill_rows``: the same rounds, guarantee floors and
capability caps) among root's children by weight over each subtree's demand, then each
subtree's deserved among its own children, down to the queues that hold jobs. A subtree's
demand is the sum of its queues' demands, at most the subtree's real capability. A queue that
holds jobs and has child queues too (VCJob admission refuses that; pods of an operator, or
children added later, can still do it) shares its subtree's deserved as one more child of its
own weight, guarantee and capability: that part is its jobs' deserved. Only queues with jobs
and their ancestors take part. With every queue directly under root, the common case, this is
the flat water-filling exactly; ``QueueVectors`` then keeps no tree and the flat path runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from batch.model.parse import ROOT_QUEUE
from batch.scheduler.framework.shares import F

if TYPE_CHECKING:
    from batch.scheduler.plugins.proportion.attrs import QueueAttr

#: one level's water-filling: (queues, their demands as rows, what they share) -> deserved rows
Level = Callable[[Sequence["QueueAttr"], F, F], F]


@dataclass(slots=True)
class TreeFill:
    """``rows``: the deserved of each queue's own jobs, one row per queue as given; ``subtree``:
    what each queue taking part deserves with everything under it (root: the cluster)."""

    rows: F
    subtree: dict[str, F]


class QueueTree:
    """The queues' parents (``framework.queue_tree.resolved_parents``) and, for the queues that
    hold no jobs in a session, their figures from the spec (weight, guarantee, capabilities)."""

    __slots__ = ("inner", "parent")

    def __init__(self, parent: Mapping[str, str], inner: Mapping[str, QueueAttr]) -> None:
        self.parent = parent
        self.inner = inner

    @staticmethod
    def flat(parent: Mapping[str, str]) -> bool:
        return all(p == ROOT_QUEUE for p in parent.values())

    def inner_figures(self, attrs: Mapping[str, QueueAttr]) -> dict[str, QueueAttr]:
        """The ancestors of the queues with jobs that hold no job themselves, root left out,
        each with the sums of its subtree's figures (deserved, allocated, inqueue, request,
        held) and its own real capability: what such a queue publishes (its metric and
        annotation), since its subtree's queues share what it deserves."""
        out: dict[str, QueueAttr] = {}
        for name, a in attrs.items():
            node = self.parent.get(name, ROOT_QUEUE)
            while node != ROOT_QUEUE and node not in attrs and node in self.inner:
                got = out.get(node)
                if got is None:
                    got = out[node] = dataclasses.replace(
                        self.inner[node], held=np.zeros_like(a.allocated)
                    )
                    got.deserved = np.zeros_like(a.allocated)
                for f in ("deserved", "allocated", "inqueue", "request", "held"):
                    mine = getattr(a, f)
                    if mine is not None:
                        setattr(got, f, getattr(got, f) + mine)
                node = self.parent.get(node, ROOT_QUEUE)
        return out

    def fill(self, attrs: Sequence[QueueAttr], request: F, total: F, level: Level) -> F:
        return self.fill_nodes(attrs, request, total, level).rows

    def fill_nodes(
        self, attrs: Sequence[QueueAttr], request: F, total: F, level: Level
    ) -> TreeFill:
        """Share ``total`` down the tree over ``attrs`` (the queues with jobs) and their
        demands ``request`` (one row each)."""
        out = TreeFill(np.zeros_like(request), {ROOT_QUEUE: total})
        _Walk(self, attrs, request, level).share(ROOT_QUEUE, total, out)
        return out


class _Walk:
    """One session's tree: the queues with jobs, their ancestors, and the subtrees' demands."""

    def __init__(
        self, tree: QueueTree, attrs: Sequence[QueueAttr], request: F, level: Level
    ) -> None:
        self.tree, self.attrs, self.request, self.level = tree, attrs, request, level
        self.row = {a.queue.name: i for i, a in enumerate(attrs)}
        #: each node's children taking part, in the order of their first queue with jobs
        self.kids: dict[str, list[str]] = {}
        #: each node's first queue with jobs (the order ``fill_rows`` gets, as when flat)
        self.first: dict[str, int] = {}
        self.demands: dict[str, F] = {}
        for name, i in self.row.items():
            node = name
            while node != ROOT_QUEUE and node not in self.first:
                self.first[node] = i
                parent = tree.parent.get(node, ROOT_QUEUE)
                self.kids.setdefault(parent, []).append(node)
                node = parent

    def spec(self, node: str) -> QueueAttr:
        i = self.row.get(node)
        return self.attrs[i] if i is not None else self.tree.inner[node]

    def demand(self, node: str) -> F:
        """A queue's demand; a subtree's: its queues' demands summed, at most its real
        capability."""
        got = self.demands.get(node)
        if got is None:
            i = self.row.get(node)
            kids = self.kids.get(node)
            if not kids:
                assert i is not None
                row: F = self.request[i]
                return row
            got = sum((self.demand(k) for k in kids), np.zeros_like(self.request[0]))
            if i is not None:
                got = got + self.request[i]
            got = self.demands[node] = np.minimum(got, self.spec(node).real_capability)
        return got

    def share(self, node: str, amount: F, out: TreeFill) -> None:
        """Water-fill ``amount`` (what ``node`` deserves) among its children and, if it holds
        jobs, its own jobs; then down each child's subtree."""
        own = self.row.get(node)
        parts = [(self.first[k], k) for k in self.kids.get(node, ())]
        if own is not None:
            parts.append((own, ""))  # "": the node's own jobs
        parts.sort()
        members = [self.spec(k) if k else self.attrs[i] for i, k in parts]
        demand = np.stack([self.demand(k) if k else self.request[i] for i, k in parts])
        for (i, k), got in zip(parts, self.level(members, demand, amount), strict=True):
            if not k:
                out.rows[i] = got
                continue
            out.subtree[k] = got
            if k in self.kids:
                self.share(k, got, out)
            else:
                out.rows[i] = got
