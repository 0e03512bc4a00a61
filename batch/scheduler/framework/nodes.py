"""The session's node view: mutable copies of the cache's node matrices, shared metadata.

A session never copies the cluster's object graph; it copies the per-node used/releasing/
pipelined matrices (a few MB at 10,000 nodes) and logs which node indexes it changed, so the
placement engine can refresh only those.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from batch.model.cache import ClusterCache
from batch.model.info import TaskInfo
from batch.model.nodes import NodeArrays
from batch.model.resources import IntVec

FloatVec = npt.NDArray[np.float64]
BoolVec = npt.NDArray[np.bool_]

#: answer ``has_future`` and ``alloc_total`` from what the cache kept (by the generations of
#: what they read) rather than from a pass over the node matrices (tests switch it off)
KEEP = True
_ALLOC_TOTAL = "nodes.alloc_total"
#: keep ``valid`` across sessions by the node metadata generation (tests switch it off)
KEEP_VALID = True
_VALID = "nodes.valid"


class SessionNodes:
    """The session's node view: mutable copies of used/releasing/pipelined, shared metadata."""

    def __init__(self, cache: ClusterCache) -> None:
        arrays = cache.nodes
        n = arrays.count
        self.arrays: NodeArrays = arrays
        self.n = n
        self.dims = len(cache.resources)
        self.alloc = arrays.alloc[:, :n]
        self.used = arrays.used[:, :n].copy()
        # releasing and pipelined change only in sessions that evict or pipeline: until then
        # (``own_future``) they are read-only views of the cache's, which no session changes
        releasing = arrays.releasing[:, :n]
        pipelined = arrays.pipelined[:, :n]
        releasing.flags.writeable = pipelined.flags.writeable = False
        self.releasing = releasing
        self.pipelined = pipelined
        self._own_future = False
        self.idle = self.alloc - self.used
        self.valid: BoolVec = self._valid(cache.derived) if KEEP_VALID else self._mask()
        if KEEP:
            self.has_future = arrays.has_future(n)
        else:
            self.has_future = bool(releasing.any() or pipelined.any())
        #: every slot below ``n`` is schedulable (``valid_sum`` needs no mask)
        self.all_valid = False
        self._total: IntVec | None = None
        if KEEP:
            self._keep_total(cache.derived)
        #: ``has_future`` and the cache's node change record (``NodeArrays.stamp``) at open
        self.open_future = self.has_future
        self.open_stamp = arrays.stamp
        self.log: list[int] = []  # node indexes changed in this session, in order
        self._moved: tuple[int, set[int]] = (0, set())
        #: per log entry, the template placed there by ``Session.place`` (-1: another change)
        self.log_tids: list[int] = []
        self._ports: dict[tuple[str, str, int], npt.NDArray[np.int32]] = {}
        self.placed: dict[int, list[TaskInfo]] = {}  # in-session additions per node
        self.placed_anti = 0  # in-session placed tasks with required pod anti-affinity
        self._free: tuple[int, IntVec] | None = None
        self._cols: dict[int, tuple[int, tuple[list[int], list[int], list[int]]]] = {}
        #: allocatable columns as Python ints: a session never changes ``alloc`` (the
        #: cache's), so each is read once (``cols``' callers only read what it returns)
        self._alloc_cols: dict[int, list[int]] = {}

    def _mask(self) -> BoolVec:
        """The nodes that are present and schedulable (``valid``)."""
        arrays, n = self.arrays, self.n
        mask: BoolVec = arrays.schedulable[:n] & arrays.present[:n]
        return mask

    def _valid(self, derived: dict[str, object]) -> BoolVec:
        """``_mask`` kept (read-only) in ``derived`` while node membership and metadata (what
        readiness follows: ``NodeArrays.meta_gen``) and the node count are the same."""
        arrays = self.arrays
        key = (arrays, arrays.meta_gen, self.n)
        kept: Any = derived.get(_VALID)
        if kept is None or kept[0] != key:
            mask = self._mask()
            mask.flags.writeable = False
            kept = derived[_VALID] = (key, mask)
        valid: BoolVec = kept[1]
        return valid

    def own_future(self) -> None:
        """Make ``releasing`` and ``pipelined`` the session's own copies (before changing
        either)."""
        if not self._own_future:
            self.releasing = self.releasing.copy()
            self.pipelined = self.pipelined.copy()
            self._own_future = True

    def changed(self, idx: int, tid: int = -1) -> None:
        """Log a change of node ``idx`` (``tid``: one more pod of that template placed)."""
        self.log.append(idx)
        self.log_tids.append(tid)

    def moved(self) -> set[int]:
        """The node indexes this session changed so far (``log`` as a set; do not modify)."""
        pos, seen = self._moved
        log = self.log
        if pos < len(log):
            seen.update(log[pos:])
            self._moved = (len(log), seen)
        return seen

    def name(self, idx: int) -> str:
        return self.arrays.name_of(idx)

    def cols(self, idx: int) -> tuple[list[int], list[int], list[int]]:
        """(allocatable, used, future idle) of one node as Python ints (scalar fast paths)."""
        pos = len(self.log)
        hit = self._cols.get(idx)
        if hit is not None and hit[0] == pos:
            return hit[1]
        alloc = self._alloc_cols.get(idx)
        if alloc is None:
            alloc = self._alloc_cols[idx] = self.alloc[:, idx].tolist()
        used = self.used[:, idx].tolist()
        if self.has_future:
            fut = (self.idle[:, idx] + self.releasing[:, idx] - self.pipelined[:, idx]).tolist()
        else:
            fut = [a - u for a, u in zip(alloc, used, strict=True)]
        got = (alloc, used, fut)
        self._cols[idx] = (pos, got)
        return got

    def valid_sum(self, m: IntVec) -> IntVec:
        """Σ over schedulable nodes of a (dims, nodes) matrix, per dimension (no copy of the
        selected columns, unlike ``m[:, valid].sum(axis=1)``)."""
        if self.all_valid:
            out: IntVec = np.add.reduce(m, axis=1)
        else:
            out = np.add.reduce(m, axis=1, where=self.valid)
        return out

    def _keep_total(self, derived: dict[str, object]) -> None:
        """``alloc_total`` and ``all_valid`` from ``derived``, kept there by node membership,
        metadata and allocatable generation (what ``valid`` and ``alloc`` follow)."""
        arrays = self.arrays
        key = (arrays, arrays.meta_gen, arrays.alloc_gen, self.n, self.dims)
        kept: Any = derived.get(_ALLOC_TOTAL)
        if kept is None or kept[0] != key:
            kept = (key, self.valid_sum(self.alloc), bool(self.valid.all()))
            derived[_ALLOC_TOTAL] = kept
        self._total, self.all_valid = kept[1], kept[2]

    def alloc_total(self) -> IntVec:
        """Σ over schedulable nodes of allocatable, per dimension (``valid_sum(alloc)``)."""
        if self._total is None:
            return self.valid_sum(self.alloc)
        out: IntVec = self._total.copy()
        return out

    def future_idle(self) -> IntVec:
        return self.idle + self.releasing - self.pipelined

    def free_total(self) -> IntVec:
        """Σ over schedulable nodes of max(0, FutureIdle), per dimension (cached per change)."""
        pos = len(self.log)
        if self._free is None or self._free[0] != pos:
            fut = self.future_idle() if self.has_future else self.idle
            self._free = (pos, self.valid_sum(np.clip(fut, 0, None)))
        return self._free[1]

    def port_counts(self, port: tuple[str, str, int]) -> npt.NDArray[np.int32] | None:
        own = self._ports.get(port)
        if own is not None:
            return own
        base = self.arrays.ports.get(port)
        return base[: self.n] if base is not None else None

    def add_ports(self, idx: int, ports: Iterable[tuple[str, str, int]], sign: int) -> None:
        for p in ports:
            own = self._ports.get(p)
            if own is None:
                base = self.arrays.ports.get(p)
                own = (
                    base[: self.n].copy() if base is not None else np.zeros(self.n, dtype=np.int32)
                )
                self._ports[p] = own
            own[idx] += sign
